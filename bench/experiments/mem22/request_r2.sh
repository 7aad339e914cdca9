#!/bin/bash
# mem22 R2 (issue #21; R1's files are not needed again). (0) GPU test of the lds/lds4 cross-warp forms and the
# softmax exp ftz; (1) softmax bwd, log_softmax bwd, softmax fwd: kernelc's shipped build against the candidate rule
# KERNELC_REDUCE_XWARP=multi_lds (lds where multi leaves allreduce; R1: softmax bwd lds 1.0073 against 1.0014-1.0016),
# three processes; (2) matmul_tma bf16 4096^3, 766f1cd against this tree in one process, the harness fixed (a GPU
# spin before each round, slots rotated: R1's first slot read 2-3% slow), three processes. Own deadline 136 s.
set -u
T0=$(date +%s); END=$((T0 + 136))
left() { echo $(( END - $(date +%s) )); }
RES=${OUT:-/tmp/mem22_out}; mkdir -p $RES
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu,driver_version --format=csv,noheader | tee $RES/gpu.txt
echo "== (0) tests/gpu/test_gpu_reduce_lds.py"
timeout 20 python3 -m pytest -q -p no:cacheprovider tests/gpu/test_gpu_reduce_lds.py > $RES/gpu_test_reduce_lds.log 2>&1; echo "rc=$?"
tail -3 $RES/gpu_test_reduce_lds.log | cut -c1-300
V=bench/experiments/mem21/variants.py
for P in 1 2 3; do
  S=$(( $(left) - 65 )); [ $S -gt 16 ] && S=16
  if [ $S -lt 8 ]; then echo "variants process $P skipped ($(left)s left)"; continue; fi
  echo "== (1) softmax bwd, log_softmax bwd, softmax fwd: process $P (limit ${S}s)"
  timeout $S python3 $V "softmax bwd" "log_softmax bwd" "softmax fwd" --rounds 5 --col ml=own@KERNELC_REDUCE_XWARP=multi_lds \
    --out $RES/xw_p$P.json > $RES/xw_p$P.log 2>&1; echo "rc=$?"
done
echo "== (2) matmul_tma bf16 4096^3, 766f1cd vs this tree in one process ($(left)s left)"
TGZ=.ext/br_old/pre21.tgz; [ -f $TGZ ] || TGZ=${MAIN:-.}/.ext/br_old/pre21.tgz; [ -f $TGZ ] || TGZ=${MAIN:-.}/.ext/br/pre21.tgz
A=/tmp/pre21_m22; mkdir -p $A && tar xzf $TGZ -C $A && echo "766f1cd tree from $TGZ"
AB=bench/experiments/mem22/ab_one_process.py
for P in 1 2 3; do
  if [ $P = 1 ]; then X="--auto --rounds 60"; CAP=34; else X="--rounds 100"; CAP=15; fi
  S=$(( $(left) - 1 - (3 - P) * 15 )); [ $S -gt $CAP ] && S=$CAP
  if [ $S -lt 9 ]; then echo "ab process $P skipped ($(left)s left)"; continue; fi
  timeout $S python3 $AB --old $A --new $PWD --pin 128x128x4x3 $X --cache /tmp/kc_m22_p$P \
    --out $RES/ab1p_p$P.json > $RES/ab1p_p$P.log 2>&1; echo "ab process $P rc=$? (limit ${S}s)"
  grep "^set" $RES/ab1p_p$P.log | cut -c1-330
done
python3 bench/experiments/mem22/summarize.py $RES 2>&1 | grep -v "control\]" | cut -c1-150 | grep "xw_" 
echo "== done in $(( $(date +%s) - T0 ))s"
