#!/bin/bash
# t06s23 R2: KERNELC_GC_AFTER_TUNING (a full collection at the end of each autotuning run) against its absence, with
# Triton beside: processes kc(off), Triton, kc(on), kc(on), Triton, kc(off), each tuning 06's d64 causal fp16 and fp8
# forward at 2048 on its first call (the tutorial's own autotuner) and timing it as the tutorial does, then the host
# time a call, GPU time, the collector's runs in the first call and in each do_bench, and one full collection's cost.
# SDPA is 06's control. <= 120 s.
set -u
T0=$(date +%s); END=$((T0 + 116))
left() { echo $(( END - $(date +%s) )); }
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,driver_version --format=csv,noheader
RES=$OUT/gc_after_tuning_s23_R2_h200; mkdir -p $RES/warm $RES/off $RES/on
S=bench/experiments/tutorial_gaps/host_gpu_split.py
TUT=.ext/tutorials; [ -d $TUT ] || TUT=${MAIN:-.}/.ext/tutorials
A16=a06:64:1:0:2048:tuned; A8=a06:64:1:1:2048:tuned
CASES="$A16 $A8 sdpa:64:1:2048"
for impl in kernelc triton; do
  timeout 45 python3 $S --impl $impl --tutorials $TUT --cases $CASES --warm-only --out $RES/warm/$impl.json \
    > $RES/warm/$impl.log 2>&1 &
done
wait; echo "warm-up done ($(left)s left)"
i=0
for p in kernelc:0 triton:- kernelc:1 kernelc:1 triton:- kernelc:0; do
  i=$((i+1)); impl=${p%%:*}; knob=${p#*:}; T=$(( $(left) / (7 - i) )); [ $T -gt 16 ] && T=16
  dir=$RES/$([ "$knob" = 1 ] && echo on || echo off)
  [ $T -gt 8 ] && KERNELC_GC_AFTER_TUNING=${knob/-/0} timeout $T python3 $S --impl $impl --tutorials $TUT \
    --cases $CASES --repeats 2 --budget-s $((T - 5)) --tag p$i --out $dir/p$i.$impl.json > $dir/p$i.$impl.log 2>&1
  echo "$impl knob=$knob #$i rc=$? ($(left)s left)"
done
cp $RES/off/p*.triton.json $RES/on/ 2>/dev/null
for k in off on; do
  echo "== KERNELC_GC_AFTER_TUNING $k (Triton's processes in both): Triton / kernelc"
  python3 bench/experiments/tutorial_gaps/host_gpu_summary.py $RES/$k --json $RES/$k/summary.json > $RES/$k/summary.txt 2>&1
  grep -E "^a06|^sdpa" $RES/$k/summary.txt | cut -c1-130
  grep -E "json: full|first call a06|first visit a06" $RES/$k/summary.txt | cut -c1-110 > $RES/$k/gc.txt
  grep -c "'2'" $RES/$k/gc.txt | sed 's/^/lines with a full collection: /'
done
echo "== done in $(( $(date +%s) - T0 ))s"
