#!/bin/bash
# mc29's request for the next session (issue 27: fp8 forward >= 1.3x our fp16 forward, N 16384 D=128 non-causal).
# Time limit: 150 s (own guard 140 s). The cell's fp8 default, our fp16 best (FA3 order) and cuDNN, with the default
# again (control), the copies at the top (refill_top) and the row max as a tree with them (KERNELC_REDUCE_TREE), in
# rounds whose order is drawn afresh every round (ab.py --shuffle; fwd15's fixed cyclic order biased one kernel against
# itself by 27 of 30 rounds at N 16384 in mc29's R3), two processes of 40 rounds on another call: the second and third
# calls the lead's standard for a default change wants, and the cell's ratio without the order's bias. Every output
# checked. Run in the repository root with PYTHONPATH set; results under $OUT/mc29_s30; MC29_DRY=1 runs it on CPU.
set -u
T0=$(date +%s)
RES=${OUT:-/tmp/mc29_out}/mc29_s30
mkdir -p "$RES"
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,clocks.mem,driver_version,power.limit --format=csv,noheader \
  > "$RES/env.txt" 2>&1
for k in 30 130; do
  left=$(( 138 - ($(date +%s) - T0) ))
  [ "$left" -gt 65 ] && left=65
  [ "$left" -lt 25 ] && break
  MC29_ROUND=4 timeout "$left" python3 bench/experiments/mc29/ab.py --shuffle --seed $k --out "$RES/n16384_s$k.jsonl" \
    --seq 16384 --reps 40 --budget-s 30 --points 128,0 \
    --only fp8_ptr fp8_ptr_again fp8_ptr_top fp8_tree_top fp16_fa3 cudnn ${MC29_DRY:+--dry} > "$RES/n16384_s$k.log" 2>&1
  echo "n16384 (seed $k) rc=$? at $(( $(date +%s) - T0 ))s"
done
grep -h "fp8_\|fp16_fa3\|cudnn\|error\|slept" "$RES"/n*.log 2>/dev/null | grep -v "^  percall" | tail -20
echo "== done in $(( $(date +%s) - T0 ))s"
