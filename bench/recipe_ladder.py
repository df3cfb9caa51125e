"""The recipe ladder (issue 31): from BERT to the modern encoder one switch at a time, each rung pretrained on the
same corpus and token budget and fine-tuned from its own release checkpoint, in one run.

Rungs, each adding one change to the one before:
  bert         BERT of 2018 (bert_core/model.py): NSP, 15% masking, post-LN, GELU FFN, learned positions, biases
  -nsp         train.nsp=false: MLM only, contiguous pairs
  mask30       train.masking.rate=0.3
  bert-layout  the modern model (bert_core/modern.py) with every switch off: BERT's layout, no token types
  +pre-ln      model.pre_norm=true: pre-LN blocks, a final norm
  +geglu       model.glu=true: GeGLU feed-forward of width ~8H/3 (BERT's 4H parameters, but I rounds to a multiple of
               64: at tiny, H=64, I=192 for 171, 7.5% more non-embedding parameters; the table prints them)
  +rope        model.rotary=true: rotary positions, no position table
  +modern-attn no biases, local attention but in every third block (tiny's 2 blocks: the second local), norm_eps
               1e-12 -> 1e-5: ModernBERT's architecture, rows unpacked
  +packing     train.packing=true: several examples per row, attention within each = model.recipe=modern

Each rung: jobs/pretrain.py on the quickstart's config (tiny, 2 workers, ZeRO-2, the installed-docs corpus,
--steps steps of 2 x 32 sequences of up to 128 tokens: the same budget for every rung), then pkgdocs fine-tuned
from its release with few labelled rows per class (64), over --seeds seeds, by the job's own step loop
(bench/hf_finetune_reference.py's engine_run, extended to score the evaluation split): per seed the epoch the
select split chooses, judged once on dev. Reported per rung: the dev accuracy's median and spread over seeds,
the paired-bootstrap difference to the rung before (rows resampled; a row's score is its mean correctness over
the seeds), held-out MLM accuracy after pretraining, and pretraining tokens/s (mean over the logged windows). A rung
that packs also reports how full packing gets on its prepared rows: examples per packed row and the share of examples
that share a row (the collator's first fit over micro-batches of the stored rows), since rows near max_seq_len leave
nothing to pack and the rung then measures the same rows as the one before.

    python bench/recipe_ladder.py                       # 600 steps, 5 seeds: ~30 min on 2 cores
    python bench/recipe_ladder.py --steps 100 --seeds 2 --rungs bert +packing

Every invocation pretrains fresh runs (each rung's run name carries the invocation's start time): a rerun in the same
--out is never refused as finished, nor a resume of an earlier invocation's checkpoint with another budget.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import statistics
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # `python bench/...`: the bench package too

import numpy as np  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
MODERN = ["model.recipe=modern", "train.packing=false"]  # the recipe's other defaults (no NSP, 30%) already
# The variants are not registered (no transformers class loads them); their dropout stays the modern recipe's 0.
LAYOUT = [*MODERN, "tracking.registered_model=", "model.pre_norm=false", "model.glu=false", "model.rotary=false",
          "model.attention_bias=true", "model.mlp_bias=true", "model.norm_bias=true", "model.classifier_bias=true",
          "model.global_attn_every_n_layers=1", "model.norm_eps=1e-12"]
RUNGS = {
    "bert": [],
    "-nsp": ["train.nsp=false"],
    "mask30": ["train.nsp=false", "train.masking.rate=0.3"],
    "bert-layout": LAYOUT,
    "+pre-ln": [*LAYOUT, "model.pre_norm=true"],
    "+geglu": [*LAYOUT, "model.pre_norm=true", "model.glu=true"],
    "+rope": [*LAYOUT, "model.pre_norm=true", "model.glu=true", "model.rotary=true"],
    "+modern-attn": MODERN,  # no biases, local attention but every third block, norm_eps 1e-5: ModernBERT's
    "+packing": ["model.recipe=modern"],  # the modern recipe as shipped
}


def pretrain(name: str, overrides: list[str], out: Path, steps: int) -> dict:
    from mlflow.tracking import MlflowClient

    from bert_core.config import BertConfig
    from bert_core.modern_config import ModernConfig
    from jobs import pretrain as job
    from jobs.config.io import load_config
    from jobs.config.pretrain import PretrainConfig

    cfg = load_config(PretrainConfig, ROOT / "configs/pretrain/quickstart.yaml", [
        f"run_name={name}", f"output_dir={out}/runs", f"data.output_root={out}/prepared",
        f"corpus.harvest_dir={out}/corpus", f"tracking.tracking_uri=sqlite:///{out}/mlflow.db",
        f"tracking.artifact_location={out}/art", f"train.max_steps={steps}",
        f"optim.warmup_steps={steps // 10}", *overrides])
    start = time.perf_counter()
    result = job.run(cfg)
    packed = packing_fill(result.data_dir, cfg.train.micro_batch_size, cfg.data.max_seq_len) if cfg.train.packing \
        else None
    history = MlflowClient(cfg.tracking.tracking_uri).get_metric_history(result.mlflow["run_id"], "train/tokens_per_s")
    rates = [m.value for m in sorted(history, key=lambda m: m.step)][1:] or [m.value for m in history]
    released = json.loads((Path(result.release_dir) / "config.json").read_text())  # the vocabulary the run had
    model = (ModernConfig if cfg.recipe == "modern" else BertConfig).from_dict(released)
    return {"release": result.release_dir, "mlm_acc": result.mlm_acc_after,
            "mlm_loss": result.metrics["eval_after/mlm_loss"], "tokens_per_s": statistics.mean(rates),
            "params": model.num_parameters(include_embeddings=False), "wall_s": time.perf_counter() - start,
            "packing": packed}


def packing_fill(data_dir: str, batch_size: int, max_seq_len: int) -> tuple[float, float]:
    """(examples per packed row, share of examples sharing their row) of the prepared train rows, packed as
    PretrainingCollator packs (pack_rows, first fit) in micro-batches of `batch_size`, taken in stored order."""
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    from bert_core.masking import pack_rows

    manifest = json.loads((Path(data_dir) / "manifest.json").read_text())
    lengths = np.concatenate([pc.list_value_length(pq.read_table(Path(data_dir) / shard["file"],
                                                                  columns=["input_ids"])["input_ids"]).to_numpy()
                              for shard in manifest["shards"]["train"]])
    bins = [b for s in range(0, len(lengths), batch_size) for b in pack_rows(lengths[s:s + batch_size], max_seq_len)]
    return len(lengths) / len(bins), sum(len(b) for b in bins if len(b) > 1) / len(lengths)


def finetune(init: str, seed: int, corpus: str, lr: float) -> dict:
    """One seed's fine-tune of pkgdocs from `init`, in this (child) process: per epoch the select and dev
    accuracies; the epoch select picks, and dev's per-row correctness there."""
    import torch

    from bench.hf_finetune_reference import MODEL_INPUTS, batches, collate, features, total_steps
    from jobs.config.finetune import FinetuneConfig
    from jobs.config.io import load_config
    from jobs.loops import ft_tasks
    from jobs.workers import finetune_model

    cfg = load_config(FinetuneConfig, ROOT / "configs/finetune/pkgdocs.yaml", [
        f"init={init}", f"task.corpus_dir={corpus}", "task.max_seq_len=128", "task.max_train_per_label=64",
        "task.max_dev_per_label=64", "train.batch_size=32", "train.epochs=4", f"optim.lr={lr}",
        "optim.warmup_ratio=0.1", f"train.seed={seed}"])
    rows = ft_tasks.load_rows(cfg.task)
    cfg.task.labels = list(rows.labels)
    train, select, dev = (features(cfg, r, Path(init)) for r in (rows.train, rows.select, rows.evaluation["dev"]))
    torch.manual_seed(seed)
    model, _ = finetune_model.build_model(cfg, Path(init))
    finetune_model.single_process_group()
    engine = finetune_model.build_engine(model, cfg, total_steps(cfg, len(train["labels"])))

    def correct(feats) -> np.ndarray:
        n, size = len(feats["labels"]), cfg.train.eval_batch_size
        chunks = [collate([{k: feats[k][i] for k in (*MODEL_INPUTS, "labels")} for i in range(s, min(s + size, n))])
                  for s in range(0, n, size)]
        return engine.predict(chunks)["logits"].argmax(-1) == feats["labels"]

    epochs = []
    for epoch in range(cfg.train.epochs):
        for batch in batches(train, cfg.train.batch_size, seed, epoch):
            engine.step(batch)
        epochs.append((correct(select).mean(), correct(dev)))
    chosen = max(range(len(epochs)), key=lambda e: epochs[e][0])  # select chooses; dev judges once
    return {"select": float(epochs[chosen][0]), "dev": float(epochs[chosen][1].mean()), "epoch": chosen,
            "dev_correct": epochs[chosen][1].astype(np.int8).tolist()}


def bootstrap(now: np.ndarray, before: np.ndarray, samples: int = 2000, seed: int = 0) -> tuple[float, float, float]:
    """Paired bootstrap over rows of (now - before): the difference and its 95% interval."""
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, len(now), (samples, len(now)))
    deltas = now[idx].mean(1) - before[idx].mean(1)
    return float(now.mean() - before.mean()), float(np.quantile(deltas, 0.025)), float(np.quantile(deltas, 0.975))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--steps", type=int, default=600, help="pretraining steps per rung (quickstart: 600)")
    p.add_argument("--seeds", type=int, default=5)
    p.add_argument("--lr", type=float, default=1e-3, help="fine-tuning learning rate, every rung")
    p.add_argument("--rungs", nargs="*", default=list(RUNGS), choices=list(RUNGS))
    p.add_argument("--out", default="/tmp/bert-foundry-ladder")
    p.add_argument("--json", default="", help="also write the results here")
    args = p.parse_args()
    os.environ.setdefault("DS_ACCELERATOR", "cpu")
    out = Path(args.out).resolve()
    corpus = str(out / "corpus")
    results, stamp = {}, time.strftime("%Y%m%d-%H%M%S")
    with ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn")) as child:  # one-rank groups
        for name in args.rungs:
            rung = name.replace("+", "plus-").replace("-", "_").strip("_") or "rung"
            r = pretrain(f"{rung}-{stamp}", RUNGS[name], out, args.steps)
            runs = [child.submit(finetune, r["release"], 1000 + s, corpus, args.lr).result() for s in range(args.seeds)]
            r.update(dev=[x["dev"] for x in runs], select=[x["select"] for x in runs],
                     rows=np.mean([x["dev_correct"] for x in runs], axis=0))
            results[name] = r
            packing = "" if r["packing"] is None else \
                f", packing {r['packing'][0]:.2f} examples a row ({r['packing'][1]:.1%} of examples share one)"
            print(f"[ladder] {name}: dev median {statistics.median(r['dev']):.4f} over {args.seeds} seeds, "
                  f"MLM acc {r['mlm_acc']:.4f}, {r['tokens_per_s']:,.0f} tok/s{packing}", flush=True)
    print(f"\nrecipe ladder: {args.steps} pretraining steps x 64 sequences x <=128 tokens per rung; pkgdocs, 64 "
          f"labelled rows per class, {args.seeds} seeds, lr {args.lr}")
    print(f"{'rung':<12} {'dev median':>10} {'spread (min-max)':>17} {'vs rung before [95% CI]':>32} "
          f"{'MLM acc':>8} {'MLM loss':>8} {'tok/s':>8} {'params':>8} {'ex/row':>6}")
    before = None
    for name, r in results.items():
        diff = ""
        if before is not None:
            d, lo, hi = bootstrap(r["rows"], before)
            diff = f"{d:+.4f} [{lo:+.4f}, {hi:+.4f}]"
        print(f"{name:<12} {statistics.median(r['dev']):>10.4f} {min(r['dev']):>8.4f}-{max(r['dev']):<8.4f} "
              f"{diff:>32} {r['mlm_acc']:>8.4f} {r['mlm_loss']:>8.4f} {r['tokens_per_s']:>8,.0f} {r['params']:>8,} "
              f"{'-' if r['packing'] is None else format(r['packing'][0], '.2f'):>6}")
        before = r["rows"]
    if args.json:
        Path(args.json).write_text(json.dumps({k: {**v, "rows": v["rows"].tolist()} for k, v in results.items()},
                                              indent=1))


if __name__ == "__main__":
    main()
