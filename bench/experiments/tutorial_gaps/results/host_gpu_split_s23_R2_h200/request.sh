#!/bin/bash
# t06s23 R2 (the last round, <= 210 s). Part A: 06's d64 causal forward at 2048 (fp16, fp8; 64x64 s3 w4, what both
# autotuners took in R1) and SDPA: host time a call, do_bench as the tutorial reads it, GPU time, under both runtimes in
# processes kc, Triton, Triton, kc, on this branch's cut launch path (R1: kernelc 232-252 us a call, Triton 265-268,
# both above the ~240 us of GPU work a do_bench sample holds); cProfile of the fp16 call in both. Part B: tutorial 09's
# TMA and descriptor kernels at the autotuners' picks, back to back as its benchmark loop runs them (no L2 flush) and
# L2-flushed (the autotuner's view), kc, Triton, Triton, kc (t09_b2b.py): R1's profile read tma_persistent at 0.879
# where both autotuners had timed that config level.
set -u
T0=$(date +%s); END=$((T0 + 204))
left() { echo $(( END - $(date +%s) )); }
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,driver_version --format=csv,noheader
TUT=.ext/tutorials; [ -d $TUT ] || TUT=${MAIN:-.}/.ext/tutorials
RA=$OUT/host06_s23_R2_h200; RB=$OUT/t09_b2b_s23_R2_h200; mkdir -p $RA/warm $RB/warm
S=bench/experiments/tutorial_gaps/host_gpu_split.py; B=bench/experiments/tutorial_gaps/t09_b2b.py
A16=a06:64:1:0:2048:64x64x3x4; A8=a06:64:1:1:2048:64x64x3x4
CA="$A16 $A8 sdpa:64:1:2048"
CB="tma_persistent:256:4:8:1 descriptor_persistent:256:3:8:0 descriptor_persistent:256:4:8:1 descriptor_persistent_ws:256:3:4:0 tma:128:3:4:0 tma:128:2:4:0 persistent:256:3:8:0 cublas:0:0:0:0"
echo "== warm-up: both parts, both runtimes, at once"
for impl in kernelc triton; do
  timeout 40 python3 $S --impl $impl --tutorials $TUT --cases $CA --warm-only --out $RA/warm/$impl.json > $RA/warm/$impl.log 2>&1 &
  set -- $CB  # two compile processes a runtime for part B (8 configs)
  timeout 50 python3 $B --impl $impl --tutorials $TUT --cases $1 $2 $3 $4 --warm-only --out $RB/warm/${impl}1.json \
    > $RB/warm/${impl}1.log 2>&1 &
  timeout 50 python3 $B --impl $impl --tutorials $TUT --cases $5 $6 $7 $8 --warm-only --out $RB/warm/${impl}2.json \
    > $RB/warm/${impl}2.log 2>&1 &
done
wait; echo "warm-up done ($(left)s left)"
grep -h '"ok": false\|error' $RB/warm/*.log | cut -c1-150 | head -3
i=0
for impl in kernelc triton triton kernelc; do
  i=$((i+1)); T=$(( ($(left) - 60) / (5 - i) )); [ $T -gt 16 ] && T=16
  PROF=""; [ $i -ge 3 ] && PROF="--profile-case $A16"
  [ $T -gt 7 ] && timeout $T python3 $S --impl $impl --tutorials $TUT --cases $CA --repeats 3 --budget-s $((T - 5)) \
    $PROF --tag p$i --out $RA/p$i.$impl.json > $RA/p$i.$impl.log 2>&1
  echo "A $impl #$i rc=$? ($(left)s left)"
done
i=0
for impl in kernelc triton triton kernelc; do
  i=$((i+1)); T=$(( $(left) / (5 - i) )); [ $T -gt 18 ] && T=18
  [ $T -gt 7 ] && timeout $T python3 $B --impl $impl --tutorials $TUT --cases $CB --repeats 2 --budget-s $((T - 4)) \
    --out $RB/p$i.$impl.json > $RB/p$i.$impl.log 2>&1
  echo "B $impl #$i rc=$? ($(left)s left)"
done
python3 bench/experiments/tutorial_gaps/host_gpu_summary.py $RA --json $RA/summary.json > $RA/summary.txt 2>&1
grep -E "^a06|^sdpa" $RA/summary.txt | cut -c1-140
grep -h "a call under cProfile" $RA/*.prof*.txt
python3 $B --summary $(ls $RB/p*.json 2>/dev/null) | tee $RB/summary.txt | cut -c1-170
echo "== done in $(( $(date +%s) - T0 ))s"
