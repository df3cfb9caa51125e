"""Free loopback TCP ports, for the process groups and servers tests set up themselves."""

import random
import socket


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def free_server_port() -> int:
    """A free port for a server a test stops and restarts on the same port: outside Linux's ephemeral range
    (32768-60999, where the OS picks the local port of every outgoing connection) and Ray's worker ports
    (10002-19999), so no other process on the machine is handed it while the server is down."""
    for port in random.sample(range(20000, 32768), 200):
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise RuntimeError("no free port in 20000-32767")
