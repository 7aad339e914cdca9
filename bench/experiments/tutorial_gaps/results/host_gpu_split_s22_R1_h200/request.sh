#!/bin/bash
# t06s22 R1: host or GPU at the four launch-bound points of the S21 suite (02 at 256, 08 TMA at 1024, 01 at 4096,
# 06 fp8 d64 causal 2048): do_bench's samples (mean vs median, slow samples, GC runs, a GC-off reading), GPU time
# behind a sleep, host time a call; processes kernelc, Triton, Triton, kernelc. First 02's kernel at 256/512 columns
# at the tutorial's grid and at the grid capped to 8 programs an SM (softmax_grid.py). <= 140 s.
set -u
T0=$(date +%s); END=$((T0 + 134))
left() { echo $(( END - $(date +%s) )); }
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,driver_version --format=csv,noheader
git log -1 --format=%H 2>/dev/null
RES=$OUT/host_gpu_split_s22_R1_h200; mkdir -p $RES/warm
S=bench/experiments/tutorial_gaps/host_gpu_split.py
TUT=.ext/tutorials; [ -d $TUT ] || TUT=${MAIN:-.}/.ext/tutorials
ls $TUT | tr '\n' ' '; echo
sha256sum $TUT/0[1268]-*.py | cut -c1-16
CASES="s02:256:triton s02:256:naive_softmax s02:256:torch v01:4096:triton v01:4096:torch \
 g08:1024:triton-tma g08:1024:cublas g08:512:triton-tma a06:64:1:1:2048:64x64x3x4 sdpa:64:1:2048"
echo "== 02's grid: n_regs, the tutorial's grid and the capped grid (GB/s), triton / kernelc / kernelc no prefetch"
timeout 32 python3 bench/experiments/tutorial_gaps/softmax_grid.py --tutorials $TUT --rounds 1 --widths 256,512 \
  > $RES/softmax_grid.log 2>&1; echo "softmax_grid rc=$? ($(left)s left)"; tail -3 $RES/softmax_grid.log
echo "== warm-up (compile only), both runtimes side by side"
for impl in kernelc triton; do
  timeout 38 python3 $S --impl $impl --tutorials $TUT --cases $CASES --warm-only --out $RES/warm/$impl.json \
    > $RES/warm/$impl.log 2>&1 &
done
wait; echo "warm-up done ($(left)s left)"
i=0
for impl in kernelc triton triton kernelc; do
  i=$((i+1)); T=$(( $(left) / (5 - i) )); [ $T -gt 22 ] && T=22
  [ $T -gt 8 ] && timeout $T python3 $S --impl $impl --tutorials $TUT --cases $CASES --repeats 2 \
    --budget-s $((T - 4)) --tag p$i --out $RES/p$i.$impl.json > $RES/p$i.$impl.log 2>&1
  echo "$impl #$i rc=$? ($(left)s left)"
done
echo "== summary (Triton's time / kernelc's: above 1 = kernelc faster)"
python3 bench/experiments/tutorial_gaps/host_gpu_summary.py $RES --json $RES/summary.json
python3 -c "
import json,glob
for f in sorted(glob.glob('$RES/warm/*.json')): d=json.load(open(f)); print(f.split('/')[-1], {k: (round(v,1) if isinstance(v,float) else str(v)[:60]) for k,v in d['setup'].items()})
for f in sorted(glob.glob('$RES/p*.json')): d=json.load(open(f)); print(f.split('/')[-1], 'rows', len(d['rows']), 'gc_objects', d.get('gc_objects'), d.get('stopped',''), d.get('picks'))
" | cut -c1-700
echo "== done in $(( $(date +%s) - T0 ))s"
