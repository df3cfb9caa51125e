#!/usr/bin/env bash
# Issue 30's checks in one call of the device tool (a lent GPU machine has torch and transformers, no Ray, no MLflow,
# and 15 minutes for a whole session): the steps in order of what is least known, each bounded by its own limit and
# by one deadline, so a hang or a slow step costs only what comes after it. Output: a short summary on stdout; every
# step's whole log in $OUT/steps.log, the profile table and the GPU's clocks/load/power every 5 s beside it.
#
# Carried with the call (both ignored by git: .whl by .gitignore, .gpu by `echo /.gpu/ >> .git/info/exclude`), made
# here first, in the repository's root (~1 minute; 52 MB of the 64 MiB a call carries):
#   .whl      what that machine lacks: DeepSpeed 0.19.8 as a pure-Python wheel (its ops JIT there) and its needs
#               pip download --no-deps --no-binary=:all: -d /tmp/ds deepspeed==0.19.8
#               DS_ACCELERATOR=cuda DS_BUILD_OPS=0 .venv/bin/pip wheel --no-deps --no-build-isolation -w .whl /tmp/ds/*
#               for p in pydantic==2.14.3 pydantic-core==2.50.4 annotated-types==0.8.0 typing-inspection==0.4.5 \
#                        hjson==3.1.0; do pip download --no-deps --only-binary=:all: --python-version 3.12 \
#                 --implementation cp --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 -d .whl $p; done
#   .gpu/ftp  .venv/bin/python bench/gpu_finetune_predict.py --make-inputs .gpu/ftp
#
#   device run: bash bench/gpu_session.sh [STEP ...]   (carry .whl and .gpu, timeout_s 600; no STEP: all, in order)
#
# Seen on an H200 (2026-11-28, BENCHMARKS.md): a base/128 model step took 80-130 s (compile included), large/128 over
# 140 s, fine-tuning ~60 s after DeepSpeed's fused Adam JIT (~2 min, in the background), prediction ~100 s (the
# pipeline at batch 1 alone 44 s), the gpu tests 31 s. Measured then: the three base/128 dropout recipes, prediction,
# the tests. The order below: the one like-for-like figure against compiled `transformers` first (placed 8th, it sat
# past the deadline of a whole run), then the GPU code paths no CPU test reaches, then the sizes not yet measured.
set -u
cd "$(dirname "$0")/.."
WANT=" $* "
START=$(date +%s)
DEADLINE=$((START + ${GPU_SESSION_SECONDS:-570}))
O=${OUT:-/tmp/gpu-session}
mkdir -p "$O"
export PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 TOKENIZERS_PARALLELISM=false
export TORCH_CUDA_ARCH_LIST=9.0  # DeepSpeed 0.19.8's op builder cannot parse the image's "9.0a"
unset DS_ACCELERATOR
export PYTHONPATH=/tmp/site:$PWD  # /tmp/site: the carried wheels, installed below

step() {  # step NAME LIMIT_S CMD...: run CMD under min(LIMIT, time to the deadline), log it, print its summary
    local name=$1 limit=$2 left rc
    shift 2
    [[ "$WANT" == "  " || "$WANT" == *" $name "* ]] || return 0
    left=$((DEADLINE - $(date +%s)))
    ((left < limit)) && limit=$left
    if ((left < 30)); then
        echo "=== $name: skipped, ${left}s left before the deadline" | tee -a "$O/steps.log"
        return
    fi
    echo "=== $name: limit ${limit}s, start $(date -u +%T), +$(($(date +%s) - START))s" | tee -a "$O/steps.log"
    timeout -k 5 "$limit" "$@" > "$O/$name.tmp" 2>&1
    rc=$?
    cat "$O/$name.tmp" >> "$O/steps.log"
    echo "=== $name: rc $rc$( ((rc == 124 || rc == 137)) && echo ' (its limit)'), end +$(($(date +%s) - START))s" | tee -a "$O/steps.log"
    grep -E "^(device|preset|base |large |profile|  [a-z(]|fine-tun|prediction|comparison|predict |[0-9]+ passed|FAILED|ERROR|.*Error|  +(aten|cuda|Optimizer|void|triton))" \
        "$O/$name.tmp" | grep -v "Loading weights" | tail -n 30
    rm -f "$O/$name.tmp"
}

nvidia-smi --query-gpu=name,memory.total,memory.used,clocks.sm,clocks.max.sm,power.draw,power.limit,temperature.gpu,utilization.gpu --format=csv
echo "load: $(cat /proc/loadavg); cpus: $(nproc); $(python3 -c 'import torch, transformers; print("torch", torch.__version__, "transformers", transformers.__version__)')"
nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw,temperature.gpu,utilization.gpu,memory.used --format=csv -l 5 > "$O/smi.csv" 2>&1 &

# DeepSpeed and its fused Adam's JIT build (42 s on the H200), only where a step needs them, in the background at the
# lowest priority while the first bench compiles; its end time goes to the log, to tell whether it overlapped a timed
# block
DS_SETUP=
if [[ "$WANT" == "  " || "$WANT" == *" finetune"* || "$WANT" == *" pytest_gpu "* ]]; then
    (timeout 300 python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl &&
     nice -n 19 timeout 300 python3 -c "from deepspeed.ops.op_builder import FusedAdamBuilder; FusedAdamBuilder().load()" &&
     echo "fused adam built at $(date -u +%T)") > "$O/ds_setup.log" 2>&1 &
    DS_SETUP=$!
fi

# not /tmp/site: installing meanwhile. Eager transformers alone as the baseline (its compile would not fit the lease's
# minutes): the ratio column says "/hf"; base128_bert_dropout runs the compiled one too, like for like
MT="env PYTHONPATH=$PWD python3 bench/model_throughput.py --profile-dir $O --runners ours-compiled,hf"
FTP="python3 bench/gpu_finetune_predict.py --inputs .gpu/ftp"
step base128_bert_dropout 240 $MT --presets base --seq-len 128 --runners ours-compiled,hf-compiled,hf  # like for like
if [[ -n "$DS_SETUP" ]]; then
    while kill -0 "$DS_SETUP" 2>/dev/null && (($(date +%s) < DEADLINE)); do sleep 2; done
    echo "=== deepspeed setup: $(tail -n 2 "$O/ds_setup.log" | tr '\n' ' ')" | tee -a "$O/steps.log"
fi
step pytest_gpu 90 python3 -m pytest -p no:cacheprovider -q -m gpu tests/unit/test_engine_gpu.py \
    tests/unit/test_model.py tests/unit/test_masking.py tests/unit/test_optim.py tests/unit/test_checkpoint_parts.py
step finetune 150 $FTP --only finetune
step finetune_profile 120 $FTP --only profile
step large128 200 $MT --presets large --seq-len 128 --blocks 4 --warmup 5
step predict 120 $FTP --only predict
step seq512_base_large 260 $MT --presets base,large --seq-len 512 --blocks 4 --warmup 5
step base128_tokens131072 130 $MT --presets base --seq-len 128 --tokens 131072 --blocks 4 --warmup 5
step base128_no_dropout 150 $MT --presets base --seq-len 128 --hidden-dropout 0 --attention-dropout 0 --profile
step base128_no_attention_dropout 110 $MT --presets base --seq-len 128 --attention-dropout 0
kill %1 2>/dev/null
echo "=== done at +$(($(date +%s) - START))s; load: $(cat /proc/loadavg)"
