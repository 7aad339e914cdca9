#!/bin/bash
# mc29 R1 (issue 27): the L2 -> SM ceiling the fp8 forward's K/V stream meets, and a first run of the multicast
# clusters. Limit 150 s (own guard 145 s). Run in the repository root with PYTHONPATH set.
# 1. probe.py: K and V^T of every head streamed by the default's grid (256 x 128 programs at N 16384) through plain
#    loads (ldg_*: nothing but the bytes) and through the TMA ring with the forward's two dots but no softmax (dots_*),
#    64- and 128-row programs, and the fp8 default itself, interleaved round by round in one process.
# 2. (own process, after 1: a hang cannot cost 1) the same with num_ctas=2 clusters whose K/V copies are multicast
#    (fp8_mc*, dots_*_mc) against their single-program builds, outputs compared bit for bit.
set -u
T0=$(date +%s)
RES=${OUT:-/tmp/mc29_out}/mc29_r1
mkdir -p "$RES"
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,clocks.mem,driver_version,power.limit --format=csv,noheader \
  > "$RES/env.txt" 2>&1
timeout 75 python3 bench/experiments/mc29/probe.py --out "$RES/ceiling.jsonl" --seq 16384 --reps 12 --calls 3 \
  --budget-s 55 --only fp8_default,ldg_64rows_bn128_w4,ldg_64rows_bn64_w4,ldg_128rows_bn128_w4,dots_64x128_w4_s2,dots_128x64_w8_s3,dots_128x128_w8_s2 \
  ${MC29_DRY:+--dry} > "$RES/ceiling.log" 2>&1
echo "ceiling rc=$? at $(( $(date +%s) - T0 ))s"
left=$(( 140 - ($(date +%s) - T0) ))
[ "$left" -gt 65 ] && left=65
if [ "$left" -gt 15 ]; then
  timeout "$left" python3 bench/experiments/mc29/probe.py --out "$RES/multicast.jsonl" --seq 16384 --reps 12 \
    --calls 3 --budget-s $(( left - 25 )) --only fp8_default,fp8_mc,fp8_mc_empty,fp8_top,fp8_mc_top,dots_64x128_w4_s2,dots_64x128_w4_s2_mc \
    ${MC29_DRY:+--dry} > "$RES/multicast.log" 2>&1
  echo "multicast rc=$? at $(( $(date +%s) - T0 ))s"
fi
grep -h "==\|FAILED\|budget\|Error\|check" "$RES/ceiling.log" "$RES/multicast.log" 2>/dev/null | tail -22
echo "== done in $(( $(date +%s) - T0 ))s"
