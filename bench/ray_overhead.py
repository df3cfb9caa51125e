"""Ray Train's overhead on the training step: one run under Ray Train and under the plain `deepspeed` launcher.

Both sides run `rank_main` below on every rank: the same BertForPreTraining, the same
jobs.engine.data_parallel.Engine built from the same PretrainConfig (ZeRO-2), the same pre-collated batches
(written once to a .pt file by the driver, so data loading cannot differ), the same thread count,
W warm-up steps and then K timed steps. Only the launcher differs:

  plain  `deepspeed --num_gpus N bench/ds_launch_entry.py SPEC` (DeepSpeed's own launcher; on CPU it
         takes --num_gpus as the number of local ranks), torch.distributed initialised by us.
  ray    TorchTrainer with N workers (process group set up by Ray Train), results via ray.train.report.

A step's time is the slowest rank's (ranks step in lockstep on the gradient all-reduce). Per
repetition the overhead is (ray - plain) / plain, both on the median step (robust to load bursts from
other processes) and on the total of the timed steps (catches periodic stalls the median hides);
repetitions alternate which side goes first, and the summary is the median over repetitions.

Wall time on a machine shared with other jobs swings by tens of percent between runs, so the CPU is
accounted as well: per rank, the stepping thread's CPU and that of the process's other threads
(time.thread_time / process_time), and the CPU of Ray's own processes (GCS, raylet, agents, the Train
controller and its helper actors) over the timed window. "Ray tax" is the CPU only the Ray side
spends, as a share of the plain side's CPU per step: on a node whose cores the ranks fill, that
CPU is taken out of the steps, whatever else runs on the machine.

Ray starts its worker processes at niceness 15 (raylet config `worker_niceness`), the launcher at the
caller's 0. On a machine shared with other jobs that alone decides who gets the cores, so by default
Ray's workers are started at 0 as well (--ray-worker-niceness 15 keeps Ray's default).

CPU (default): tiny preset, seq 128, 2 ranks on gloo, fp32, 1 thread per rank.
GPU (when CUDA is available): base preset, seq 128, NCCL, bf16, one rank per GPU (up to 2), plus
tokens/s and MFU (FLOPs/token from jobs.loops.metrics.flops_per_token, the device's dense bf16 peak from
jobs.loops.metrics.PEAK_BF16_FLOPS, the job's: 989 TFLOP/s for H100/H200 SXM, 756 for H100 PCIe). A repetition
whose two sides end at other losses stops the bench: they did not do the same work.

    python bench/ray_overhead.py                                  # defaults for the device found
    python bench/ray_overhead.py --preset mini --steps 40 --repeats 5
    python bench/ray_overhead.py --prepared data/prepared/<name>  # real examples instead of synthetic
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

# Before `import ray` anywhere in this process: a local Ray must listen on loopback only.
os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"

REPO = Path(__file__).resolve().parent.parent
if __package__ in (None, ""):  # `python bench/ray_overhead.py` from a checkout
    sys.path.insert(0, str(REPO))

import numpy as np  # noqa: E402
import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402

from bert_core.config import preset  # noqa: E402
from bert_core.masking import PretrainingCollator  # noqa: E402
from bert_core.model import BertForPreTraining  # noqa: E402
from bert_core.tokenizer import SpecialIds, load_tokenizer  # noqa: E402
from jobs.config.pretrain import PretrainConfig  # noqa: E402
from jobs.loops.metrics import flops_per_token, peak_for  # noqa: E402

SYNTHETIC_VOCAB = 8192  # the quickstart tokenizer's size
SYNTHETIC_SPECIAL = SpecialIds(pad=0, unk=1, cls=2, sep=3, mask=4)  # bert_core.tokenizer.SPECIAL_TOKENS order


# -- what every rank runs, on both sides -------------------------------------------------------

def rank_main(spec: dict) -> dict:
    """Build the Engine, take W warm-up then K timed steps; every rank returns the same summary.

    Contract with the launchers: torch.distributed is initialised (and on GPU the device set)
    before this is called; `spec` is plain JSON (config dict, batch file path, step counts).
    """
    cfg = PretrainConfig.from_dict(spec["cfg"])
    use_gpu = cfg.scaling.use_gpu
    if not use_gpu:
        os.environ["DS_ACCELERATOR"] = "cpu"  # before jobs.engine.data_parallel imports deepspeed
        torch.set_num_threads(spec["threads"])  # Ray sets OMP_NUM_THREADS, the launcher does not
    from jobs.engine.data_parallel import Engine
    from jobs.workers.pretrain_engine import pretrain_engine_options
    from jobs.engine.objectives import PretrainingObjective

    rank, world = dist.get_rank(), dist.get_world_size()
    batches = torch.load(spec["batches"], weights_only=True)[rank][: spec["warmup"] + spec["steps"]]
    torch.manual_seed(cfg.train.seed)  # identical initial weights and dropout on both sides
    engine = Engine(BertForPreTraining(cfg.model), PretrainingObjective(), **pretrain_engine_options(cfg))
    rank_pids: list = [None] * world
    dist.all_gather_object(rank_pids, os.getpid())
    first_step_at = time.time()
    times, loss = [], float("nan")
    thread_cpu = process_cpu = 0.0
    ray_cpu_start: dict = {}
    for i, batch in enumerate(batches):
        if i == spec["warmup"]:
            ray_cpu_start = ray_processes_cpu(spec["ray_pids"], rank_pids) if rank == 0 else {}
            dist.barrier()
        _sync(use_gpu)
        start, thread0, process0 = time.perf_counter(), time.thread_time(), time.process_time()
        loss = engine.step(batch).loss
        _sync(use_gpu)
        if i >= spec["warmup"]:
            times.append(time.perf_counter() - start)
            thread_cpu += time.thread_time() - thread0
            process_cpu += time.process_time() - process0
    ray_cpu_end = ray_processes_cpu(spec["ray_pids"], rank_pids) if rank == 0 else {}
    tokens = sum(int(b["attention_mask"].sum()) for b in batches[spec["warmup"]:])
    per_rank: list = [None] * world
    dist.all_gather_object(per_rank, (times, tokens, thread_cpu, process_cpu))
    steps = max(len(times), 1)
    return {
        "step_s": [max(ts) for ts in zip(*(r[0] for r in per_rank))],
        "tokens_per_step": sum(r[1] for r in per_rank) / steps,
        # Per rank and step: CPU of the thread that steps (compute, and gloo's collectives, which run
        # in the caller) and of every other thread of the rank's process (Ray's core worker threads on
        # the Ray side; gloo's transport threads on both).
        "step_thread_cpu_s": sum(r[2] for r in per_rank) / (world * steps),
        "other_threads_cpu_s": sum(r[3] - r[2] for r in per_rank) / (world * steps),
        # Ray's own processes (GCS, raylet, agents, the Train controller; not the ranks), rank 0's view.
        "ray_processes_cpu_s": _broadcast(sum(v - ray_cpu_start.get(k, 0.0) for k, v in ray_cpu_end.items()))
        / steps,
        "first_step_at": first_step_at,
        "final_loss": loss,  # equal on both sides when both did the same computation
        "world": world,
    }


def ray_processes_cpu(roots: list[int], exclude: list[int]) -> dict[int, float]:
    """user + system CPU seconds of every process under `roots` (the Ray node's processes, started
    before either side ran), by pid, leaving out the ranks themselves."""
    import psutil

    out = {}
    for root in roots:
        try:
            procs = [psutil.Process(root)]
            procs += procs[0].children(recursive=True)
        except psutil.NoSuchProcess:
            continue
        for proc in procs:
            try:
                if proc.pid not in exclude:
                    t = proc.cpu_times()
                    out[proc.pid] = t.user + t.system
            except psutil.NoSuchProcess:
                pass
    return out


def _broadcast(value: float) -> float:
    box = [value]
    dist.broadcast_object_list(box, src=0)
    return box[0]


def _sync(use_gpu: bool) -> None:
    if use_gpu:
        torch.cuda.synchronize()


# -- the batches both sides read ---------------------------------------------------------------

def synthetic_rows(n: int, seq_len: int, vocab_size: int, seed: int) -> dict:
    """Rows in the prepared-example schema ([CLS] A [SEP] B [SEP], unpadded), lengths ~ U[seq/2, seq]."""
    rng = np.random.default_rng(seed)
    s = SYNTHETIC_SPECIAL
    rows, num_a = [], []
    for length in rng.integers(seq_len // 2, seq_len + 1, size=n):
        a = int(rng.integers(1, length - 3))
        words = rng.integers(5, vocab_size, size=length - 3)
        rows.append(np.concatenate([[s.cls], words[:a], [s.sep], words[a:], [s.sep]]).astype(np.int64))
        num_a.append(a + 2)
    ids = np.empty(n, dtype=object)
    ids[:] = rows
    return {"input_ids": ids, "num_a_tokens": np.array(num_a), "next_sentence_label": rng.integers(0, 2, size=n)}


def prepared_rows(prepared_dir: str, n: int) -> tuple[dict, SpecialIds, int, int]:
    """The first n train examples of a pipelines.prepare output, with its tokenizer's ids and seq len."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    root = Path(prepared_dir)
    manifest = json.loads((root / "manifest.json").read_text())
    tok = load_tokenizer(root / "tokenizer")
    columns = ["input_ids", "num_a_tokens", "next_sentence_label"]
    tables, have = [], 0
    for shard in manifest["shards"]["train"]:
        tables.append(pq.read_table(root / shard["file"], columns=columns))
        have += tables[-1].num_rows
        if have >= n:
            break
    table = pa.concat_tables(tables).slice(0, n)
    if table.num_rows < n:
        raise ValueError(f"{prepared_dir} has {table.num_rows} train examples; {n} are needed")
    rows = {c: table.column(c).to_numpy(zero_copy_only=False) for c in columns}
    return rows, SpecialIds.from_tokenizer(tok), tok.get_vocab_size(), manifest["config"]["max_seq_len"]


def write_batches(path: Path, rows: dict, cfg: PretrainConfig, special: SpecialIds, world: int, per_rank: int) -> None:
    """Collate (dynamic masking, each rank its own seed as in jobs.workers.pretrain_worker) once; both sides load the file."""
    b = cfg.train.micro_batch_size
    out = []
    for rank in range(world):
        collate = PretrainingCollator(special, cfg.model.vocab_size, cfg.data.max_seq_len, cfg.train.masking,
                                      seed=cfg.train.seed * 1000 + rank)
        start = rank * per_rank * b
        out.append([collate({k: v[start + i * b: start + (i + 1) * b] for k, v in rows.items()})
                    for i in range(per_rank)])
    torch.save(out, path)


def build_config(args, vocab_size: int, special: SpecialIds, seq_len: int, batches_path: Path) -> PretrainConfig:
    cfg = PretrainConfig()
    cfg.model = preset(args.preset, vocab_size=vocab_size, pad_token_id=special.pad)
    cfg.data.sources = [str(batches_path)]  # the only data this run reads
    cfg.data.max_seq_len = seq_len
    cfg.train.micro_batch_size = args.batch_size
    cfg.train.max_steps = args.warmup + args.steps
    cfg.optim.warmup_steps, cfg.optim.schedule = 0, "constant"
    cfg.deepspeed.zero_stage = args.zero_stage
    cfg.deepspeed.precision = "bf16" if args.gpu else "fp32"
    cfg.scaling.num_workers, cfg.scaling.use_gpu = args.workers, args.gpu
    cfg.scaling.cpus_per_worker = float(args.threads)
    return cfg.validate()


# -- the two sides -----------------------------------------------------------------------------

def _free_port() -> int:
    with socket.socket() as s:  # other engineers' jobs run beside this one: never assume 29500 is free
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_plain(spec: dict, work: Path) -> dict:
    """`deepspeed --num_gpus N bench/ds_launch_entry.py SPEC`; rank 0 writes the summary to spec['result']."""
    spec = {**spec, "result": str(work / "plain-result.json")}
    spec_path = work / "plain-spec.json"
    spec_path.write_text(json.dumps(spec))
    env = {**os.environ, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": str(spec["threads"])}
    if not spec["cfg"]["scaling"]["use_gpu"]:
        env["DS_ACCELERATOR"] = "cpu"
    cmd = [str(Path(sys.executable).parent / "deepspeed"), "--num_gpus", str(spec["world"]),
           "--master_port", str(_free_port()), "--no_local_rank",
           str(REPO / "bench" / "ds_launch_entry.py"), str(spec_path)]
    result = Path(spec["result"])
    result.unlink(missing_ok=True)  # never read the previous repetition's
    launched = time.time()
    proc = subprocess.run(cmd, env=env, cwd=REPO, capture_output=True, text=True)
    if proc.returncode and result.exists():
        # Rank 0 writes after every rank finished its steps, so this is a teardown failure (seen: a
        # rank aborting at exit with "terminate called without an active exception"), not the run's.
        print(f"[plain] launcher exited {proc.returncode} after the ranks had finished and reported", flush=True)
    elif proc.returncode:
        raise RuntimeError(f"deepspeed launcher failed ({proc.returncode}):\n"
                           f"{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
    out = json.loads(result.read_text())
    return {**out, "startup_s": out["first_step_at"] - launched, "wall_s": time.time() - launched}


def ray_train_loop(spec: dict) -> None:
    """Every rank reports; Ray Train V2 keeps only metrics that come with a checkpoint, so rank 0
    attaches an empty one (after the timed steps, so it costs them nothing)."""
    import ray.train

    out = rank_main(spec)
    with tempfile.TemporaryDirectory() as tmp:
        checkpoint = ray.train.Checkpoint.from_directory(tmp) if dist.get_rank() == 0 else None
        ray.train.report(out, checkpoint=checkpoint)


def run_ray(spec: dict, work: Path) -> dict:
    from ray.train import RunConfig, ScalingConfig
    from ray.train.torch import TorchConfig, TorchTrainer

    use_gpu = spec["cfg"]["scaling"]["use_gpu"]
    resources = {"CPU": spec["threads"], **({"GPU": 1} if use_gpu else {})}
    trainer = TorchTrainer(
        ray_train_loop, train_loop_config=spec,
        scaling_config=ScalingConfig(num_workers=spec["world"], use_gpu=use_gpu, resources_per_worker=resources),
        torch_config=TorchConfig(backend=spec["backend"]),
        run_config=RunConfig(name=f"ray-overhead-{time.time_ns()}", storage_path=str(work / "ray")),
    )
    launched = time.time()
    result = trainer.fit()
    if result.error:
        raise result.error
    out = dict(result.metrics)
    return {**out, "startup_s": out["first_step_at"] - launched, "wall_s": time.time() - launched}


# -- driver ------------------------------------------------------------------------------------

def parse_args(argv=None):
    gpu = torch.cuda.is_available()
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--preset", default="base" if gpu else "tiny")
    p.add_argument("--batch-size", type=int, default=32, help="micro-batch per rank")
    p.add_argument("--seq-len", type=int, default=128, help="synthetic data only; --prepared brings its own")
    p.add_argument("--workers", type=int, default=min(2, torch.cuda.device_count()) if gpu else 2)
    p.add_argument("--threads", type=int, default=1, help="CPU threads (and Ray CPUs) per rank")
    p.add_argument("--zero-stage", type=int, default=2)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--steps", type=int, default=20, help="timed steps per side per repetition")
    p.add_argument("--repeats", type=int, default=2, help="interleaved repetitions (sides alternate first)")
    p.add_argument("--prepared", help="a pipelines.prepare output dir; default: synthetic examples from a seed")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--ray-worker-niceness", type=int, default=0, help="Ray's own default is 15; see above")
    args = p.parse_args(argv)
    args.gpu = gpu
    return args


def main(argv=None) -> dict:
    args = parse_args(argv)
    n_batches = args.warmup + args.steps
    n_rows = n_batches * args.batch_size * args.workers
    if args.prepared:
        rows, special, vocab, seq_len = prepared_rows(args.prepared, n_rows)
    else:
        special, vocab, seq_len = SYNTHETIC_SPECIAL, SYNTHETIC_VOCAB, args.seq_len
        rows = synthetic_rows(n_rows, seq_len, vocab, args.seed)
    work = Path(tempfile.mkdtemp(prefix="ray-overhead-"))
    batches_path = work / "batches.pt"
    cfg = build_config(args, vocab, special, seq_len, batches_path)
    write_batches(batches_path, rows, cfg, special, args.workers, n_batches)
    spec = {"cfg": cfg.to_dict(), "batches": str(batches_path), "warmup": args.warmup, "steps": args.steps,
            "threads": args.threads, "world": args.workers, "backend": "nccl" if args.gpu else "gloo"}

    import ray

    started = time.perf_counter()
    ray.init(num_cpus=args.workers * args.threads, num_gpus=args.workers if args.gpu else 0,
             include_dashboard=False, log_to_driver=False,
             _system_config={"worker_niceness": args.ray_worker_niceness},
             runtime_env={"env_vars": {"PYTHONPATH": str(REPO)}})
    ray_init_s = time.perf_counter() - started
    import psutil

    spec["ray_pids"] = [c.pid for c in psutil.Process().children()]  # this driver's Ray node, nothing else yet
    ray.data.DataContext.get_current().enable_progress_bars = False
    device = torch.cuda.get_device_name() if args.gpu else f"CPU, {args.threads} thread(s) per rank"
    print(f"device: {device}; {args.workers} ranks ({spec['backend']}), {args.preset} preset, "
          f"{cfg.model.num_parameters() / 1e6:.1f}M parameters, ZeRO-{args.zero_stage}, {cfg.deepspeed.precision}, "
          f"micro-batch {args.batch_size} x seq {seq_len}, {args.warmup} warm-up + {args.steps} timed steps; "
          f"Ray worker niceness {args.ray_worker_niceness}; ray.init {ray_init_s:.1f}s (once, not in any step)",
          flush=True)
    print(f"{'':>9} | {'median step ms':^24} | {'timed steps s':^22} | {'CPU ms/step':^43} | "
          f"{'start s':^11} |", flush=True)
    print(f"{'rep':>3} {'first':>5} | {'plain':>8} {'ray':>7} {'ovh':>7} | {'plain':>6} {'ray':>7} {'ovh':>7} | "
          f"{'rank thr':>9} {'rank other':>11} {'Ray procs':>11} {'Ray tax':>7} | {'plain':>5} {'ray':>5} | "
          f"{'load1':>5}  final loss", flush=True)
    reps = []
    for rep in range(args.repeats):
        order = [("plain", run_plain), ("ray", run_ray)]
        if rep % 2:
            order.reverse()
        res = {name: fn(spec, work) for name, fn in order}
        r = Rep(order[0][0], res["plain"], res["ray"], os.getloadavg()[0])
        reps.append(r)
        p, y = r.plain, r.ray
        loss = "same" if p["final_loss"] == y["final_loss"] else f"{p['final_loss']:.6f} / {y['final_loss']:.6f}"
        cpu = (f"{p['step_thread_cpu_s'] * 1e3:>4.0f}/{y['step_thread_cpu_s'] * 1e3:<4.0f} "
               f"{p['other_threads_cpu_s'] * 1e3:>5.1f}/{y['other_threads_cpu_s'] * 1e3:<5.1f} "
               f"{p['ray_processes_cpu_s'] * 1e3:>5.1f}/{y['ray_processes_cpu_s'] * 1e3:<5.1f} "
               f"{r.overhead('cpu'):>+7.1%}")
        print(f"{rep:>3} {r.first:>5} | {r.median('plain') * 1e3:>8.1f} {r.median('ray') * 1e3:>7.1f} "
              f"{r.overhead('median'):>+7.1%} | {r.total('plain'):>6.2f} {r.total('ray'):>7.2f} "
              f"{r.overhead('total'):>+7.1%} | {cpu} | {p['startup_s']:>5.1f} {y['startup_s']:>5.1f} | "
              f"{r.load1:>5.1f}  {loss}", flush=True)
    ray.shutdown()
    differ = [i for i, r in enumerate(reps) if r.plain["final_loss"] != r.ray["final_loss"]]
    if differ:  # the two sides did not do the same work: no overhead figure
        sys.exit(f"final losses differ in repetitions {differ}: plain and Ray trained differently, no ratio")
    return summarize(args, cfg, seq_len, reps)


@dataclass
class Rep:
    """One repetition: both sides' rank summaries, which side went first, the load after it."""

    first: str
    plain: dict
    ray: dict
    load1: float

    def median(self, side: str) -> float:
        return statistics.median(getattr(self, side)["step_s"])

    def total(self, side: str) -> float:
        # The total catches periodic stalls (e.g. a background thread waking every few seconds)
        # that the median step hides; the median resists load bursts from other processes.
        return sum(getattr(self, side)["step_s"])

    def cpu(self, side: str) -> float:
        """CPU seconds per step: the ranks, plus Ray's own processes on the Ray side (on the plain side
        they sit idle, and a plain deployment would not run them)."""
        d = getattr(self, side)
        return d["world"] * (d["step_thread_cpu_s"] + d["other_threads_cpu_s"]) + \
            (d["ray_processes_cpu_s"] if side == "ray" else 0.0)

    def cpu_tax(self) -> float:
        """CPU that only the Ray side spends (the ranks' other threads beyond plain's, and Ray's processes),
        as a share of plain's CPU per step. The stepping thread runs the same code on both sides, so it
        is left out of the numerator: its CPU time moves with cache pressure from other tenants, not Ray.
        On a node whose cores the ranks fill, this CPU comes out of the steps."""
        p, y = self.plain, self.ray
        extra = y["world"] * (y["other_threads_cpu_s"] - p["other_threads_cpu_s"]) + y["ray_processes_cpu_s"]
        return extra / self.cpu("plain")

    def overhead(self, kind: str) -> float:
        if kind == "cpu":
            return self.cpu_tax()
        f = self.median if kind == "median" else self.total
        return (f("ray") - f("plain")) / f("plain")


def summarize(args, cfg: PretrainConfig, seq_len: int, reps: list[Rep]) -> dict:
    plain = statistics.median(r.median("plain") for r in reps)
    ray_ = statistics.median(r.median("ray") for r in reps)
    summary = {"plain_step_s": plain, "ray_step_s": ray_, "ratio": ray_ / plain,
               "overhead_median_step": statistics.median(r.overhead("median") for r in reps),
               "overhead_total": statistics.median(r.overhead("total") for r in reps),
               "overhead_cpu": statistics.median(r.overhead("cpu") for r in reps),
               "load1": [r.load1 for r in reps]}
    print(f"over {len(reps)} repetitions: median step plain {plain * 1e3:.1f} ms, ray {ray_ * 1e3:.1f} ms, "
          f"ratio ray/plain {ray_ / plain:.3f}; Ray overhead, median over repetitions: "
          f"{summary['overhead_median_step']:+.1%} of the median step, {summary['overhead_total']:+.1%} of "
          f"total timed-step time; load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores", flush=True)
    wall = {side: statistics.median(getattr(r, side)["wall_s"] for r in reps) for side in ("plain", "ray")}
    print(f"CPU only the Ray side spends (ranks' other threads + Ray's processes), median over repetitions: "
          f"{summary['overhead_cpu']:+.1%} of plain's CPU per step; whole side, launch to exit: "
          f"plain {wall['plain']:.0f} s, ray {wall['ray']:.0f} s", flush=True)
    tokens = statistics.median(r.plain["tokens_per_step"] for r in reps)
    line = f"tokens/s (real tokens, all ranks): plain {tokens / plain:,.0f}, ray {tokens / ray_:,.0f}"
    if args.gpu:
        flops, peak = flops_per_token(cfg.model, seq_len), peak_for(torch.cuda.get_device_name())  # the job's table
        if peak:
            mfu = [tokens / t * flops / (peak * args.workers) for t in (plain, ray_)]
            line += f"; MFU plain {mfu[0]:.1%}, ray {mfu[1]:.1%} (peak {peak / 1e12:.0f} TFLOP/s per GPU)"
    print(line, flush=True)
    return summary


if __name__ == "__main__":
    main()
