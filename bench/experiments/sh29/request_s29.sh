#!/bin/bash
# sh29 (session 29, issue 27): fp828's fp8 D=128 defaults against `was` in shuffled rounds (ab_defaults.py). Limit 170 s.
# N 4096 causal / non-causal, N 8192 non-causal, N 16384 causal: fp828's decision points. SH29_DRY=1: CPU.
set -u
T0=$(date +%s)
RES=${OUT:-/tmp/sh29}/sh29; mkdir -p "$RES"
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,clocks.mem,driver_version,power.limit --format=csv,noheader \
  > "$RES/env.txt" 2>&1
DRY=${SH29_DRY:+--dry}
timeout 60 python3 bench/experiments/sh29/ab_defaults.py --shuffle --seed 41 --out "$RES/n4096.jsonl" --seq 4096 \
  --reps 30 --budget-s 30 --points 128,1 128,0 $DRY > "$RES/n4096.log" 2>&1; echo "n4096 rc=$? at $(( $(date +%s) - T0 ))s"
timeout 50 python3 bench/experiments/sh29/ab_defaults.py --shuffle --seed 43 --out "$RES/n8192.jsonl" --seq 8192 \
  --reps 24 --budget-s 20 --points 128,0 $DRY > "$RES/n8192.log" 2>&1; echo "n8192 rc=$? at $(( $(date +%s) - T0 ))s"
timeout 55 python3 bench/experiments/sh29/ab_defaults.py --shuffle --seed 47 --out "$RES/n16384.jsonl" --seq 16384 \
  --reps 16 --budget-s 20 --points 128,1 $DRY > "$RES/n16384.log" 2>&1; echo "n16384 rc=$? at $(( $(date +%s) - T0 ))s"
grep -h "==\|fp8_\|fp16_fa3\|error" "$RES"/n*.log 2>/dev/null | grep -v "^  percall" | tail -24
echo "== done in $(( $(date +%s) - T0 ))s"
