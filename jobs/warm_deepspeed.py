"""Build DeepSpeed's JIT-compiled CPU ops once at set-up (1-3 min each), so no job or test pays for it.

    python -m jobs.warm_deepspeed            # ops of the default path: gloo shm comm, fused Adam
    python -m jobs.warm_deepspeed --offload  # + CPU Adam, which only ZeRO-Offload uses

They land in this environment's extension cache (`<venv>/torch_extensions`, or TORCH_EXTENSIONS_DIR when set:
jobs/runtime/op_locks.py), which every later process of this environment reuses and no other checkout touches.
"""

import logging
import os
import shutil
import sys
import sysconfig
import time
from pathlib import Path

os.environ.setdefault("DS_ACCELERATOR", "cpu")

from deepspeed.ops.op_builder.cpu import CPUAdamBuilder, FusedAdamBuilder, ShareMemCommBuilder  # noqa: E402
from torch.utils.cpp_extension import get_cxx_compiler  # noqa: E402

from jobs.runtime.op_locks import before_op_loads  # noqa: E402


def missing_build_tools() -> str:
    """What the op build lacks on this machine, as one `error:` line ("" when nothing). torch.utils.cpp_extension
    compiles with its compiler ($CXX, else `c++`) against Python's headers; without either the build ends in a
    40-line traceback whose one useful line sits inside ninja's log."""
    cxx = get_cxx_compiler()
    if not shutil.which(cxx):
        return (f"error: set-up compiles DeepSpeed's CPU ops and needs a C++ compiler, but {cxx!r} (CXX, else c++) "
                "is not found: install one (Debian/Ubuntu: apt install g++) or set CXX to it")
    headers = Path(sysconfig.get_paths()["include"], "Python.h")
    if not headers.is_file():
        python = f"python{sys.version_info.major}.{sys.version_info.minor}"
        return (f"error: set-up compiles DeepSpeed's CPU ops and needs Python's headers, but {str(headers)!r} is not "
                f"there: install them (Debian/Ubuntu: apt install {python}-dev)")
    return ""


def main(argv: list[str]) -> None:
    before_op_loads()  # a build killed earlier (a cancelled set-up) does not block this one
    builders = [ShareMemCommBuilder(), FusedAdamBuilder()]
    if "--offload" in argv:
        builders.append(CPUAdamBuilder())
    # refused only where a build fails: an op already in the cache loads without compiling (a .venv copied into an
    # image without g++, a compiler removed after set-up); torch's warnings meanwhile name the same missing compiler
    missing = missing_build_tools()
    torch_log = logging.getLogger("torch.utils.cpp_extension")
    level = torch_log.level
    if missing:
        torch_log.setLevel(logging.ERROR)
    try:
        for builder in builders:
            start = time.perf_counter()
            try:
                builder.load(verbose=False)
            except Exception as e:
                if missing:  # most likely the cause; the build's own last line, in case it is not
                    last = (str(e).strip().splitlines() or [type(e).__name__])[-1][:200]
                    sys.exit(f"{missing} (building {builder.NAME} failed: {last})")
                raise
            print(f"deepspeed op {builder.NAME}: ready in {time.perf_counter() - start:.1f}s", flush=True)
    finally:
        torch_log.setLevel(level)


if __name__ == "__main__":
    main(sys.argv[1:])
