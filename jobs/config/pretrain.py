"""The pretraining job's configuration: one typed tree, loaded from configs/pretrain/*.yaml.

Everything a Ray Train worker needs travels inside this config (as a plain dict); workers
rebuild it with `PretrainConfig.from_dict` and capture no globals from the driver.
"""

from __future__ import annotations

import copy

import glob
import math
import warnings
from dataclasses import dataclass, field, replace
from pathlib import Path

from bert_core.config import BertConfig, ConfigError, MaskingConfig, tiny
from bert_core.modern_config import SWITCHES, ModernConfig
from jobs.config.io import from_dict, recipe_of, to_dict
from jobs.config.sections import (OPTIMIZERS, PARTITION_METHODS, SCHEDULES, SETTING_NAMES, DeepSpeedConfig, OptimConfig,
                                  ScalingConfig, TrackingConfig, check_adam, check_harvest_dir, check_output_dir,
                                  check_run_name,
                                  check_seed, check_uri_backend, refuse_relative_when_submitted)
from jobs.runtime.faults import FaultsConfig
from pipelines.config import DataConfig, check_max_predictions


# What this process has warned of: a job validates its config 2-3 times (parse, resolve, phase 2), and the filter
# changes between (console, Ray's and MLflow's imports) reset Python's once-per-location registry, so each printed again
_WARNED: set[str] = set()


def _warn_once(message: str) -> None:
    if message not in _WARNED:
        _WARNED.add(message)
        warnings.warn(message, stacklevel=2)  # validate's line, as before


@dataclass
class CorpusConfig:
    harvest_installed_docs: bool = False  # build a no-download corpus from installed package docs
    harvest_dir: str = "data/corpus/installed-docs"  # where harvested documents are written
    harvest_max_mb: float = 8.0  # stop harvesting past this much text


@dataclass
class TrainConfig:
    micro_batch_size: int = 32  # sequences per worker per forward/backward
    grad_accum_steps: int = 1  # micro-batches per optimizer step
    max_steps: int = 1000  # optimizer steps for the whole run
    log_every: int = 20  # steps per metrics window (report, MLflow, progress line)
    eval_batches: int = 16  # held-out micro-batches in all (not per worker) for MLM/NSP accuracy at start and end
    prefetch_batches: int = 64  # micro-batches read ahead, across epoch ends (jobs/loops/epoch_stream.py); 0 = none
    checkpoint_every: int = 0  # steps between resume checkpoints; 0 = only at the end
    keep_checkpoints: int = 2  # resume checkpoints kept by Ray Train
    max_failures: int = 2  # worker failures and loss rollbacks survived (each restarts from the last checkpoint)
    rollback_after: int = 5  # this many non-finite losses in a row roll back to the last checkpoint; 0 = never
    rollback_lr_factor: float = 0.5  # each rollback multiplies the learning rate by this
    seed: int = 0  # model init, dynamic masking and data order
    init_checkpoint: str = ""  # start from this run's checkpoint (set by the job for phase 2)
    reset_optimizer: bool = False  # with init_checkpoint: load weights only, fresh optimizer and schedule
    masking: MaskingConfig = field(default_factory=MaskingConfig)
    nsp: bool = True  # next-sentence prediction in the loss; false: MLM only, on contiguous pairs (see recipe_defaults)
    packing: bool = False  # several examples per row, attention within each (model.recipe=modern; its recipe sets it)


PHASE2_WARMUP_PROPORTION = 0.128  # NVIDIA's run_pretraining phase 2 (--warmup_proportion 0.128)


@dataclass
class Phase2Config:
    """NVIDIA's recipe: most steps at 128 tokens, then a short phase at 512 to learn long positions."""

    max_steps: int = 0  # 0 = single-phase run
    max_seq_len: int = 512  # phase 2 examples are prepared at this length, with phase 1's tokenizer
    micro_batch_size: int = 8
    max_predictions: int = 80  # the masking cap at phase 2's length (20 at 128): static, or a dynamic one set
    lr: float = 0.0  # 0 = phase 1's peak learning rate
    # re-warmup after the hand-off; -1 = NVIDIA's warmup_proportion (0.128 of phase 2's steps) when the optimizer is
    # reset (fresh moments at the peak rate move every weight by about lr in the first step), none when it carries
    # phase 1's moments over (NVIDIA warms those up again: set it to do the same)
    warmup_steps: int = -1
    # true: fresh moments and step counts. false: phase 1's moments, as NVIDIA's phase 2 keeps them, and their step
    # counts (bias correction's), which NVIDIA sets to 0. Either way phase 2 runs its own schedule from its step 0
    reset_optimizer: bool = True

    def warmup(self) -> int:
        """phase2.warmup_steps as the steps phase 2 warms up for."""
        if self.warmup_steps >= 0:
            return self.warmup_steps
        return round(PHASE2_WARMUP_PROPORTION * self.max_steps) if self.reset_optimizer else 0


@dataclass
class PretrainConfig:
    run_name: str = ""  # Ray Train + MLflow run name; "" = pretrain-<timestamp>; an existing name resumes
    output_dir: str = "runs"  # Ray Train storage: checkpoints and the release checkpoint
    # model.recipe: "bert" (BertConfig, bert_core/model.py) or "modern" (ModernConfig, bert_core/modern.py);
    # vocab_size is taken from the tokenizer (the modern recipe pads it to a multiple of 64)
    model: BertConfig | ModernConfig = field(default_factory=tiny)
    data: DataConfig = field(default_factory=DataConfig)
    corpus: CorpusConfig = field(default_factory=CorpusConfig)
    train: TrainConfig = field(default_factory=TrainConfig)
    phase2: Phase2Config = field(default_factory=Phase2Config)
    phase = 1  # no field (not logged, not in the continuation basis): 2 in the config phase2_run derives
    optim: OptimConfig = field(default_factory=OptimConfig)
    deepspeed: DeepSpeedConfig = field(default_factory=DeepSpeedConfig)
    scaling: ScalingConfig = field(default_factory=ScalingConfig)
    tracking: TrackingConfig = field(default_factory=TrackingConfig)
    faults: FaultsConfig = field(default_factory=FaultsConfig)  # testing only: injected faults (all off)

    @staticmethod
    def recipe_defaults(data: dict) -> dict:
        """What the config's recipe and objective switches change by default; the config's own values win.

        model.recipe=modern: no NSP, 30% masking, packed rows (MosaicBERT, ModernBERT). No NSP (either recipe):
        pairs are contiguous text (data.nsp_random_prob=0): a random second segment only cuts the context when no
        loss asks whether it follows."""
        def section(name: str) -> dict:  # a section that is not a mapping is refused by from_dict, not here
            value = data.get(name)
            return value if isinstance(value, dict) else {}

        model, train = section("model"), section("train")
        modern = model.get("recipe") == "modern"
        out: dict = ({"train": {"nsp": False, "packing": True, "masking": {"rate": 0.3}}, "data": {}} if modern
                     else {"data": {}})
        if modern and section("data").get("masking") == "static":  # masks drawn once, when examples are prepared
            # 30% of each example, and a cap that lets it be (BERT's 20 per 128 tokens would stop it at 16%): the
            # cap of the user's data.mask_rate where it is higher (a cap of 30% under a rate of 35% masked 31% of a
            # full row; over 37% it was refused, naming a data.max_predictions no one set); a lower rate keeps the
            # 30% cap, which lets it be, and its prepared sets their names
            rate = section("data").get("mask_rate", 0.3)
            rate = max(rate, 0.3) if isinstance(rate, (int, float)) and not isinstance(rate, bool) and rate < 1 else 0.3
            length = section("data").get("max_seq_len", DataConfig.max_seq_len)
            phase2 = section("phase2").get("max_seq_len", Phase2Config.max_seq_len)
            out["data"].update(mask_rate=0.3, max_predictions=math.ceil(rate * length) if isinstance(length, int)
                               else DataConfig.max_predictions)
            out["phase2"] = {"max_predictions": math.ceil(rate * phase2) if isinstance(phase2, int)
                             else Phase2Config.max_predictions}
        if not train.get("nsp", not modern):
            out["data"]["nsp_random_prob"] = 0.0
        return out

    @property
    def recipe(self) -> str:
        return recipe_of(self.model)

    def validate(self) -> "PretrainConfig":
        self.tracking.validate()
        self.model.validate()
        if self.recipe == "bert" and self.model.type_vocab_size < 2:
            raise ConfigError(f"model.type_vocab_size={self.model.type_vocab_size}: pretraining's examples are "
                              "sentence pairs, whose B segment is token type 1 (with train.nsp=false too), which a "
                              "table of one row fails to look up at the first step; allowed: >= 2 (BERT's 2)")
        if self.recipe == "modern" and self.train.nsp:
            raise ConfigError("train.nsp must be false with model.recipe=modern: the modern encoder has no "
                              "next-sentence head (ModernBertForMaskedLM)")
        if self.train.nsp and not self.data.nsp_random_prob > 0:
            raise ConfigError("data.nsp_random_prob=0 with train.nsp=true: every pair would be contiguous and every "
                              "NSP label 'follows', which a head that always says so meets (its loss and accuracy "
                              "then tell nothing); set train.nsp=false to train MLM alone, or a share above 0 "
                              "(BERT's 0.5)")
        if self.recipe == "modern" and not self.model.is_transformers and self.tracking.registered_model:
            off = [name for name in SWITCHES if not getattr(self.model, name)]
            raise ConfigError(f"tracking.registered_model must be '' with model.{off[0]}=false: no transformers "
                              f"class loads the modern encoder with a switch off (a recipe-ladder rung), so the "
                              f"registry would hold a model nothing downstream can use")
        if self.train.packing and self.recipe != "modern":
            raise ConfigError("train.packing=true needs model.recipe=modern: BERT's rows are sentence pairs with "
                              "segments and an NSP label each (and bert_core/model.py drops padding already)")
        if self.deepspeed.pipeline_stages > 1 and (self.recipe == "modern" or not self.train.nsp):
            raise ConfigError("deepspeed.pipeline_stages > 1 needs model.recipe=bert and train.nsp=true: the "
                              "pipeline's stages (jobs/engine/pipeline.py) are BERT's layers and loss; the modern "
                              "encoder and MLM-only training run data parallel with ZeRO 0-3")
        if self.corpus.harvest_installed_docs and not self.corpus.harvest_max_mb > 0:
            raise ConfigError(f"corpus.harvest_max_mb must be > 0, got {self.corpus.harvest_max_mb}")
        if self.corpus.harvest_installed_docs and not self.data.sources:
            self.data.sources = [self.corpus.harvest_dir]
        self.data.validate()
        if self.data.eval_fraction <= 0:
            raise ConfigError(f"data.eval_fraction must be in (0, 1), got {self.data.eval_fraction}: "
                              "the job measures held-out MLM accuracy")
        self.train.masking.validate("train.masking")
        if self.data.masking == "dynamic":  # the data's masking fields mask nothing then: say which ones do
            if self.data.whole_word_masking and not self.train.masking.whole_word:
                raise ConfigError("data.whole_word_masking=true applies to masks drawn when examples are prepared "
                                  "(data.masking=static); dynamic masking (the default) masks whole words with "
                                  "train.masking.whole_word=true")
            if self.data.mask_rate not in (DataConfig.mask_rate, self.train.masking.rate):  # set, and not followed
                raise ConfigError(f"data.mask_rate={self.data.mask_rate:g} applies to masks drawn when examples are "
                                  f"prepared (data.masking=static); dynamic masking (the default) masks "
                                  f"train.masking.rate={self.train.masking.rate:g}: set that instead")
            if self.train.masking.max_predictions is None:  # no dynamic cap: the static caps cap nothing
                caps = {"data.max_predictions": (self.data.max_predictions, DataConfig.max_predictions),
                        "phase2.max_predictions": (self.phase2.max_predictions, Phase2Config.max_predictions)}
                if self.phase == 2 or not self.phase2.max_steps:  # phase 2's data cap is phase2_run's, not set
                    del caps["data.max_predictions" if self.phase == 2 else "phase2.max_predictions"]
                for name, (value, default) in caps.items():
                    if value != default:
                        raise ConfigError(f"{name}={value} caps masks drawn when examples are prepared "
                                          f"(data.masking=static); dynamic masking (the default) is capped by "
                                          f"train.masking.max_predictions (null: no cap), which phase 2 replaces "
                                          f"with phase2.max_predictions: set that instead")
        else:  # static: the examples hold their masks, and train.masking masks nothing (the mirror case of above)
            recipe = MaskingConfig(rate=0.3 if self.recipe == "modern" else MaskingConfig.rate)
            moved = {"rate": "data.mask_rate", "whole_word": "data.whole_word_masking",
                     "max_predictions": "data.max_predictions"}
            for name in ("rate", "whole_word", "max_predictions", "mask_token_prob", "random_token_prob"):
                if getattr(self.train.masking, name) != getattr(recipe, name):
                    raise ConfigError(
                        f"train.masking.{name}={getattr(self.train.masking, name)!r} applies to masks drawn as the "
                        f"job trains (data.masking=dynamic, the default); data.masking=static holds the masks drawn "
                        f"when examples are prepared" + (f": set {moved[name]} instead" if name in moved else
                                                         ", 80/10/10 as BERT's"))
        t, o, d, s = self.train, self.optim, self.deepspeed, self.scaling
        for name in ("micro_batch_size", "grad_accum_steps", "max_steps", "log_every", "eval_batches",
                     "keep_checkpoints"):
            if getattr(t, name) < 1:
                raise ConfigError(f"train.{name} must be >= 1, got {getattr(t, name)}")
        for name in ("checkpoint_every", "max_failures", "rollback_after", "prefetch_batches"):
            if getattr(t, name) < 0:
                raise ConfigError(f"train.{name} must be >= 0, got {getattr(t, name)}")
        self.faults.validate("pretrain", checkpoint_every=t.checkpoint_every)
        if not 0 < t.rollback_lr_factor <= 1:
            raise ConfigError(f"train.rollback_lr_factor must be in (0, 1], got {t.rollback_lr_factor}")
        if o.name not in OPTIMIZERS:
            raise ConfigError(f"optim.name must be one of {OPTIMIZERS}, got {o.name!r}")
        if o.schedule not in SCHEDULES:
            raise ConfigError(f"optim.schedule must be one of {SCHEDULES}, got {o.schedule!r}")
        if o.lr <= 0:
            raise ConfigError(f"optim.lr must be > 0, got {o.lr}")
        for name in ("warmup_steps", "grad_clip", "weight_decay"):
            if getattr(o, name) < 0:
                raise ConfigError(f"optim.{name} must be >= 0, got {getattr(o, name)}")
        check_adam("optim", o.beta1, o.beta2, o.eps)
        if o.poly_power <= 0:
            raise ConfigError(f"optim.poly_power must be > 0, got {o.poly_power}: the poly schedule decays the "
                              f"learning rate as (1 - progress) ** poly_power")
        check_seed("train.seed", t.seed)
        if o.warmup_steps > t.max_steps:
            raise ConfigError(f"optim.warmup_steps must be in [0, train.max_steps={t.max_steps}], "
                              f"got {o.warmup_steps}: a longer warmup never reaches optim.lr")
        d.validate(s, o.name)
        s.validate()
        if d.precision == "bf16" and d.zero_stage == 0 and (t.grad_accum_steps > 1 or d.pipeline_stages > 1):
            what = ("a pipeline's micro-batches" if d.pipeline_stages > 1 else
                    f"the train.grad_accum_steps={t.grad_accum_steps} micro-batches")
            raise ConfigError(f"deepspeed.precision=bf16 at deepspeed.zero_stage=0 sums the gradients of {what} in "
                              f"bf16 (DeepSpeed accumulates them in fp32 only under ZeRO): set deepspeed.zero_stage=1")
        if d.pipeline_stages > 1 and s.num_workers % d.pipeline_stages:
            # Each data-parallel replica is a whole pipeline: the workers must split into whole replicas.
            divisors = [n for n in range(1, s.num_workers + 1) if s.num_workers % n == 0]
            raise ConfigError(f"deepspeed.pipeline_stages ({d.pipeline_stages}) must divide scaling.num_workers "
                              f"({s.num_workers}); allowed: deepspeed.pipeline_stages in {divisors}")
        self.validate_pipeline()
        if d.pipeline_stages > 1 and t.grad_accum_steps < 2 * d.pipeline_stages:
            # Said, not refused: the run is right, only slow. DeepSpeed's schedule fills the stages with one optimizer
            # step's micro-batches alone, so a stage idles (S-1)/(m+S-1) of the step (GPipe's "bubble").
            idle = (d.pipeline_stages - 1) / (t.grad_accum_steps + d.pipeline_stages - 1)
            _warn_once(f"[train] deepspeed.pipeline_stages={d.pipeline_stages} with train.grad_accum_steps="
                       f"{t.grad_accum_steps}: a step's micro-batches are all that fills the pipeline, so each "
                       f"stage idles (stages - 1) / (grad_accum_steps + stages - 1) = {idle:.0%} of the time; set "
                       f"train.grad_accum_steps to several times the stages (>= {2 * d.pipeline_stages}), and "
                       f"train.micro_batch_size lower to keep the batch")
        replicas, held_out = s.num_workers // d.pipeline_stages, t.eval_batches * t.micro_batch_size
        if not eval_set_size(held_out, replicas):  # refused here, not after the corpus is prepared
            raise ConfigError(f"train.eval_batches x train.micro_batch_size = {held_out} held-out examples leave "
                              f"none that {replicas} data-parallel replicas can score the same number of each: "
                              f"raise train.eval_batches")
        if self.data.max_seq_len > self.model.max_position_embeddings:
            raise ConfigError(f"data.max_seq_len ({self.data.max_seq_len}) exceeds "
                              f"model.max_position_embeddings ({self.model.max_position_embeddings}); "
                              f"allowed: data.max_seq_len <= {self.model.max_position_embeddings}")
        p2 = self.phase2
        for name in ("max_steps", "lr"):
            if getattr(p2, name) < 0:
                raise ConfigError(f"phase2.{name} must be >= 0, got {getattr(p2, name)}")
        if p2.warmup_steps < -1:
            raise ConfigError(f"phase2.warmup_steps must be >= 0, or -1 for NVIDIA's 12.8% of phase2.max_steps, "
                              f"got {p2.warmup_steps}")
        if p2.micro_batch_size < 1:
            raise ConfigError(f"phase2.micro_batch_size must be >= 1, got {p2.micro_batch_size}")
        if p2.max_steps and not self.data.max_seq_len < p2.max_seq_len <= self.model.max_position_embeddings:
            raise ConfigError(f"phase2.max_seq_len must be in ({self.data.max_seq_len}, "
                              f"{self.model.max_position_embeddings}], got {p2.max_seq_len}")
        if p2.max_steps and self.data.masking == "static":  # checked now, not when phase 1 has run
            check_max_predictions(p2.max_predictions, self.data.mask_rate, p2.max_seq_len, "phase2")
        if p2.max_steps and p2.warmup_steps > p2.max_steps:
            raise ConfigError(f"phase2.warmup_steps must be in [-1, phase2.max_steps={p2.max_steps}], "
                              f"got {p2.warmup_steps}")
        m = self.train.masking
        if m.max_predictions is not None:  # a dynamic-masking cap is per length too
            check_max_predictions(m.max_predictions, m.rate, self.data.max_seq_len, "train.masking",
                                  length="data.max_seq_len", rate_name="train.masking.rate")
        check_run_name(self.run_name)
        if p2.max_steps and m.max_predictions is not None:  # the dynamic cap phase 2 takes (phase2_run), named
            check_max_predictions(p2.max_predictions, m.rate, p2.max_seq_len, "phase2",
                                  rate_name="train.masking.rate")
        if p2.max_steps:  # phase 2's own config, checked now: not once phase 1 has trained
            try:
                self.phase2_run("<phase 1's checkpoint>", "<phase 1's tokenizer>")
            except ConfigError as e:
                raise ConfigError(f"phase 2 (phase2.max_steps={p2.max_steps}): {e}") from None
        return self

    def setting_names(self) -> dict[str, str]:
        """What the user sets this run's step total, warmup and peak lr with, for the lines that name a change of
        them: phase 2's are phase2.* (its optim.lr is phase2.lr, or phase 1's optim.lr where that is 0)."""
        if self.phase == 2:
            return {"total": "phase2.max_steps", "warmup": "phase2.warmup_steps",
                    "lr": "phase 2's lr (phase2.lr, or optim.lr where that is 0)"}
        return dict(SETTING_NAMES)

    def phase2_run(self, phase1_checkpoint: str, tokenizer_dir: str) -> "PretrainConfig":
        """Phase 2 = this config at phase2.max_seq_len, same tokenizer, starting from phase 1's weights (validated).
        A dynamic-masking cap (train.masking.max_predictions) becomes phase2.max_predictions, as the static one does:
        phase 1's 20 at 512 tokens masked 3.9% of each row, not 15%."""
        p = self.phase2
        out = copy.deepcopy(self)
        out.run_name = f"{self.run_name}-phase2"
        out.corpus.harvest_installed_docs = False  # the corpus is already in data.sources
        out.data.max_seq_len, out.data.max_predictions = p.max_seq_len, p.max_predictions
        out.data.tokenizer.path = tokenizer_dir  # a retrained tokenizer would not match phase 1's embeddings
        out.train.max_steps, out.train.micro_batch_size = p.max_steps, p.micro_batch_size
        out.train.init_checkpoint, out.train.reset_optimizer = phase1_checkpoint, p.reset_optimizer
        if out.train.masking.max_predictions is not None:
            out.train.masking.max_predictions = p.max_predictions
        out.optim.lr, out.optim.warmup_steps = p.lr or self.optim.lr, p.warmup()
        out.phase2, out.phase = type(p)(), 2
        return out.validate()

    def validate_pipeline(self) -> None:
        """What jobs/engine/pipeline.py can run (whatever the worker count), refused before any worker
        starts; build_pipeline_engine applies the same rules to callers that skip `validate`."""
        o, d = self.optim, self.deepspeed
        if d.pipeline_stages < 1:
            raise ConfigError(f"deepspeed.pipeline_stages must be >= 1, got {d.pipeline_stages}")
        if d.partition_method not in PARTITION_METHODS:
            raise ConfigError(f"deepspeed.partition_method must be one of {PARTITION_METHODS}, "
                              f"got {d.partition_method!r}")
        if d.pipeline_stages == 1:
            return
        if d.pipeline_stages > self.model.num_hidden_layers + 4:
            raise ConfigError(f"deepspeed.pipeline_stages ({d.pipeline_stages}) exceeds the pipeline's "
                              f"{self.model.num_hidden_layers + 4} layers; allowed: 1 to "
                              f"{self.model.num_hidden_layers + 4} (model.num_hidden_layers + 4)")
        if d.zero_stage > 1 or d.offload_optimizer or d.offload_params:
            # What this precision allows: ZeRO-0 is refused in fp32 (below) and bf16 (validate), and offering it there
            # sent the user from this refusal to the next.
            stages = ("deepspeed.zero_stage 0 or 1" if d.precision == "fp16" else
                      f"deepspeed.zero_stage=1 at deepspeed.precision={d.precision} (fp16 allows zero_stage 0 or 1)")
            raise ConfigError(f"deepspeed.pipeline_stages > 1 needs {stages} and no offload: ZeRO-2/3 shard gradients "
                              f"and parameters that the pipeline keeps per stage")
        if d.zero_stage == 0 and d.precision == "fp32":
            # DeepSpeed 0.19's plain fp32 optimizer has no overflow check: a NaN step's gradients were applied (the
            # weights poisoned while the loop said "skipped"). And its clipping (runtime.utils.clip_grad_norm_)
            # counts a gradient only on model-parallel rank 0, which on a pipeline grid is stage 0: the other
            # stages' gradients are left out of the norm. ZeRO-1 does both (the pipeline e2e test checks its norm).
            raise ConfigError("deepspeed.pipeline_stages > 1 in fp32 needs deepspeed.zero_stage=1 (DeepSpeed's "
                              "stage-0 optimizer applies a NaN step's gradients, and its clipping misses the later "
                              "stages)")
        if o.name == "lamb":  # its trust ratios need whole tensors: norms summed over a stage's data-parallel ranks
            raise ConfigError("deepspeed.pipeline_stages > 1 with optim.name='lamb' is not supported: LAMB's trust "
                              "ratio needs each tensor's whole norm, which a pipeline's ZeRO slices do not sum; "
                              "use adamw")
        if self.faults.nan_at_step:
            raise ConfigError("faults.nan_at_step (fault injection) is not supported with pipeline stages")

    def written_paths(self) -> dict[str, str]:
        """Every path or URI the job writes to, by field."""
        written = {"output_dir": self.output_dir, "data.output_root": self.data.output_root,
                   **self.tracking.written_paths()}
        if self.corpus.harvest_installed_docs:
            written["corpus.harvest_dir"] = self.corpus.harvest_dir
        return written

    def check_environment(self) -> "PretrainConfig":
        """What the machine the job starts on must provide, checked before any Ray work (unlike `validate`,
        the answer depends on where it runs: a GPU config validates on a laptop, and runs on a cluster)."""
        refuse_relative_when_submitted(self.written_paths())
        check_output_dir("output_dir", self.output_dir)
        check_output_dir("data.output_root", self.data.output_root)
        self.tracking.check_reachable()
        self.tracking.check_experiment()
        if self.corpus.harvest_installed_docs:
            check_harvest_dir("corpus.harvest_dir", self.corpus.harvest_dir)
        harvested = Path(self.corpus.harvest_dir).resolve() if self.corpus.harvest_installed_docs else None
        for i, source in enumerate(self.data.sources):
            if "://" in source and not source.startswith("file://"):
                check_uri_backend(f"data.sources[{i}]", source)  # Ray Data reads it, and says if it is not there
                continue
            path = source.removeprefix("file://")
            if Path(path).resolve() == harvested:
                continue  # the job harvests it first
            found = glob.glob(path, recursive=True) if glob.has_magic(path) else Path(path).exists()
            if not found:
                raise ConfigError(f"data.sources[{i}] must be an existing file or folder, a glob that matches, "
                                  f"or a URI, got {source!r} (nothing there)")
            self._refuse_unread_files(i, source)
        init = self.train.init_checkpoint
        if init and "://" not in init and not Path(init).is_dir() and not self._started():
            from bert_core.files import moved_aside_said

            raise ConfigError(f"train.init_checkpoint must be an existing checkpoint folder or a URI, got {init!r} "
                              f"(nothing there{moved_aside_said(init)})")
        tokenizer = self.data.tokenizer.path
        if tokenizer and not Path(tokenizer).exists():
            raise ConfigError(f"data.tokenizer.path must be an existing tokenizer folder or file, or null to train "
                              f"one, got {tokenizer!r} (nothing there)")
        if tokenizer:  # a folder that is no BERT WordPiece tokenizer, or one its settings contradict: here, before Ray
            from bert_core.tokenizer import given_tokenizer

            given_tokenizer(tokenizer, self.data.tokenizer.lowercase, self.data.tokenizer.strip_accents)
        self.scaling.check_environment()
        return self

    def _refuse_unread_files(self, i: int, source: str) -> None:
        """The files prepare() would read from local source `i`, refused as its reader refuses them (a .zst file, one
        that cannot be read, a folder of hidden files only): here, not after Ray started and the GPU nodes came up.
        pipelines.source_files, not pipelines.sources: that one imports Ray, which a check must not."""
        from pipelines.source_files import SourceError, refuse_unread_codec, resolve_sources

        try:
            for path in resolve_sources(replace(self.data, sources=[source])):
                refuse_unread_codec(path)
        except SourceError as e:
            raise ConfigError(f"data.sources[{i}]: {str(e).removeprefix('data.sources: ')}") from None

    def _started(self) -> bool:
        """The run's folder holds a checkpoint already: it took its start, whose folder may be gone since (rotated
        away by the run it came from), and it goes on from its own (resubmit.started keeps the start in its basis).
        Ray Train's checkpoint_* folders, looked for here: jobs.runtime.resubmit imports the workers' modules."""
        name = f"{self.run_name}-phase1" if self.phase2.max_steps and self.phase == 1 else self.run_name
        return any(p.is_dir() for p in (Path(self.output_dir).resolve() / name).glob("checkpoint_*"))

    def to_dict(self) -> dict:
        return to_dict(self)

    def to_worker(self) -> dict:
        """The config as the driver hands it to its Ray Train workers: to_dict, and the phase (no field: a worker's
        from_dict made every config phase 1's, and a resubmitted phase 2's resume lines named train.max_steps and
        optim.lr, phase 1's settings, for the phase2.* the user changed)."""
        return {**self.to_dict(), "phase": self.phase}

    @classmethod
    def from_worker(cls, d: dict) -> "PretrainConfig":
        """The config to_worker handed over."""
        d = dict(d)
        phase = d.pop("phase", 1)
        cfg = cls.from_dict(d)
        cfg.phase = phase
        return cfg

    @classmethod
    def from_dict(cls, d: dict) -> "PretrainConfig":
        model = d.get("model", {})
        d = {**d, "model": {"preset": "tiny", **model}} if "preset" not in model else d
        return from_dict(cls, d)


def eval_set_size(available: int, replicas: int) -> int:
    """How many of `available` rows the held-out set keeps: every replica scores as many (ZeRO-3 and pipeline
    stages run their forwards in lockstep), and the set must not depend on the replica count. A multiple of 48 (of
    8 under 48 rows) serves 1, 2, 3, 4, 6, 8, 12, 16, 24 and 48 replicas (1, 2, 4 and 8) with one set; another
    count cuts it to its own multiple, and scores fewer rows than those would. (A cut to the replicas' multiple
    alone made a 21-row split 20 rows on two workers and 21 on one: a resubmission on one worker scored another
    set than its run's first evaluation.)"""
    n = available
    for divisor in (48, 8):
        if n >= divisor:
            n -= n % divisor
            break
    return n - n % replicas
