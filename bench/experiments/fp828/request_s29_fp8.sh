#!/bin/bash
# fp828's request for the next session (issue 27, fp8 / our fp16). Time limit: 300 s (own guard 290 s).
# (1) the fp8 defaults since fp828 (D=128: the key loops' copies at the top of a trip, causal in one loop) against the
#     defaults before (`was`) at N 16384 and 4096, on whatever H200 the session has;
# (2) what the global KERNELC_TMA_REFILL_TOP=1 would do to the other forwards it changes (our fp16 pointer forward at
#     D=64, the fp16 best there, and the FA2-order descriptor forward), and fp8 D=64 at 2 stages with the copies at the
#     top; (3) non-causal D=128 at N 8192 (REFILL_TOP's bound). Then the GPU tests of fp828's changes.
# Run in the repository root with PYTHONPATH set; results under $OUT/fp828_s29; FP828_DRY=1 runs it on CPU.
set -u
T0=$(date +%s)
RES=${OUT:-/tmp/fp828_out}/fp828_s29
mkdir -p "$RES"
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,driver_version,power.limit --format=csv,noheader > "$RES/env.txt" 2>&1
FP828_ROUND=s29 timeout 90 python3 bench/experiments/fp828/ab.py --out "$RES/n16384.jsonl" --seq 16384 --reps 14 \
  --budget-s 40 --points 128,1 128,0 ${FP828_DRY:+--dry} > "$RES/n16384.log" 2>&1
echo "n16384 rc=$? at $(( $(date +%s) - T0 ))s"
FP828_ROUND=s29 timeout 50 python3 bench/experiments/fp828/ab.py --out "$RES/n8192.jsonl" --seq 8192 --reps 14 \
  --budget-s 25 --points 128,0 ${FP828_DRY:+--dry} > "$RES/n8192.log" 2>&1
echo "n8192 rc=$? at $(( $(date +%s) - T0 ))s"
left=$(( 240 - ($(date +%s) - T0) ))
[ "$left" -gt 110 ] && left=110
if [ "$left" -gt 20 ]; then
  FP828_ROUND=s29 timeout "$left" python3 bench/experiments/fp828/ab.py --out "$RES/n4096.jsonl" --seq 4096 --reps 20 \
    --budget-s $(( left - 30 )) --points 128,1 128,0 64,1 64,0 ${FP828_DRY:+--dry} > "$RES/n4096.log" 2>&1
  echo "n4096 rc=$? at $(( $(date +%s) - T0 ))s"
fi
left=$(( 288 - ($(date +%s) - T0) ))
[ "$left" -gt 45 ] && left=45
if [ "$left" -gt 10 ] && [ -z "${FP828_DRY:-}" ]; then
  timeout "$left" python3 -m pytest -q -x -p no:cacheprovider tests/gpu/test_gpu_fp828.py > "$RES/gpu_tests.log" 2>&1
  echo "gpu tests rc=$? at $(( $(date +%s) - T0 ))s: $(tail -1 "$RES/gpu_tests.log")"
fi
grep -h "==\|slept\|error" "$RES/n4096.log" "$RES/n8192.log" "$RES/n16384.log" 2>/dev/null \
  | sed 's/TFLOP.*spread = max\/min slept//' | grep -v "^  percall" | tail -50
echo "== done in $(( $(date +%s) - T0 ))s"
