"""The pretraining job's summary and PretrainResult over the metrics jobs/pretrain._run hands them. A two-phase
job's unprefixed eval_before/* are phase 2's step 0, which scores phase 1's trained weights, not the job's start."""

from jobs.runtime import pretrain_summary
from jobs.config.pretrain import PretrainConfig
from jobs.pretrain import PretrainResult, summary

PHASE1 = {"eval_before/mlm_acc": 0.0, "eval_after/mlm_acc": 0.45, "eval_before/nsp_acc": 0.5,
          "eval_after/nsp_acc": 0.80, "eval_after/mlm_tokens": 9000}
PHASE2 = {"eval_before/mlm_acc": 0.43, "eval_after/mlm_acc": 0.50, "eval_before/nsp_acc": 0.79,
          "eval_after/nsp_acc": 0.84, "eval_after/mlm_tokens": 36000, "tracking_failures": 0,
          "tracking_undelivered": 0, "checkpoints_ignored": 0}


def two_phase() -> tuple[PretrainResult, PretrainConfig]:
    metrics = {**{f"phase1/{k}": v for k, v in PHASE1.items()}, **PHASE2}  # merged as _run merges them
    cfg = PretrainConfig()
    cfg.phase2.max_steps, cfg.data.max_seq_len, cfg.phase2.max_seq_len = 100, 128, 512
    return PretrainResult("two", metrics, "/ck", "/rel", "/data", {"run_id": "abc"}), cfg


def line(text: str, start: str) -> str:
    return next(x for x in text.splitlines() if x.startswith(start))


def test_a_two_phase_summary_starts_from_phase_1s_before(monkeypatch):
    """It printed `0.4300 before -> 0.5000 after`: phase 2's start as the job's, and phase 1's range nowhere."""
    monkeypatch.setattr(pretrain_summary, "rejects_line", lambda m, d: "-")
    r, cfg = two_phase()
    text = summary(r, cfg, "")
    mlm = line(text, "MLM accuracy")
    assert "phase 1 0.0000 -> 0.4500 (128 tokens, 9,000 masked)" in mlm, mlm
    assert "phase 2 0.4300 -> 0.5000 (512 tokens, 36,000 masked)" in mlm, mlm
    nsp = line(text, "NSP accuracy")
    assert "phase 1 0.5000 -> 0.8000" in nsp and "phase 2 0.7900 -> 0.8400" in nsp, nsp
    assert "before" not in mlm + nsp  # "before" read as the job's start


def test_a_two_phase_result_starts_from_phase_1s_before():
    r, _ = two_phase()
    assert (r.mlm_acc_before, r.mlm_acc_after) == (0.0, 0.50)


def test_a_single_phase_summary_is_as_before(monkeypatch):
    monkeypatch.setattr(pretrain_summary, "rejects_line", lambda m, d: "-")
    r = PretrainResult("one", dict(PHASE1, checkpoints_ignored=0), "/ck", "/rel", "/data", {"run_id": "abc"})
    text = summary(r, PretrainConfig(), "")
    assert line(text, "MLM accuracy") == ("MLM accuracy     0.0000 before -> 0.4500 after "
                                          "(held-out, 9,000 masked tokens)")
    assert line(text, "NSP accuracy") == "NSP accuracy     0.5000 before -> 0.8000 after"
    assert (r.mlm_acc_before, r.mlm_acc_after) == (0.0, 0.45)


def test_the_quickstarts_summary_starts_a_two_phase_pretraining_at_phase_1s_before():
    from types import SimpleNamespace

    from jobs import quickstart

    r, _ = two_phase()
    swept = SimpleNamespace(name="sweep", best_seeds=0, metric="eval/accuracy", best_score=0.8, seeds={},
                            evaluation=None, mlflow={})
    assert "MLM accuracy 0.0000 -> 0.5000;" in line(quickstart.summary(r, swept), "pretrained")
