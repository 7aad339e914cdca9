#!/bin/bash
# cr29 R6 (issue 27). Limit 150 s (own guard 140 s). R5: at N 4096 the conditional rescale with the guarded multiply
# was faster than the default in 19 of 20 rounds (+1.0%, spread 1.07) and the slack alone slower in 20 of 20 (-2.5%);
# at N 16384 non-causal the default's own repeat ranged 0.87-1.11 of its time round by round, ten times that effect,
# and the guarded slack was faster in 10 of 30. R6: N 16384 non-causal only, the fp8 default, its repeat, the guarded
# slack and our fp16 best, many more shuffled rounds in two processes, to size the effect there. CR29_DRY=1: CPU.
set -u
T0=$(date +%s)
RES=${OUT:-/tmp/cr29_out}/cr29_r6
mkdir -p "$RES"
el() { echo $(( $(date +%s) - T0 )); }
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,clocks.mem,driver_version,power.limit --format=csv,noheader \
  > "$RES/env.txt" 2>&1
for k in 41 141; do
  timeout 66 python3 bench/experiments/cr29/ab.py --shuffle --seed $k --out "$RES/n16384_s$k.jsonl" --seq 16384 \
    --reps 70 --budget-s 30 --points 128,0 --only fp8_ptr fp8_ptr_again fp8_slack8 fp16_fa3 ${CR29_DRY:+--dry} \
    > "$RES/n16384_s$k.log" 2>&1
  echo "n16384 seed $k rc=$? at $(el)s"
done
grep -h "fp8_\|fp16_fa3\|error\|slept" "$RES"/n*.log 2>/dev/null | grep -v "^  percall" | tail -16
echo "== done in $(el)s"
