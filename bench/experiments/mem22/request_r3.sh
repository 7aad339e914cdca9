#!/bin/bash
# mem22 R3 (issue #21, the last; limit 120 s). (0) GPU test of the lds form and the new default multi_lds;
# (1) softmax bwd / log_softmax bwd / softmax fwd: this tree's default (multi_lds: lds for softmax bwd only) against
# the previous default multi, two processes; (2) matmul_tma bf16 4096^3 in one process, three trees: 766f1cd (old),
# this tree (new) and this tree with TMA copies driven from tid 0 as before adf0175f (tid0), two processes.
set -u
T0=$(date +%s); END=$((T0 + 116))
left() { echo $(( END - $(date +%s) )); }
RES=${OUT:-/tmp/mem22_out}; mkdir -p $RES
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu,driver_version --format=csv,noheader | tee $RES/gpu.txt
echo "== (0) tests/gpu/test_gpu_reduce_lds.py"
timeout 14 python3 -m pytest -q -p no:cacheprovider tests/gpu/test_gpu_reduce_lds.py > $RES/gpu_test_reduce_lds.log 2>&1; echo "rc=$?"
tail -2 $RES/gpu_test_reduce_lds.log | cut -c1-300
V=bench/experiments/mem21/variants.py
for P in 1 2; do
  S=$(( $(left) - 70 )); [ $S -gt 15 ] && S=15
  if [ $S -lt 8 ]; then echo "variants process $P skipped ($(left)s left)"; continue; fi
  timeout $S python3 $V "softmax bwd" "log_softmax bwd" "softmax fwd" --rounds 5 --col multi=own@KERNELC_REDUCE_XWARP=multi \
    --out $RES/xw_p$P.json > $RES/xw_p$P.log 2>&1; echo "variants process $P rc=$? (limit ${S}s)"
done
python3 bench/experiments/mem22/summarize.py $RES 2>&1 | grep "xw_" | grep -v "control\]" | cut -c1-125
TGZ=.ext/br_old/pre21.tgz; [ -f $TGZ ] || TGZ=${MAIN:-.}/.ext/br_old/pre21.tgz; [ -f $TGZ ] || TGZ=${MAIN:-.}/.ext/br/pre21.tgz
A=/tmp/pre21_m22; mkdir -p $A && tar xzf $TGZ -C $A && echo "766f1cd tree from $TGZ"
python3 bench/experiments/mem22/tree_elect_tid0.py $PWD /tmp/tid0_m22 || exit 1
AB=bench/experiments/mem22/ab_one_process.py
for P in 1 2; do
  if [ $P = 1 ]; then X="--auto --rounds 50"; CAP=48; else X="--rounds 80"; CAP=24; fi
  S=$(( $(left) - 1 - (2 - P) * 20 )); [ $S -gt $CAP ] && S=$CAP
  if [ $S -lt 12 ]; then echo "ab process $P skipped ($(left)s left)"; continue; fi
  timeout $S python3 $AB --old $A --new $PWD --tree tid0=/tmp/tid0_m22 --pin 128x128x4x3 $X --cache /tmp/kc_m22r3_p$P \
    --out $RES/ab3_p$P.json > $RES/ab3_p$P.log 2>&1; echo "ab process $P rc=$? (limit ${S}s)"
  grep -A1 "^set" $RES/ab3_p$P.log | cut -c1-300
done
echo "== done in $(( $(date +%s) - T0 ))s"
