"""Whether a training worker's node sees the run's storage, asked at the worker's start, before any training.

Ray Train and Tune keep a run in `output_dir` (a folder: a URI is refused by jobs/config/sections.py), which on a
cluster of machines every node must mount. Their driver writes a marker there (`.validate_storage_marker`, written
by the StorageContext that `RunConfig(storage_path=...)` makes), and Ray looks for it from a worker's node only when
that worker first saves a checkpoint. A folder only the driver's node had (/tmp/runs) so failed a run at its first
checkpoint, which for pretraining is by default its last step: the whole run trained, then failed, and each retry
(train.max_failures) started again from step 0. Each worker now looks for the same marker as it starts.
"""

from __future__ import annotations

import socket
import time

WAIT_S = 10.0  # a shared folder shows a file another machine has just written within seconds (NFS caches lookups)


def marker_name() -> str:
    """Ray's own name for the marker (Train V2's; Tune's StorageContext writes the same name)."""
    try:
        from ray.train.v2._internal.constants import VALIDATE_STORAGE_MARKER_FILENAME

        return VALIDATE_STORAGE_MARKER_FILENAME
    except ImportError:  # a Ray that moved it: the name it has had since storage contexts began
        return ".validate_storage_marker"


def this_node() -> str:
    try:
        import ray.util

        return f"{socket.gethostname()} ({ray.util.get_node_ip_address()})"
    except Exception:  # noqa: BLE001 - the name is for the message only
        return socket.gethostname()


def require_shared_storage(storage, node: str = "", wait_s: float | None = None, poll_s: float = 1.0) -> None:
    """Raise unless this node sees the marker the driver wrote in the run's folder. `storage` is the worker's
    StorageContext (`ray.train.get_context().get_storage()`, `ray.tune.get_context().get_storage()`): what is
    read here is its `experiment_fs_path` on its `storage_filesystem`, as Ray's own check at a checkpoint reads."""
    import pyarrow.fs

    marker = f"{storage.experiment_fs_path.rstrip('/')}/{marker_name()}"
    deadline = time.monotonic() + (WAIT_S if wait_s is None else wait_s)
    while storage.storage_filesystem.get_file_info(marker).type == pyarrow.fs.FileType.NotFound:
        if time.monotonic() >= deadline:
            raise RuntimeError(
                f"the run's storage {storage.experiment_fs_path} is not shared with this worker's node "
                f"{node or this_node()}: the driver's node wrote {marker_name()} there and this node does not see "
                f"it, so the first checkpoint this worker saves would fail, after training. Set output_dir (a "
                f"sweep's finetune.output_dir) to a folder every node of the cluster mounts at the same path (EFS, "
                f"NFS, a ReadWriteMany volume)")
        time.sleep(poll_s)
