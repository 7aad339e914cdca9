#!/bin/bash
# t06s23 R1 (second request): where 06's d64 causal forward reading goes low, host or garbage collector. Host time a
# call (perf_counter around each call, GPU held by a sleep), do_bench as the tutorial reads it (and again with the
# collector off), GPU time only (busy_ms), under both runtimes in processes kc, Triton, Triton, kc, after a compile-only
# warm-up. 06's d64 causal fp16 and fp8 at 2048 with the tutorial's own autotuner (its first call tunes, as in the
# tutorial's first table), SDPA as 06's control, 02 at 256, 01 at 4096; cProfile of both 06 calls under both runtimes;
# the collector's runs in each do_bench and the cost of one full collection per process. <= 120 s.
set -u
T0=$(date +%s); END=$((T0 + 116))
left() { echo $(( END - $(date +%s) )); }
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,driver_version --format=csv,noheader
RES=$OUT/host_gpu_split_s23_R1_h200; mkdir -p $RES/warm
S=bench/experiments/tutorial_gaps/host_gpu_split.py
TUT=.ext/tutorials; [ -d $TUT ] || TUT=${MAIN:-.}/.ext/tutorials
A16=a06:64:1:0:2048:tuned; A8=a06:64:1:1:2048:tuned
CASES="$A16 $A8 sdpa:64:1:2048 s02:256:triton v01:4096:triton"
echo "== warm-up (compile and tune once), both runtimes side by side"
for impl in kernelc triton; do
  timeout 48 python3 $S --impl $impl --tutorials $TUT --cases $CASES --warm-only --out $RES/warm/$impl.json \
    > $RES/warm/$impl.log 2>&1 &
done
wait; echo "warm-up done ($(left)s left)"
grep -h first_call_s $RES/warm/*.log | cut -c1-100 | head -4
i=0
for impl in kernelc triton triton kernelc; do
  i=$((i+1)); T=$(( $(left) / (5 - i) )); [ $T -gt 22 ] && T=22
  PROF=""; [ $i -ge 3 ] && PROF="--profile-case $A16 $A8"
  [ $T -gt 8 ] && timeout $T python3 $S --impl $impl --tutorials $TUT --cases $CASES --repeats 3 \
    --budget-s $((T - 6)) $PROF --tag p$i --out $RES/p$i.$impl.json > $RES/p$i.$impl.log 2>&1
  echo "$impl #$i rc=$? ($(left)s left)"
done
grep -h "a call under cProfile" $RES/*.prof*.txt
echo "== summary (Triton's time / kernelc's: above 1 = kernelc faster)"
python3 bench/experiments/tutorial_gaps/host_gpu_summary.py $RES --json $RES/summary.json > $RES/summary.txt 2>&1
grep -v "^  " $RES/summary.txt | cut -c1-150 | head -14
grep -E "full collection|first visit a06" $RES/summary.txt | cut -c1-150 | tail -10
echo "== done in $(( $(date +%s) - T0 ))s"
