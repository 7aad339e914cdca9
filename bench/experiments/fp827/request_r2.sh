#!/bin/bash
# fp827 R2 (issue 27: fp8 / our fp16 at N 16384 D=128, both masks; N 4096 D=64 causal). Limit 90 s.
# The fp8 default (64-row programs) against the 128-row fp8 forms sharing one K/V ring (the FA3 order at 4 / 3 / 2
# stages, 240 consumer registers; the pointer forward at 8 warps), our fp16 best, cuDNN; interleaved rounds, every
# output checked (fp8 against SDPA on the dequantised inputs). ab.py's round 3 (round 2 ran on fp827's own calls).
set -u
T0=$(date +%s)
RES=${OUT:-/tmp/fp827_out}/fp827_r2
mkdir -p "$RES"
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,driver_version --format=csv,noheader > "$RES/env.txt" 2>&1
git log -1 --format=%H >> "$RES/env.txt" 2>/dev/null
FP827_ROUND=3 timeout 58 python3 bench/experiments/fp827/ab.py --out "$RES/n16384.jsonl" --seq 16384 --reps 12 \
  --budget-s 38 --points 128,1 128,0 ${FP827_DRY:+--dry} > "$RES/n16384.log" 2>&1
echo "n16384 rc=$? at $(( $(date +%s) - T0 ))s"
left=$(( 86 - ($(date +%s) - T0) ))
[ "$left" -gt 30 ] && left=30
if [ "$left" -gt 8 ]; then
  FP827_ROUND=3 timeout "$left" python3 bench/experiments/fp827/ab.py --out "$RES/n4096.jsonl" --seq 4096 --reps 12 \
    --budget-s $(( left - 10 )) --points 64,1 128,0 128,1 ${FP827_DRY:+--dry} > "$RES/n4096.log" 2>&1
  echo "n4096 rc=$? at $(( $(date +%s) - T0 ))s"
fi
grep -h "==\|slept\|error" "$RES/n4096.log" "$RES/n16384.log" 2>/dev/null | sed 's/TFLOP.*spread = max\/min slept//' | tail -24
echo "== done in $(( $(date +%s) - T0 ))s"
