#!/bin/bash
# mem23 R1 (issue #21; limit 150 s). (1) matmul_tma bf16 4096^3 pinned 128x128 w4 s3, ONE process, four trees
# interleaved (each loaded twice for its A/A): 766f1cd (old), this tree (new: elect.sync per copy), tid0 (tid == 32w,
# as before adf0175f), hoist (warp 0's elect.sync once at kernel entry); two processes. (2) KERNELC_REDUCE_SCRATCH=apart
# (each block reduction its own scratch: one barrier fewer) against the default and Triton, the four rows it changes
# (mem21/variants.py), two processes. (3) Liger-Kernel's tests under kernelc (softmax, layer_norm, rms_norm,
# cross_entropy, swiglu, geglu, rope; the multi_lds default) in the time left.
set -u
T0=$(date +%s); END=$((T0 + 146))
left() { echo $(( END - $(date +%s) )); }
RES=${OUT:-/tmp/mem23_out}; mkdir -p $RES
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu,driver_version --format=csv,noheader | tee $RES/gpu.txt
git log -1 --format=%H 2>/dev/null | tee $RES/commit.txt
TGZ=.ext/br_old/pre21.tgz; [ -f $TGZ ] || TGZ=${MAIN:-.}/.ext/br_old/pre21.tgz
A=/tmp/pre21_m23; rm -rf $A; mkdir -p $A && tar xzf $TGZ -C $A && echo "766f1cd tree from $TGZ"
V=bench/experiments/mem23/tree_elect_variant.py
python3 $V tid0 $PWD /tmp/m23_tid0 && python3 $V hoist $PWD /tmp/m23_hoist || exit 1
AB=bench/experiments/mem22/ab_one_process.py
for P in 1 2; do
  S=$(( $(left) - 98 - (2 - P) * 20 )); [ $S -gt 26 ] && S=26
  if [ $S -lt 12 ]; then echo "ab process $P skipped ($(left)s left)"; continue; fi
  timeout $S python3 $AB --old $A --new $PWD --tree tid0=/tmp/m23_tid0 --tree hoist=/tmp/m23_hoist --pin 128x128x4x3 \
    --rounds 100 --cache /tmp/kc_m23r1 --out $RES/ab_p$P.json > $RES/ab_p$P.log 2>&1; echo "ab process $P rc=$? (limit ${S}s)"
  grep -A2 "^set" $RES/ab_p$P.log | cut -c1-300
done
python3 bench/experiments/mem23/ab_summary.py $RES/ab_p*.json 2>&1 | tail -8
for P in 1 2; do
  S=$(( $(left) - 48 - (2 - P) * 18 )); [ $S -gt 18 ] && S=18
  if [ $S -lt 9 ]; then echo "apart process $P skipped ($(left)s left)"; continue; fi
  timeout $S python3 bench/experiments/mem21/variants.py "softmax fwd" "log_softmax fwd" "cross_entropy" "layer_norm bwd" \
    --rounds 4 --col apart=own@KERNELC_REDUCE_SCRATCH=apart --out $RES/apart_p$P.json > $RES/apart_p$P.log 2>&1
  echo "apart process $P rc=$? (limit ${S}s)"
  grep -E "^\s+kernelc|^\s+triton|^(softmax|log_softmax|cross|layer)" $RES/apart_p$P.log | cut -c1-110
done
L=$PWD/.ext/liger; [ -d $L ] || L=${MAIN:-.}/.ext/liger
S=$(( $(left) - 1 ))
echo "== Liger tests under kernelc (limit ${S}s)"
( cd $L && PYTHONPATH="$L/src:${PYTHONPATH:-}" timeout $S python3 -m pytest -p kernelc.compat.pytest_plugin -n 12 -v \
    -p no:cacheprovider -rfE -k "not dtensor" test/transformers/test_softmax.py test/transformers/test_layer_norm.py \
    test/transformers/test_rms_norm.py test/transformers/test_cross_entropy.py test/transformers/test_swiglu.py \
    test/transformers/test_geglu.py test/transformers/test_rope.py > $RES/liger_tests.log 2>&1; echo "liger rc=$?" )
for f in softmax layer_norm rms_norm cross_entropy swiglu geglu rope; do
  echo "liger $f: passed $(grep "test_$f.py" $RES/liger_tests.log | grep -c " PASSED") failed $(grep "test_$f.py" $RES/liger_tests.log | grep -c " FAILED\| ERROR")"
done
grep -E "^(FAILED|ERROR)" $RES/liger_tests.log | head -5 | cut -c1-200; tail -1 $RES/liger_tests.log | cut -c1-200
echo "== done in $(( $(date +%s) - T0 ))s"
