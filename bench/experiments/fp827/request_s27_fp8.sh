#!/bin/bash
# fp827's request for the next session (issue 27, fp8 / our fp16). Time limit: 90 s (own guard 86 s).
# (1) the fp8 default against our fp16 best and cuDNN at N 16384 D=128 both masks and N 4096 D=128 / D=64 causal, on
#     whatever H200 the session has (s20 read 1.27-1.31 at N 16384 D=128, s26 1.34-1.52 with the same SASS);
# (2) attention_fa3.FP8_CONFIGS[(128, *)]: 4 stages (the table) against 2 (s26: +4% to +19% at N 16384, a tie at 4096).
# Run in the repository root with PYTHONPATH set; results under $OUT/fp827_s27; FP827_DRY=1 runs it on CPU.
set -u
T0=$(date +%s)
RES=${OUT:-/tmp/fp827_out}/fp827_s27
mkdir -p "$RES"
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,driver_version,power.limit --format=csv,noheader > "$RES/env.txt" 2>&1
git log -1 --format=%H >> "$RES/env.txt" 2>/dev/null
FP827_ROUND=s27 timeout 50 python3 bench/experiments/fp827/ab.py --out "$RES/n16384.jsonl" --seq 16384 --reps 12 \
  --budget-s 30 --points 128,1 128,0 ${FP827_DRY:+--dry} > "$RES/n16384.log" 2>&1
echo "n16384 rc=$? at $(( $(date +%s) - T0 ))s"
left=$(( 86 - ($(date +%s) - T0) ))
[ "$left" -gt 34 ] && left=34
if [ "$left" -gt 8 ]; then
  FP827_ROUND=s27 timeout "$left" python3 bench/experiments/fp827/ab.py --out "$RES/n4096.jsonl" --seq 4096 \
    --reps 14 --budget-s $(( left - 12 )) --points 128,1 128,0 64,1 ${FP827_DRY:+--dry} > "$RES/n4096.log" 2>&1
  echo "n4096 rc=$? at $(( $(date +%s) - T0 ))s"
fi
grep -h "==\|slept\|error" "$RES/n4096.log" "$RES/n16384.log" 2>/dev/null | sed 's/TFLOP.*spread = max\/min slept//' | tail -24
echo "== done in $(( $(date +%s) - T0 ))s"
