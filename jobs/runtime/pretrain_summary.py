"""What a pretraining job says when it ends: its result (PretrainResult, what jobs/pretrain.run returns), the corpus's
accounting (logged as data/* metrics and printed) and the summary it prints, read from the result's metrics."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from jobs.runtime import console

if TYPE_CHECKING:
    from jobs.config.pretrain import PretrainConfig


@dataclass
class PretrainResult:
    run_name: str
    # the last report's metrics, eval_before/* and eval_after/* included; a two-phase job's are phase 2's, and
    # phase 1's under phase1/ (phase 2's eval_before/* score phase 1's trained weights, not the job's start)
    metrics: dict
    checkpoint_path: str  # the final resume checkpoint (sharded engine state + release/)
    release_dir: str  # HF-format checkpoint with tokenizer, loads in transformers
    data_dir: str
    mlflow: dict = field(default_factory=dict)  # run_id, model_uri, registered_model, version, alias

    @property
    def mlm_acc_before(self) -> float:
        """At the job's start: phase 1's for a two-phase job, scored on phase 1's held-out examples at its length."""
        return self.metrics.get("phase1/eval_before/mlm_acc", self.metrics["eval_before/mlm_acc"])

    @property
    def mlm_acc_after(self) -> float:
        return self.metrics["eval_after/mlm_acc"]


def data_metrics(manifest: dict) -> dict:
    """What the corpus gave: documents read and kept, every rejected one under its reason (`data/rejected/<reason>`:
    a run never drops bad input silently), text cut out of documents as `data/cut/<reason>` (NOT_DOCUMENTS), and the
    examples' [UNK] tokens (`data/unknown_tokens`, of `data/tokens`; sets prepared before it was counted lack it)."""
    from pipelines.rejects import NOT_DOCUMENTS, rejected_documents

    counts, rejects = manifest["counts"], manifest["rejects"]
    return {"data/documents_read": counts["documents_read"], "data/documents_kept": counts["documents_kept"],
            "data/documents_rejected": rejected_documents(rejects),
            **{f"data/{'cut' if r in NOT_DOCUMENTS else 'rejected'}/{r}": n for r, n in sorted(rejects.items())},
            "data/examples_train": counts["examples_train"],
            **{f"data/{k}": counts[k] for k in ("tokens", "unknown_tokens") if "unknown_tokens" in counts}}


def rejects_line(metrics: dict, data_dir: str) -> str:
    """The summary's line for the corpus: how many documents were rejected, by reason, what was cut, and where."""
    from pipelines.rejects import rejects_said

    counts = {k.rsplit("/", 1)[1]: int(v) for k, v in metrics.items() if k.startswith(("data/rejected/", "data/cut/"))}
    return rejects_said(int(metrics.get("data/documents_read", 0)), counts, f"{data_dir}/rejects.jsonl")


def summary(r: PretrainResult, cfg: PretrainConfig, dashboard: str) -> str:
    """The lines a finished job prints: its held-out accuracies, corpus, checkpoints, MLflow run and where to look."""
    from jobs.registry.metric_logger import outage_line
    from jobs.registry.tracking import redact

    m = r.metrics
    store = redact(cfg.tracking.tracking_uri)  # a summary is printed and kept in logs: no credentials
    ui = (f"mlflow ui --backend-store-uri {store} --host 127.0.0.1 --port 5000"
          if store.startswith("sqlite") else store)
    lines = [
        "",
        "=" * 72,
        f"run              {r.run_name}",
        *eval_lines(m, cfg),
        f"prepared data    {r.data_dir}",
        f"corpus           {rejects_line(m, r.data_dir)}",
        f"checkpoint       {r.checkpoint_path}" + (f" ({int(m['checkpoints_ignored'])} partial or unregistered "
                                                   "checkpoint folders ignored, listed above)"
                                                   if m.get("checkpoints_ignored") else ""),
        f"release (HF)     {r.release_dir}",
        f"MLflow run       {r.mlflow.get('run_id')} in {store}",
        f"tracking         {outage_line(m)}",
    ]
    if r.mlflow.get("version"):
        lines.append(f"registered model {r.mlflow['registered_model']} v{r.mlflow['version']} "
                     f"(alias @{r.mlflow['alias']}): models:/{r.mlflow['registered_model']}@{r.mlflow['alias']}")
    lines += [f"MLflow UI        {ui}",
              f"Ray dashboard    {dashboard or 'not running'} (while Ray runs; `ray start --head` keeps one up)",
              console.logs_line(),
              "=" * 72]
    return "\n".join(lines)


def eval_lines(m: dict, cfg: PretrainConfig) -> list[str]:
    """The summary's held-out accuracies. A two-phase job gets one range per phase: its unprefixed eval_before/* are
    phase 2's step 0, phase 1's trained weights, and each phase scores its own examples at its own length."""
    if "phase1/eval_before/mlm_acc" not in m:
        return [f"MLM accuracy     {m['eval_before/mlm_acc']:.4f} before -> {m['eval_after/mlm_acc']:.4f} after "
                f"(held-out, {m['eval_after/mlm_tokens']:,} masked tokens)",
                *([f"NSP accuracy     {m['eval_before/nsp_acc']:.4f} before -> {m['eval_after/nsp_acc']:.4f} after"]
                  if "eval_after/nsp_acc" in m else [])]
    phases = (("phase 1", "phase1/", cfg.data.max_seq_len), ("phase 2", "", cfg.phase2.max_seq_len))

    def ranges(metric: str, sizes: bool) -> str:
        return ", ".join(f"{name} {m[f'{p}eval_before/{metric}']:.4f} -> {m[f'{p}eval_after/{metric}']:.4f}"
                         + (f" ({n} tokens, {m[f'{p}eval_after/mlm_tokens']:,} masked)" if sizes else "")
                         for name, p, n in phases)
    return [f"MLM accuracy     held-out, {ranges('mlm_acc', True)}",
            *([f"NSP accuracy     {ranges('nsp_acc', False)}"] if "eval_after/nsp_acc" in m else [])]
