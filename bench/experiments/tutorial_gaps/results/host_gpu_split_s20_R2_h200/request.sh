set -u
T0=$(date +%s); END=$((T0 + 88))
left() { echo $(( END - $(date +%s) )); }
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,driver_version --format=csv,noheader
S=bench/experiments/tutorial_gaps/host_gpu_split.py
TUT=$MAIN/.ext/tutorials
echo "== 1: 06 first calls from empty caches"
for impl in kernelc triton; do
  C=$(mktemp -d); T=25; [ $impl = triton ] && T=40
  KERNELC_CACHE_DIR=$C/k TRITON_CACHE_DIR=$C/t timeout $T python3 $S --impl $impl --tutorials $TUT \
    --cases a06:64:1:0:1024:tuned b06:64:1:1024:tuned --warm-only \
    --profile-case b06:64:1:1024:tuned --out $RES/cold.$impl.json > $RES/cold.$impl.log 2>&1
  echo "$impl cold rc=$? ($(left)s left)"
done
echo "== 2: 01, processes k t t k"
mkdir -p $RES/t01
i=0
for impl in kernelc triton triton kernelc; do
  i=$((i+1)); T=$(( $(left) - 2 )); [ $T -gt 10 ] && T=10
  [ $T -gt 6 ] && timeout $T python3 $S --impl $impl --tutorials $TUT --cases v01:4096:triton v01:4096:torch \
    --repeats 2 --tag p$i --out $RES/t01/p$i.$impl.json > $RES/t01/p$i.$impl.log 2>&1
  echo "$impl #$i rc=$? ($(left)s left)"
done
echo "== summary"
grep -h '"first_call_s"' $RES/cold.*.log
grep -h "a call under cProfile" $RES/*.prof*.txt
python3 bench/experiments/tutorial_gaps/host_gpu_summary.py $RES/t01
echo "== done in $(( $(date +%s) - T0 ))s"
