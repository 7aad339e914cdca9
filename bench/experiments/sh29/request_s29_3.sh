#!/bin/bash
# sh29, third call (session 29, issue 27): the forward cells in shuffled rounds (SH29_ROUND=3): at N 4096 and 16384,
# D=128 and 64, causal and not, the fp8 default, our best fp16, cuDNN and the fp8 default again. Limit 200 s.
set -u
T0=$(date +%s)
RES=${OUT:-/tmp/sh29}/sh29_3; mkdir -p "$RES"
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,clocks.mem,driver_version,power.limit --format=csv,noheader \
  > "$RES/env.txt" 2>&1
SH29_ROUND=3 timeout 75 python3 bench/experiments/sh29/ab_defaults.py --shuffle --seed 61 --out "$RES/n4096.jsonl" \
  --seq 4096 --reps 24 --budget-s 55 --points 128,1 128,0 64,1 64,0 ${SH29_DRY:+--dry} > "$RES/n4096.log" 2>&1
echo "n4096 rc=$? at $(( $(date +%s) - T0 ))s"
SH29_ROUND=3 timeout 115 python3 bench/experiments/sh29/ab_defaults.py --shuffle --seed 67 --out "$RES/n16384.jsonl" \
  --seq 16384 --reps 16 --budget-s 90 --points 128,1 128,0 64,1 64,0 ${SH29_DRY:+--dry} > "$RES/n16384.log" 2>&1
echo "n16384 rc=$? at $(( $(date +%s) - T0 ))s"
grep -h "==\|slept  \|error" "$RES"/n*.log 2>/dev/null | grep -v "^  percall\|^  fp\|^  cudnn" | tail -20
echo "== done in $(( $(date +%s) - T0 ))s"
