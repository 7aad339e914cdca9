#!/bin/bash
# t06s22 R3: R2's illegal instructions (kernelc processes, 08's TMA case at 512 in the second repeat) were the harness's
# use-after-free (08's cases freed A/B/C; fixed): the same cases again with the fix, and 06's forward host time
# (kernelc above Triton in R2's noisy processes) with cProfile under both runtimes; first tutorial 02 at 256 under both
# runtimes through the suite's runner, which now logs the garbage collector's runs inside each do_bench. <= 120 s.
set -u
T0=$(date +%s); END=$((T0 + 115))
left() { echo $(( END - $(date +%s) )); }
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,driver_version --format=csv,noheader
RES=$OUT/host_gpu_split_s22_R3_h200; mkdir -p $RES/warm
S=bench/experiments/tutorial_gaps/host_gpu_split.py
TUT=.ext/tutorials; [ -d $TUT ] || TUT=${MAIN:-.}/.ext/tutorials
CASES="g08:1024:triton-tma g08:512:triton-tma a06:64:1:1:2048:64x64x3x4 sdpa:64:1:2048 s02:256:triton"
echo "== tutorial 02 at 256 columns, one run per runtime (bench/triton_tutorials.py)"
timeout 30 python3 bench/triton_tutorials.py --only 02 --points 02=x:256 --repeats 1 --fresh --tutorials $TUT \
  --out $RES/t02.json > $RES/t02.log 2>&1; echo "t02 rc=$? ($(left)s left)"
python3 -c "
import json; d=json.load(open('$RES/t02.json'))['tutorials']['02-fused-softmax']
for impl in ('triton','kernelc'):
    g=(d[impl].get('gc') or [None])[0] or {}; print(impl, 'gc', g.get('runs'), 'max', g.get('max_s'), 'in do_bench', g.get('in_do_bench'))
for t in d['tables']:
    for c,v in t['columns'].items(): print(c, [round(r,3) for r in v['ratio']], v.get('triton'), v.get('kernelc'))
" 2>&1 | cut -c1-300
echo "== warm-up (compile only), both runtimes side by side"
for impl in kernelc triton; do
  timeout 30 python3 $S --impl $impl --tutorials $TUT --cases $CASES --warm-only --out $RES/warm/$impl.json \
    > $RES/warm/$impl.log 2>&1 &
done
wait; echo "warm-up done ($(left)s left)"
i=0
for impl in kernelc triton triton kernelc; do
  i=$((i+1)); T=$(( $(left) / (5 - i) )); [ $T -gt 18 ] && T=18
  PROF=""; [ $i -ge 3 ] && PROF="--profile-case a06:64:1:1:2048:64x64x3x4"
  [ $T -gt 8 ] && timeout $T python3 $S --impl $impl --tutorials $TUT --cases $CASES --repeats 3 \
    --budget-s $((T - 5)) $PROF --tag p$i --out $RES/p$i.$impl.json > $RES/p$i.$impl.log 2>&1
  echo "$impl #$i rc=$? ($(left)s left)"
done
python3 -c "
import json,glob
for f in sorted(glob.glob('$RES/p*.json')):
    d=json.load(open(f)); errs=[r['case']+': '+r['error'][:60] for r in d['rows'] if 'error' in r]
    print(f.split('/')[-1], 'rows', len(d['rows']), 'errors', len(errs), errs[:2])
"
grep -h "a call under cProfile" $RES/*.prof*.txt
echo "== summary (Triton's time / kernelc's: above 1 = kernelc faster)"
python3 bench/experiments/tutorial_gaps/host_gpu_summary.py $RES --json $RES/summary.json | grep -v "^  " | cut -c1-160
echo "== done in $(( $(date +%s) - T0 ))s"
