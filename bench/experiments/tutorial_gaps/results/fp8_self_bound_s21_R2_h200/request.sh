set -u
T0=$(date +%s); END=$((T0 + 85))
left() { echo $(( END - $(date +%s) )); }
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,driver_version --format=csv,noheader
echo "== step 1: fp8 cast bit-exactness on the GPU"
timeout 25 python3 -m pytest -q -x tests/gpu/test_gpu_fp8_bounds.py 2>&1 | tail -3
S=bench/experiments/tutorial_gaps/host_gpu_split.py
TUT=$MAIN/.ext/tutorials
FULL="a06:128:1:1:2048:128x64x3x4 a06:128:1:1:2048:64x64x3x4 a06:128:0:1:2048:128x64x3x4 a06:128:0:1:2048:64x64x3x4"
declare -A ENVS=( [kc]="" [kc-sb0]="KERNELC_FP8_SELF_BOUND=0" )
mkdir -p $RES/warm $RES/g08
run() {  # tag impl timeout extra...
  local tag=$1 impl=$2 t=$3; shift 3
  env ${ENVS[$tag]:-} KERNELC_CACHE_DIR=/tmp/kc_$tag TRITON_CACHE_DIR=/tmp/tr_cache \
    timeout $t python3 $S --impl $impl --tutorials $TUT --cases $FULL --tag $tag "$@"
}
echo "== warm-up (compile only), side by side ($(left)s left)"
for tag in triton kc kc-sb0; do
  impl=kernelc; [ $tag = triton ] && impl=triton
  run $tag $impl 30 --warm-only --out $RES/warm/$tag.json > $RES/warm/$tag.log 2>&1 &
done
G08="g08:128:cublas g08:128:triton g08:128:triton-tma"
for impl in kernelc triton; do  # 08: compile into the caches its step 3 reads
  KERNELC_CACHE_DIR=/tmp/kc_08 TRITON_CACHE_DIR=/tmp/tr_08 timeout 30 python3 $S --impl $impl --tutorials $TUT \
    --cases $G08 --warm-only --out $RES/warm/g08.$impl.json > $RES/warm/g08.$impl.log 2>&1 &
done
wait; echo "warm-up done ($(left)s left)"
i=0
for tag in kc triton kc-sb0 kc-sb0 triton kc; do
  i=$((i+1)); impl=kernelc; [ $tag = triton ] && impl=triton
  T=$(( $(left) / (7 - i) )); [ $T -gt 12 ] && T=12
  [ $T -gt 6 ] && run $tag $impl $T --repeats 2 --calls 30 --budget-s $((T - 3)) \
    --out $RES/p$i.$tag.json > $RES/p$i.$tag.log 2>&1
  echo "$tag #$i rc=$? ($(left)s left)"
done
for impl in kernelc triton; do
  T=$(( $(left) - 2 )); [ $impl = kernelc ] && T=$(( T / 2 )); [ $T -gt 13 ] && T=13
  [ $T -gt 9 ] && KERNELC_CACHE_DIR=/tmp/kc_08 TRITON_CACHE_DIR=/tmp/tr_08 timeout $T python3 $S --impl $impl \
    --tutorials $TUT --cases $G08 --repeats 2 --budget-s $((T - 2)) --tag g08-$impl --out $RES/g08/p.$impl.json \
    > $RES/g08.$impl.log 2>&1
  echo "08 $impl rc=$? ($(left)s left)"
done
echo "== summary: GPU time (busy_ms) per variant, and over Triton's (below 1: kernelc faster)"
python3 bench/experiments/tutorial_gaps/variant_summary.py $RES --json $RES/summary.json
[ -n "$(ls $RES/g08/*.json 2>/dev/null)" ] && python3 bench/experiments/tutorial_gaps/host_gpu_summary.py $RES/g08
echo "== done in $(( $(date +%s) - T0 ))s"
