set -u
T0=$(date +%s); END=$((T0 + 45))
left() { echo $(( END - $(date +%s) )); }
S=bench/experiments/tutorial_gaps/host_gpu_split.py
TUT=$MAIN/.ext/tutorials
CASES="a06:64:1:1:2048:64x64x3x4 a06:128:1:1:2048:128x64x3x4 a06:128:1:1:2048:64x64x3x4"
declare -A ENVS=( [kc]="" [kc-sb0]="KERNELC_FP8_SELF_BOUND=0" )
mkdir -p $RES/warm
run() { local tag=$1 impl=$2 t=$3; shift 3
  env ${ENVS[$tag]:-} KERNELC_CACHE_DIR=/tmp/kc4_$tag TRITON_CACHE_DIR=/tmp/tr4 \
    timeout $t python3 $S --impl $impl --tutorials $TUT --cases $CASES --tag $tag "$@"; }
for tag in triton kc kc-sb0; do impl=kernelc; [ $tag = triton ] && impl=triton
  run $tag $impl 20 --warm-only --out $RES/warm/$tag.json > $RES/warm/$tag.log 2>&1 & done
wait; echo "warm-up done ($(left)s left)"
i=0
for tag in kc triton kc-sb0 kc; do i=$((i+1)); impl=kernelc; [ $tag = triton ] && impl=triton
  T=$(( $(left) / (5 - i) )); [ $T -gt 9 ] && T=9
  [ $T -gt 5 ] && run $tag $impl $T --repeats 3 --calls 30 --budget-s $((T - 2)) --out $RES/p$i.$tag.json \
    > $RES/p$i.$tag.log 2>&1
  echo "$tag #$i rc=$? ($(left)s left)"; done
python3 bench/experiments/tutorial_gaps/variant_summary.py $RES --json $RES/summary.json
echo "== done in $(( $(date +%s) - T0 ))s"
