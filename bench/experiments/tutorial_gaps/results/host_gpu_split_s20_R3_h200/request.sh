set -u
T0=$(date +%s); END=$((T0 + 38))
left() { echo $(( END - $(date +%s) )); }
S=bench/experiments/tutorial_gaps/host_gpu_split.py
i=0
for impl in kernelc triton triton kernelc; do
  i=$((i+1)); T=$(( $(left) - 1 )); [ $T -gt 9 ] && T=9
  [ $T -gt 4 ] && timeout $T python3 $S --impl $impl --tutorials $MAIN/.ext/tutorials --cases v01:4096:triton \
    v01:4096:torch --repeats 3 --tag p$i --out $RES/p$i.$impl.json > $RES/p$i.$impl.log 2>&1
  echo "$impl #$i rc=$? ($(left)s left)"
done
python3 bench/experiments/tutorial_gaps/host_gpu_summary.py $RES --json $RES/summary.json
echo "== done in $(( $(date +%s) - T0 ))s"
