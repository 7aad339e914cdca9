#!/bin/bash
# mem22 R3 (issue #21, the last): matmul_tma bf16 4096^3 in one process, three trees: 766f1cd (old), this tree
# (new) and this tree with TMA copies driven from tid 0 as before adf0175f (tid0: elect.sync's lane made its k-loop
# carry 54 R2UR; R2: new/old 0.991-0.992 at the same config in 3 of 3 processes). Own deadline 116 s.
set -u
T0=$(date +%s); END=$((T0 + 116))
left() { echo $(( END - $(date +%s) )); }
RES=${OUT:-/tmp/mem22_out}; mkdir -p $RES
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu,driver_version --format=csv,noheader | tee $RES/gpu.txt
TGZ=.ext/br_old/pre21.tgz; [ -f $TGZ ] || TGZ=${MAIN:-.}/.ext/br_old/pre21.tgz; [ -f $TGZ ] || TGZ=${MAIN:-.}/.ext/br/pre21.tgz
A=/tmp/pre21_m22; mkdir -p $A && tar xzf $TGZ -C $A && echo "766f1cd tree from $TGZ"
python3 bench/experiments/mem22/tree_elect_tid0.py $PWD /tmp/tid0_m22 || exit 1
AB=bench/experiments/mem22/ab_one_process.py
for P in 1 2 3; do
  if [ $P = 1 ]; then X="--auto --rounds 60"; CAP=50; else X="--rounds 80"; CAP=24; fi
  S=$(( $(left) - 1 - (3 - P) * 22 )); [ $S -gt $CAP ] && S=$CAP
  if [ $S -lt 12 ]; then echo "ab process $P skipped ($(left)s left)"; continue; fi
  timeout $S python3 $AB --old $A --new $PWD --tree tid0=/tmp/tid0_m22 --pin 128x128x4x3 $X --cache /tmp/kc_m22r3_p$P \
    --out $RES/ab3_p$P.json > $RES/ab3_p$P.log 2>&1; echo "ab process $P rc=$? (limit ${S}s)"
  grep -A1 "^set" $RES/ab3_p$P.log | cut -c1-330
done
echo "== done in $(( $(date +%s) - T0 ))s"
