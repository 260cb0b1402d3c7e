#!/usr/bin/env bash
# Every GPU measurement the issues ask for, as ONE command for a session that is lent a GPU machine
# (its image has torch, transformers, peft, tqdm; nothing is installed or downloaded here).
#
#   1. rung 4: bench/gpu_check.py, the qwen2.5-7b preset on a 7B-shaped model with random weights
#      (bf16, LoRA on attention + MLP, gradient checkpointing, micro-batch 8): step time, tokens/s,
#      peak memory next to toy_rl.lm.estimate's prediction;
#   2. rung 2: bench/bench_arithmetic.py on CUDA and CPU side by side (RL steps per second).
#
# Rung 2 needs its warm starts: make them here first (`toy-rl warmstart --task all`, ~3 min) and copy
# the cache into the repository so it travels:  mkdir -p .gpu_cache && cp -r ~/.cache/toy_rl/warmstart .gpu_cache/
# (.gpu_cache is git-ignored). Then, with the device tool:
#   run(command="bash bench/gpu_session.sh", carry=[".gpu_cache"], timeout_s=540)
# Results come back under $OUT (gpu_check.json, gpu_check.log, arithmetic.log); copy the numbers into
# README.md and bench/README.md with the date and the machine line the scripts print.
set -uo pipefail
OUT=${OUT:-/tmp/toy_rl_gpu}
mkdir -p "$OUT"
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
[ -d .gpu_cache ] && export TOY_RL_CACHE="$PWD/.gpu_cache"
PY=${PYTHON:-python3}
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv | tee "$OUT/gpu.txt"
timeout 300 $PY bench/gpu_check.py --steps 3 --out "$OUT/gpu_check.json" 2>&1 | tee "$OUT/gpu_check.log"
timeout 180 $PY bench/bench_arithmetic.py --device cuda cpu --steps 30 2>&1 | tee "$OUT/arithmetic.log"
