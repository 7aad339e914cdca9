#!/bin/bash
# fp8h28 R4 (issue 27: the fp8 forward's cost per call at N 4096 D=64 causal). Limit 150 s (own guards ~140 s).
# FP8H28_DRY=1 runs it on CPU (the interpreter, no GPU tests).
# 1. fp8h28/host_probe.py: host us of one call behind a queued sleep, main's fp8 call (mainpath.py) against this
#    tree's, fp16 pointer, cuDNN, in one process (D=64 and D=128 causal, N 4096). 2. fp8h28/ab_h28.py: fp828's
#    harness (GPU time behind a sleep and per call, interleaved, outputs checked) at N 4096 D=64 causal, 24 reps, then
#    D=128 causal. 3. fp828/host_probe.py (this tree) for continuity. 4. The GPU tests of the fp8 forward and prepared
#    launches. Run in the repository root with PYTHONPATH set.
set -u
T0=$(date +%s)
RES=${OUT:-/tmp/fp8h28_out}/fp8h28_r4
mkdir -p "$RES"
el() { echo $(( $(date +%s) - T0 )); }
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,driver_version,power.limit --format=csv,noheader > "$RES/env.txt" 2>&1
git rev-parse HEAD >> "$RES/env.txt" 2>/dev/null
timeout 35 python3 bench/experiments/fp8h28/host_probe.py --out "$RES/host.json" --rounds 8 --calls 60 ${FP8H28_DRY:+--dry --rounds 1} \
  > "$RES/host.log" 2>&1
echo "host_probe rc=$? at $(el)s"
timeout 45 python3 bench/experiments/fp8h28/ab_h28.py --out "$RES/n4096.jsonl" --seq 4096 --reps 24 --budget-s 30 \
  --points 64,1 ${FP8H28_DRY:+--dry --reps 2} > "$RES/n4096.log" 2>&1
echo "ab D64 causal rc=$? at $(el)s"
left=$(( 85 - $(el) )); [ "$left" -gt 25 ] && left=25
if [ "$left" -gt 8 ]; then
  timeout "$left" python3 bench/experiments/fp8h28/ab_h28.py --out "$RES/n4096_d128.jsonl" --seq 4096 --reps 16 \
    --budget-s $(( left - 6 )) --points 128,1 ${FP8H28_DRY:+--dry --reps 2} > "$RES/n4096_d128.log" 2>&1
  echo "ab D128 causal rc=$? at $(el)s"
fi
left=$(( 140 - $(el) )); [ "$left" -gt 60 ] && left=60
if [ "$left" -gt 10 ] && [ -z "${FP8H28_DRY:-}" ]; then
  timeout "$left" python3 -m pytest -q -x -p no:cacheprovider tests/gpu/test_gpu_prepared.py tests/gpu/test_gpu_fwd_desc.py \
    tests/gpu/test_gpu_fp828.py > "$RES/gpu_tests.log" 2>&1
  echo "gpu tests rc=$? at $(el)s: $(tail -1 "$RES/gpu_tests.log")"
fi
left=$(( 143 - $(el) )); [ "$left" -gt 15 ] && left=15
if [ "$left" -gt 6 ]; then
  timeout "$left" python3 bench/experiments/fp828/host_probe.py --out "$RES/host_fp828.json" --rounds 3 ${FP8H28_DRY:+--dry} \
    > "$RES/host_fp828.log" 2>&1
  echo "fp828 host_probe rc=$? at $(el)s"
fi
echo "outputs main = new, main's plans off: $(grep -h bit-identical "$RES/host.log" | sed 's/.*identical: \(\w*\).*launch: \(\w*\)/\1 \2/' | tr '\n' ' ')"
grep -hE "^host D=.* (fp8_main|fp8_new|fp16_ptr|cudnn) " "$RES/host.log" | sed 's/  p90.*//'
grep -h "^gpu work" "$RES/host.log" | cut -c1-110 | head -3
grep -h "/ fp16_ptr\|kept" "$RES/n4096.log" "$RES/n4096_d128.log" 2>/dev/null | tail -10
echo "== done in $(el)s"
