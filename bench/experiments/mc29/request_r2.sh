#!/bin/bash
# mc29 R2 (issue 27: fp8 forward >= 1.3x our fp16 forward). Limit 300 s (own guard 290 s).
# ab.py: the fp8 default (64-row programs, 3 an SM) against the same kernel in clusters of two programs whose K/V
# copies are multicast (num_ctas=2; cluster barrier or 'empty' barriers before each refill; copies after the dots or
# at the top of a trip), the single-program build named (fp8_ptr_1cta) and again (fp8_ptr_again), our fp16 best (FA3
# order) and cuDNN, interleaved call by call, every output checked: N 16384 non-causal (12+ rounds) and causal (the
# compiler refuses to multicast there: the cluster launch alone), N 8192 and 4096 non-causal. Then mc29's GPU tests
# (multicast outputs bit for bit the single-program build's). Run in the repository root with PYTHONPATH set;
# MC29_DRY=1 runs it on CPU.
set -u
T0=$(date +%s)
RES=${OUT:-/tmp/mc29_out}/mc29_r2
mkdir -p "$RES"
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,clocks.mem,driver_version,power.limit --format=csv,noheader \
  > "$RES/env.txt" 2>&1
timeout 120 python3 bench/experiments/mc29/ab.py --out "$RES/n16384.jsonl" --seq 16384 --reps 14 --budget-s 85 \
  --points 128,0 ${MC29_DRY:+--dry} > "$RES/n16384.log" 2>&1
echo "n16384 rc=$? at $(( $(date +%s) - T0 ))s"
timeout 40 python3 bench/experiments/mc29/ab.py --out "$RES/n8192.jsonl" --seq 8192 --reps 14 --budget-s 25 \
  --points 128,0 --only fp8_ptr fp8_ptr_1cta fp16_fa3 cudnn fp8_mc fp8_mc_empty fp8_mc_top fp8_ptr_top \
  ${MC29_DRY:+--dry} > "$RES/n8192.log" 2>&1
echo "n8192 rc=$? at $(( $(date +%s) - T0 ))s"
timeout 35 python3 bench/experiments/mc29/ab.py --out "$RES/n4096.jsonl" --seq 4096 --reps 20 --budget-s 20 \
  --points 128,0 --only fp8_ptr fp8_ptr_1cta fp16_fa3 cudnn fp8_mc fp8_mc_empty fp8_mc_top fp8_ptr_top \
  ${MC29_DRY:+--dry} > "$RES/n4096.log" 2>&1
echo "n4096 rc=$? at $(( $(date +%s) - T0 ))s"
left=$(( 230 - ($(date +%s) - T0) ))
[ "$left" -gt 45 ] && left=45
if [ "$left" -gt 15 ]; then
  timeout "$left" python3 bench/experiments/mc29/ab.py --out "$RES/n16384c.jsonl" --seq 16384 --reps 10 \
    --budget-s $(( left - 12 )) --points 128,1 ${MC29_DRY:+--dry} > "$RES/n16384c.log" 2>&1
  echo "n16384 causal rc=$? at $(( $(date +%s) - T0 ))s"
fi
left=$(( 288 - ($(date +%s) - T0) ))
[ "$left" -gt 60 ] && left=60
if [ "$left" -gt 10 ] && [ -z "${MC29_DRY:-}" ]; then
  timeout "$left" python3 -m pytest -q -p no:cacheprovider tests/gpu/test_gpu_multicast.py > "$RES/gpu_tests.log" 2>&1
  echo "gpu tests rc=$? at $(( $(date +%s) - T0 ))s: $(tail -1 "$RES/gpu_tests.log")"
fi
grep -h "==\|fp8_\|fp16_fa3\|cudnn\|error" "$RES"/n*.log 2>/dev/null | grep -v "^  percall" | tail -40
echo "== done in $(( $(date +%s) - T0 ))s"
