#!/bin/bash
# att21 round 1 (run from the archive's root, PYTHONPATH set, $RES the results folder): the attention kernels under
# kprof's instruction sampling and plain timing, and kprof-analyze on both profiles. <= 100 s.
# PCS_MODE (optional): kprof's mode for step 2 (default pcsampling; e.g. pcsampling:period=15:hw_mb=256).
# PARGS (optional): more arguments for profile_attention.py in steps 2 and 3 (e.g. "--seq 16384 --only fwd fp8 bwd bwd64").
set -u
T0=$(date +%s); END=$((T0 + 96))
left() { echo $(( END - $(date +%s) )); }
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,driver_version --format=csv,noheader
P=bench/experiments/att21/profile_attention.py
echo "== 1: compile in parallel (one process a group, one launch each)"
for g in fwd fp8 "bwd bwd64" "ds dq128"; do
  timeout 40 python3 $P --iters 1 ${PARGS:-} --only $g > $RES/warm_${g// /_}.log 2>&1 &
done
wait
tail -n 3 $RES/warm_*.log
echo "== 2: instruction sampling, $(left)s left"
T=$(( $(left) - 35 )); [ $T -gt 30 ] && T=30
timeout $T python3 -m kprof -m ${PCS_MODE:-pcsampling} -o $RES -n attn_pcs $P --iters 2 ${PARGS:-} > $RES/pcs.log 2>&1; echo "rc $?"
echo "== 3: timing only, $(left)s left"
T=$(( $(left) - 22 )); [ $T -gt 12 ] && T=12
timeout $T python3 -m kprof -o $RES -n attn_time $P --iters 3 ${PARGS:-} > $RES/time.log 2>&1; echo "rc $?"
echo "== 4: kprof-analyze, $(left)s left"
T=$(( $(left) - 3 )); [ $T -gt 30 ] && T=30
for n in attn_pcs attn_time; do
  [ -f $RES/$n.hatchet ] || continue
  timeout $T python3 -m analyzer $RES/$n.hatchet --top 0 --no-check --no-color --lines 10 --bundle-artifacts \
    -o $RES/$n.analyze.txt > $RES/$n.analyze.log 2>&1 &
  timeout $T python3 -m analyzer $RES/$n.hatchet --top 0 --no-check --json -o $RES/$n.analyze.json \
    > $RES/$n.analyze_json.log 2>&1 &
done
wait
echo "== summary"
for n in attn_pcs attn_time; do
  echo "-- $n"; grep -h '^\[\|^    launch\|^    build\|^      \(ERROR\|WARNING\|INFO\)\|diagnostics:' $RES/$n.analyze.txt 2>/dev/null | cut -c1-220 | head -80
done
du -sh $RES; echo "== done in $(( $(date +%s) - T0 ))s"
