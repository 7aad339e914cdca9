#!/bin/bash
# sh29, second call (session 29, issue 27): fp8 D=128 non-causal at N 16384 with REFILL_TOP's N bound dropped: the new
# default against `late` (the copies after the dots, the old default there), the default again, our fp16 best and
# cuDNN, two processes of 40 shuffled rounds; then the fp8 forward's GPU tests. Limit 230 s. SH29_DRY=1: CPU.
set -u
T0=$(date +%s)
RES=${OUT:-/tmp/sh29}/sh29_2; mkdir -p "$RES"
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,clocks.mem,driver_version,power.limit --format=csv,noheader \
  > "$RES/env.txt" 2>&1
for k in 51 151; do
  SH29_ROUND=2 timeout 70 python3 bench/experiments/sh29/ab_defaults.py --shuffle --seed $k --out "$RES/n16384_s$k.jsonl" \
    --seq 16384 --reps 40 --budget-s 30 --points 128,0 ${SH29_DRY:+--dry} > "$RES/n16384_s$k.log" 2>&1
  echo "n16384 seed $k rc=$? at $(( $(date +%s) - T0 ))s"
done
if [ -z "${SH29_DRY:-}" ]; then
  left=$(( 225 - ($(date +%s) - T0) ))
  timeout $left python3 -m pytest -q -p no:cacheprovider -n 4 tests/gpu/test_gpu_fp828.py tests/gpu/test_gpu_attention.py \
    tests/gpu/test_gpu_fp8_key_order.py tests/gpu/test_gpu_fwd_desc.py tests/gpu/test_gpu_fwd_order.py \
    tests/gpu/test_gpu_prepared.py > "$RES/gpu_tests.log" 2>&1
  echo "gpu tests rc=$? at $(( $(date +%s) - T0 ))s: $(tail -1 "$RES/gpu_tests.log")"
fi
grep -h "fp8_\|fp16_fa3\|cudnn\|error" "$RES"/n*.log 2>/dev/null | grep -v "^  percall" | tail -14
echo "== done in $(( $(date +%s) - T0 ))s"
