#!/bin/bash
# Session 24, call R1 (helper t06s24, issue #20, limit 180 s): the S24 suite's low points re-measured, processes
# kernelc, Triton, Triton, kernelc after a parallel compile-only warm-up, every case visited round-robin (up to 3
# repeats a process, each process under a time budget): 03 fp8 at 256^3 (the tutorial's autotuner tuning in each
# process, and each runtime's S24 pick held), 03's cuBLAS fp16 control at 256, then every config of 03's list at the
# fp8 point (GPU time beside each autotuner's ranking); 05's backward at 15872 and 6144 with its torch control; 08's
# small table at 128 at the pick both runtimes took in S24, with its cuBLAS control. host_gpu_summary.py: medians,
# the range over process pairings and a verdict.
set -u
T0=$(date +%s)
LIMIT=${LIMIT:-172}
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,driver_version --format=csv,noheader
git log -1 --format=%H 2>/dev/null
TUT=.ext/tutorials; [ -d $TUT ] || TUT=${MAIN:-.}/.ext/tutorials
S=bench/experiments/tutorial_gaps/host_gpu_split.py
D=$OUT/host_gpu_split_s24_R1_h200; mkdir -p $D
export KERNELC_AUTOTUNE_DISK_CACHE=0  # every kernelc process tunes 03 itself, as Triton's does (no cache_results)
P03K="BLOCK_SIZE_M=128/BLOCK_SIZE_N=32/BLOCK_SIZE_K=32/GROUP_SIZE_M=8/w=4/s=4"   # kernelc's S24 pick
P03T="BLOCK_SIZE_M=64/BLOCK_SIZE_N=128/BLOCK_SIZE_K=64/GROUP_SIZE_M=8/w=4/s=4"   # Triton's S24 pick
P08="BLOCK_SIZE_M=128/BLOCK_SIZE_N=128/BLOCK_SIZE_K=64/NUM_SM=132/w=4/s=3"      # both runtimes' S24 pick
CASES="m03:256:fp8:tuned m03:256:fp8:$P03K m03:256:fp8:$P03T m03:256:fp16:cublas l05:15872:triton l05:15872:torch
 l05:6144:triton l05:6144:torch g08:128:triton:$P08 g08:128:cublas"
el() { echo $(( $(date +%s) - T0 )); }
# compile-only warm-up of both runtimes at once (03's tuned case compiles all 16 configs; nothing here is timed)
for impl in kernelc triton; do
  timeout 60 python3 $S --impl $impl --tutorials $TUT --cases $CASES --warm-only --out $D/warm.$impl.json \
    > $D/warm.$impl.log 2>&1 &
done
wait
echo "warm done at $(el) s"
n=0
for impl in kernelc triton triton kernelc; do
  n=$((n + 1))
  left=$(( LIMIT - 8 - $(el) ))
  budget=$(( left / (5 - n) - 12 ))   # a process's visits start within its budget; ~12 s for its import, sweep, exit
  [ $budget -lt 5 ] && { echo "p$n $impl skipped: $left s left"; continue; }
  timeout $(( budget + 25 )) python3 $S --impl $impl --tutorials $TUT --cases $CASES --repeats 3 --budget-s $budget \
    --no-gc-off --sweep m03:256:fp8 --tag p$n --out $D/p$n.$impl.json > $D/p$n.$impl.log 2>&1
  echo "p$n $impl rc=$? budget $budget s, at $(el) s"
done
python3 bench/experiments/tutorial_gaps/host_gpu_summary.py $D --json $D/summary.json > $D/summary.txt 2>&1
grep -E "range|sweep|picks" $D/summary.txt | cut -c1-200 | head -22
grep -h "Error\|error" $D/*.log | head -3
echo "== done in $(el) s"
