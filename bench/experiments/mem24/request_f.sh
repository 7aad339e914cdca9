#!/bin/bash
# mem24 F (issue #21; limit 25 s), on merged main: the refined KERNELC_TMA_ELECT=auto's one untimed kernel, examples'
# masked pointer GEMM (matmul_masked, bf16 4096^3, 128x256x64 w8 s3: its loads become TMA copies on descriptors the
# compiler makes in the kernel, so auto now gives it elect.sync where s23's auto gave it thread 0). knob_ab.py, base =
# auto, var = tid; two processes.
set -u
T0=$(date +%s); END=$((T0 + 23))
left() { echo $(( END - $(date +%s) )); }
RES=${OUT:-/tmp/mem24_f}; mkdir -p $RES
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu,driver_version --format=csv,noheader | tee $RES/gpu.txt
for P in 1 2; do
  S=$(( $(left) - (2 - P) * 8 )); [ $S -gt 14 ] && S=14
  if [ $S -lt 4 ]; then echo "process $P skipped ($(left)s left)"; continue; fi
  timeout $S python3 bench/experiments/mem23/knob_ab.py --env KERNELC_TMA_ELECT=tid --work mm_masked --rounds 30 \
    --out $RES/masked_p$P.json > $RES/masked_p$P.log 2>&1; echo "process $P rc=$? (limit ${S}s)"
  grep -E "var/base|Error" $RES/masked_p$P.log | sed 's/ms {[^}]*}; //' | cut -c1-170
done
echo "== done in $(( $(date +%s) - T0 ))s"
