#!/bin/bash
# fp8h28's next-session request (issue 27: fp8 forward >= 1.3x our fp16 forward at N 4096 D=64 causal, per call): a
# second call of the host path R4 measured (one call is not "met"). Limit 120 s (own guards ~110 s).
# FP8H28_DRY=1 runs it on CPU (the interpreter). Run in the repository root with PYTHONPATH set.
# 1. fp8h28/ab_h28.py at N 4096 D=64 causal, 32 reps (main's fp8 host path against this tree's, each through fp828's
#    harness wrapper and directly; fp16 pointer; cuDNN), then D=64 non-causal, 16 reps. 2. fp8h28/host_probe.py.
set -u
T0=$(date +%s)
RES=${OUT:-/tmp/fp8h28_s29}/fp8h28_s29
mkdir -p "$RES"
el() { echo $(( $(date +%s) - T0 )); }
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,driver_version,power.limit --format=csv,noheader > "$RES/env.txt" 2>&1
timeout 50 python3 bench/experiments/fp8h28/ab_h28.py --out "$RES/n4096.jsonl" --seq 4096 --reps 32 --budget-s 35 \
  --points 64,1 ${FP8H28_DRY:+--dry --reps 2} > "$RES/n4096.log" 2>&1
echo "ab D64 causal rc=$? at $(el)s"
left=$(( 80 - $(el) )); [ "$left" -gt 30 ] && left=30
if [ "$left" -gt 8 ]; then
  timeout "$left" python3 bench/experiments/fp8h28/ab_h28.py --out "$RES/n4096_nc.jsonl" --seq 4096 --reps 16 \
    --budget-s $(( left - 6 )) --points 64,0 ${FP8H28_DRY:+--dry --reps 2} > "$RES/n4096_nc.log" 2>&1
  echo "ab D64 rc=$? at $(el)s"
fi
left=$(( 112 - $(el) )); [ "$left" -gt 30 ] && left=30
if [ "$left" -gt 8 ]; then
  timeout "$left" python3 bench/experiments/fp8h28/host_probe.py --out "$RES/host.json" --rounds 8 --calls 60 \
    --points 64,1 ${FP8H28_DRY:+--dry --rounds 1} > "$RES/host.log" 2>&1
  echo "host_probe rc=$? at $(el)s"
fi
grep -hE "^host D=.* (fp8_main|fp8_new|fp16_ptr|cudnn) " "$RES/host.log" | sed 's/  p90.*//'
grep -h "/ fp16_ptr\|kept\|percall-slept" "$RES/n4096.log" "$RES/n4096_nc.log" 2>/dev/null | tail -16
echo "== done in $(el)s"
