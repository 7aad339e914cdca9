#!/bin/bash
# sh29, fourth call (session 29, issue 27): the backward cells in shuffled rounds (d64c28's bwd_ab.py --shuffle SEED):
# N 4096 and 16384, D=128 and 64, causal (ours, cuDNN, tutorial 06) and not (ours, cuDNN); ours called directly with
# no mode or config (the default). Limit 240 s; each point under its own limit, whatever finishes comes back.
# SH29_DRY=1: the interpreter at a tiny size.
set -u
T0=$(date +%s)
RES=${OUT:-/tmp/sh29}/sh29_bwd; mkdir -p "$RES"
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,clocks.mem,driver_version,power.limit --format=csv,noheader \
  > "$RES/env.txt" 2>&1
DEV=cuda; [ -n "${SH29_DRY:-}" ] && DEV=cpu
for N in 4096 16384; do
  for D in 128 64; do
    for C in 1 0; do
      ENT="cudnn def"; [ $C = 1 ] && ENT="cudnn def t06"
      LIM=24; [ $N = 16384 ] && LIM=32
      [ -n "${SH29_DRY:-}" ] && N=256
      left=$(( 235 - ($(date +%s) - T0) )); [ $left -lt 10 ] && break 3; [ $LIM -gt $left ] && LIM=$left
      timeout $LIM python3 bench/experiments/d64c28/bwd_ab.py --seq $N --head-dim $D --causal $C --entries $ENT \
        --rounds 5 --rep-ms 40 --shuffle 71 --device $DEV --out "$RES/n${N}_d${D}_c${C}.json" \
        > "$RES/n${N}_d${D}_c${C}.log" 2>&1
      echo "N=$N D=$D causal=$C rc=$? at $(( $(date +%s) - T0 ))s: $(grep -h '^N=.* def ' "$RES/n${N}_d${D}_c${C}.log" | cut -c1-150)"
    done
  done
done
echo "== done in $(( $(date +%s) - T0 ))s"
