"""Build DeepSpeed's JIT-compiled CPU ops once at set-up (1-3 min each), so no job or test pays for it.

    python -m jobs.warm_deepspeed            # ops of the default path: gloo shm comm, fused Adam
    python -m jobs.warm_deepspeed --offload  # + CPU Adam, which only ZeRO-Offload uses

They land in this environment's extension cache (`<venv>/torch_extensions`, or TORCH_EXTENSIONS_DIR when set:
jobs/runtime/op_locks.py), which every later process of this environment reuses and no other checkout touches.
"""

import os
import sys
import time

os.environ.setdefault("DS_ACCELERATOR", "cpu")

from deepspeed.ops.op_builder.cpu import CPUAdamBuilder, FusedAdamBuilder, ShareMemCommBuilder  # noqa: E402

from jobs.runtime.op_locks import before_op_loads  # noqa: E402

if __name__ == "__main__":
    before_op_loads()  # a build killed earlier (a cancelled set-up) does not block this one
    builders = [ShareMemCommBuilder(), FusedAdamBuilder()]
    if "--offload" in sys.argv[1:]:
        builders.append(CPUAdamBuilder())
    for builder in builders:
        start = time.perf_counter()
        builder.load(verbose=False)
        print(f"deepspeed op {builder.NAME}: ready in {time.perf_counter() - start:.1f}s", flush=True)
