set -u
T0=$(date +%s); END=$((T0 + 115))
left() { echo $(( END - $(date +%s) )); }
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,driver_version --format=csv,noheader
S=bench/experiments/tutorial_gaps/host_gpu_split.py
TUT=$MAIN/.ext/tutorials
P=a06:128:1:1:2048:128x64x3x4
CASES="$P a06:128:1:1:2048:64x64x3x4 sdpa:128:1:2048 \
 a06:128:0:1:1024:64x64x3x4 a06:128:0:0:1024:64x64x3x4 sdpa:128:0:1024 b06:64:1:1024:64x64x3x4 sdpa:64:1:1024 \
 g08:128:cublas g08:128:triton g08:128:triton-tma g08:256:cublas g08:256:triton g08:256:triton-tma \
 g08:512:cublas g08:512:triton g08:512:triton-tma g08:1024:cublas g08:1024:triton g08:1024:triton-tma"
mkdir -p $RES/warm
echo "== warm-up (compile only), both runtimes side by side"
for impl in kernelc triton; do
  timeout 32 python3 $S --impl $impl --tutorials $TUT --cases $CASES --warm-only --out $RES/warm/$impl.json \
    > $RES/warm/$impl.log 2>&1 &
done
wait; echo "warm-up done ($(left)s left)"
i=0
for impl in kernelc triton triton kernelc; do
  i=$((i+1)); T=$(( $(left) / (5 - i) )); [ $T -gt 24 ] && T=24
  PROF=""; [ $i -ge 3 ] && PROF="--profile-case $P"
  [ $T -gt 8 ] && timeout $T python3 $S --impl $impl --tutorials $TUT --cases $CASES --repeats 2 \
    --budget-s $((T - 5)) $PROF --tag p$i --out $RES/p$i.$impl.json > $RES/p$i.$impl.log 2>&1
  echo "$impl #$i rc=$? ($(left)s left)"
done
echo "== summary (Triton's time / kernelc's: above 1 = kernelc faster)"
python3 bench/experiments/tutorial_gaps/host_gpu_summary.py $RES --json $RES/summary.json
grep -h "a call under cProfile" $RES/*.prof.txt
python3 -c "
import json,glob
for f in sorted(glob.glob('$RES/warm/*.json')): d=json.load(open(f)); print(f.split('/')[-1], {k: (round(v,2) if isinstance(v,float) else v) for k,v in d['setup'].items()})
" | cut -c1-900
echo "== done in $(( $(date +%s) - T0 ))s"
