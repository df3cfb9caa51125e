"""Free loopback TCP ports, for the process groups and servers tests set up themselves."""

import contextlib
import http.server
import random
import socket
import threading


def free_port() -> int:
    """A free port that is bound later by another process (a gloo rendezvous in spawned ranks, seconds after):
    free_server_port's range, as the OS's own pick (the ephemeral range) is what Ray's outgoing connections take
    meanwhile."""
    return free_server_port()


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


@contextlib.contextmanager
def answering_server(status: int = 200, tls_dir=None):
    """An HTTP server on a free loopback port that answers every GET with `status`, for the checks that ask only
    whether a server answers (a tracking server's reachability); yields its URL. `tls_dir`: HTTPS, with a
    self-signed certificate made there (a server on a private CA, as clients without its CA see it)."""
    class Answer(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            self.send_response(status)
            self.end_headers()
            self.wfile.write(b"OK" if status == 200 else b"")

        def log_message(self, *args):
            pass

    server = http.server.HTTPServer(("127.0.0.1", 0), Answer)
    if tls_dir is not None:
        import ssl
        import subprocess

        key, cert = f"{tls_dir}/key.pem", f"{tls_dir}/cert.pem"
        subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", key, "-out", cert,
                        "-days", "1", "-subj", "/CN=127.0.0.1"], check=True, capture_output=True)
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(cert, key)
        server.socket = context.wrap_socket(server.socket, server_side=True)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"{'https' if tls_dir is not None else 'http'}://127.0.0.1:{server.server_port}"
    finally:
        server.shutdown()
        server.server_close()
