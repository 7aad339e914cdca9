#!/bin/bash
# fp828 R3 (issue 27: fp8 forward >= 1.3x our fp16 forward): the defaults after R2 confirmed. Limit 420 s (own guard
# 410 s). fp8 D=128: REFILL_TOP (the key loops' copies at the top of a trip; causal any N, non-causal N <= 8192) and
# ONE_LOOP (causal) against the defaults before (`was`, SASS identical to main's), the parts alone, the new default a
# second time (`again`), our fp16 best and cuDNN; interleaved rounds, every output checked. Then the GPU tests of the
# changes. Run in the repository root with PYTHONPATH set; FP828_DRY=1 runs it on CPU.
set -u
T0=$(date +%s)
RES=${OUT:-/tmp/fp828_out}/fp828_r3
mkdir -p "$RES"
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,driver_version,power.limit --format=csv,noheader > "$RES/env.txt" 2>&1
FP828_ROUND=3 timeout 150 python3 bench/experiments/fp828/ab.py --out "$RES/n16384.jsonl" --seq 16384 --reps 18 \
  --budget-s 60 --points 128,1 128,0 ${FP828_DRY:+--dry} > "$RES/n16384.log" 2>&1
echo "n16384 rc=$? at $(( $(date +%s) - T0 ))s"
left=$(( 330 - ($(date +%s) - T0) ))
[ "$left" -gt 150 ] && left=150
if [ "$left" -gt 20 ]; then
  FP828_ROUND=3 timeout "$left" python3 bench/experiments/fp828/ab.py --out "$RES/n4096.jsonl" --seq 4096 --reps 24 \
    --budget-s $(( left - 40 )) --points 128,1 128,0 64,1 ${FP828_DRY:+--dry} > "$RES/n4096.log" 2>&1
  echo "n4096 rc=$? at $(( $(date +%s) - T0 ))s"
fi
left=$(( 405 - ($(date +%s) - T0) ))
[ "$left" -gt 70 ] && left=70
if [ "$left" -gt 10 ] && [ -z "${FP828_DRY:-}" ]; then
  timeout "$left" python3 -m pytest -q -x -p no:cacheprovider tests/gpu/test_gpu_fp828.py tests/gpu/test_gpu_fwd_desc.py \
    > "$RES/gpu_tests.log" 2>&1
  echo "gpu tests rc=$? at $(( $(date +%s) - T0 ))s: $(tail -1 "$RES/gpu_tests.log")"
fi
grep -h "==\|slept\|error" "$RES/n4096.log" "$RES/n16384.log" 2>/dev/null | sed 's/TFLOP.*spread = max\/min slept//' \
  | grep -v "^  percall" | tail -42
echo "== done in $(( $(date +%s) - T0 ))s"
