#!/bin/bash
# att21 round 3 (run from the archive's root, PYTHONPATH set, $RES the results folder): <= 60 s.
# 1 (decisive): the separate pass's new dQ config (128-key steps, D=128's default since R2) against the old one
#   (64-key steps) and cuDNN at N 16384, both masks, one process, interleaved.
# 2: instruction sampling of the D=128 dK/dV loop with and without the L1 prefetch of its LSE/delta rows (L1_PF):
#   whether the rows' long-scoreboard share fell (R2: no time gained).
set -u
T0=$(date +%s); END=$((T0 + 57))
left() { echo $(( END - $(date +%s) )); }
S=bench/experiments/att21/bwd_ab.py
P=bench/experiments/att21/profile_attention.py
echo "== 1: compile in parallel"
timeout 30 python3 $S --warm --seq 16384 --head-dim 128 --causal 0 --entries gen dq64 > $RES/warm0.log 2>&1 &
timeout 30 python3 $S --warm --seq 16384 --head-dim 128 --causal 1 --entries gen dq64 > $RES/warm1.log 2>&1 &
timeout 30 python3 $P --iters 1 --only bwd pf --head-dims 128 --causal 0 > $RES/warm_pf.log 2>&1 &
wait; tail -qn 1 $RES/warm*.log
echo "== 2: N 16384 D=128, $(left)s left"
T=$(( $(left) - 22 )); [ $T -gt 22 ] && T=22
timeout $T python3 $S --seq 16384 --head-dim 128 --causal 0 1 --entries cudnn gen dq64 --rounds 2 --rep-ms 250 \
  --out $RES/d128_n16384.json > $RES/d128_n16384.log 2>&1
echo "== 3: PC samples, L1_PF off/on, $(left)s left"
T=$(( $(left) - 12 )); [ $T -gt 12 ] && T=12
[ $T -gt 6 ] && timeout $T python3 -m kprof -m pcsampling -o $RES -n pf $P --iters 2 --only bwd pf --head-dims 128 \
  --causal 0 > $RES/pcs.log 2>&1
T=$(( $(left) - 1 ))
[ -f $RES/pf.hatchet ] && [ $T -gt 3 ] && timeout $T python3 -m analyzer $RES/pf.hatchet --kernel dkdv --top 0 \
  --no-check --no-color --lines 6 -o $RES/pf.analyze.txt > /dev/null 2>&1
echo "== summary"
grep -v Warning $RES/d128_n16384.log
grep -h '^\[\|^  *1[01][0-9] \|^  *81 ' $RES/pf.analyze.txt 2>/dev/null | cut -c1-150
echo "== done in $(( $(date +%s) - T0 ))s"
