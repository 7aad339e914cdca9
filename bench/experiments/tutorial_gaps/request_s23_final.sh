#!/bin/bash
# t06s23 final request (merged main, <= 120 s): tutorial 09's own benchmark loop and profile (Proton under Triton, kprof
# under kernelc) in alternated processes kernelc, Triton, Triton, kernelc, each autotuner held to its runtime's pick
# of call R1b (t09_profile_ab.py): the rows cuBLAS (control), tma_persistent, descriptor_persistent and _ws, with the
# tutorial's 10000 profiled launches a row after 4000 unprofiled ones (the tutorial: 10000). Decides whether R1b's one-run
# readings of tma_persistent 0.879, descriptor_persistent 0.930 and _ws 0.916 repeat in the tutorial's own measurement
# (call R2 timed these kernels level back to back and flushed: 0.997-1.047).
set -u
T0=$(date +%s); END=$((T0 + 114))
left() { echo $(( END - $(date +%s) )); }
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,driver_version --format=csv,noheader
git log -1 --format=%H 2>/dev/null
TUT=.ext/tutorials; [ -d $TUT ] || TUT=${MAIN:-.}/.ext/tutorials
R=$OUT/t09_profile_ab_s23_final_h200; mkdir -p $R/warm
P=bench/experiments/tutorial_gaps/t09_profile_ab.py
for impl in kernelc triton; do
  timeout 45 python3 $P --impl $impl --tutorials $TUT --warm-only \
    --rows cublas,tma_persistent,descriptor_persistent,descriptor_persistent_ws --out $R/warm/$impl.json > $R/warm/$impl.log 2>&1 &
done
wait; echo "warm-up done ($(left)s left)"; tail -n 2 $R/warm/*.log | cut -c1-150
i=0
for impl in kernelc triton triton kernelc; do
  i=$((i+1)); T=$(( $(left) / (5 - i) )); [ $T -gt 24 ] && T=24
  [ $T -gt 8 ] && timeout $T python3 $P --impl $impl --tutorials $TUT --reps 10000 --warmup-reps 4000 \
    --rows cublas,tma_persistent,descriptor_persistent,descriptor_persistent_ws \
    --out $R/p$i.$impl.json > $R/p$i.$impl.log 2>&1
  echo "$impl #$i rc=$? ($(left)s left)"; tail -1 $R/p$i.$impl.log | cut -c1-120
done
python3 $P --summary $(ls $R/p*.json 2>/dev/null) | tee $R/summary.txt | cut -c1-170
echo "== done in $(( $(date +%s) - T0 ))s"
