# call R1 of session 21 (2026-11-29 10:35 UTC, one H200), branch t06s21 at 0e5db5b (main's compiler): the request
# as it ran (a later edit of the request file, with KERNELC_FP8_SELF_BOUND, came after the call had run)
set -u
T0=$(date +%s); END=$((T0 + 95))
left() { echo $(( END - $(date +%s) )); }
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,driver_version --format=csv,noheader
S=bench/experiments/tutorial_gaps/host_gpu_split.py
TUT=$MAIN/.ext/tutorials
C128=a06:128:1:1:2048:128x64x3x4; C64=a06:128:1:1:2048:64x64x3x4; N128=a06:128:0:1:2048:128x64x3x4
FULL="$C128 $C64 $N128"; VAR="$C128 $N128"
declare -A ENVS=( [kc]="" [kc-smem0]="KERNELC_SMEM_REUSE=0" [kc-tailoff]="KERNELC_WGMMA_ASYNC_TAIL=off"
                  [kc-exit0]="KERNELC_WGMMA_EXIT_WAIT=0" [kc-ptxas]="KERNELC_ASSEMBLER=ptxas" )
mkdir -p $RES/warm
run() {  # tag impl cases timeout extra...
  local tag=$1 impl=$2 cases=$3 t=$4; shift 4
  env ${ENVS[$tag]:-} KERNELC_CACHE_DIR=/tmp/kc_$tag TRITON_CACHE_DIR=/tmp/tr_cache \
    timeout $t python3 $S --impl $impl --tutorials $TUT --cases $cases --tag $tag "$@"
}
echo "== warm-up (compile only), all variants side by side"
run triton triton "$FULL" 40 --warm-only --out $RES/warm/triton.json > $RES/warm/triton.log 2>&1 &
run kc kernelc "$FULL" 40 --warm-only --out $RES/warm/kc.json > $RES/warm/kc.log 2>&1 &
for v in kc-smem0 kc-tailoff kc-exit0 kc-ptxas; do
  run $v kernelc "$VAR" 40 --warm-only --out $RES/warm/$v.json > $RES/warm/$v.log 2>&1 &
done
wait; echo "warm-up done ($(left)s left)"
i=0
for tag in kc triton kc-smem0 kc-tailoff kc-exit0 kc-ptxas triton kc; do
  i=$((i+1)); impl=kernelc; [ $tag = triton ] && impl=triton
  cases="$VAR"; [ $tag = kc -o $tag = triton ] && cases="$FULL"
  T=$(( $(left) / (9 - i) )); [ $T -gt 14 ] && T=14
  [ $T -gt 6 ] && run $tag $impl "$cases" $T --repeats 3 --calls 30 --budget-s $((T - 3)) \
    --out $RES/p$i.$tag.json > $RES/p$i.$tag.log 2>&1
  echo "$tag #$i rc=$? ($(left)s left)"
done
echo "== summary: GPU time (busy_ms) per variant, and over Triton's (below 1: kernelc faster)"
python3 bench/experiments/tutorial_gaps/variant_summary.py $RES --json $RES/summary.json
echo "== done in $(( $(date +%s) - T0 ))s"
