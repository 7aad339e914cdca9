#!/bin/bash
# mem24 R2 (issue #21; limit 30 s). The auto rule refined on this branch: thread 0 issues TMA copies only where the
# one-dot loop's copies read host descriptors; descriptors made in the kernel keep elect.sync (R1: the ds backward's
# dQ GEMM, on kernel-made descriptors, 0.16-0.19% faster under elect; CPU: tid lengthens the kernel-made-descriptor
# persistent GEMM's loop 98 -> 120 instructions). knob_ab.py, base = this branch's auto (elect for both workloads),
# var = tid: (1) the persistent GEMM on kernel-made descriptors (bench_kernels' matmul_device_desc, bf16 4096^3,
# 128x128 w4 s3), (2) the fp8 descriptor GEMM (bench_kernels' matmul_fp8 row, fp8e4m3 4096^3, 128x256x128 w8 s3, maps
# made in the kernel; CPU: tid 72 -> 84 loop instructions, R2UR 4 either way), both untimed under either form so far.
# Two processes.
set -u
T0=$(date +%s); END=$((T0 + 28))
left() { echo $(( END - $(date +%s) )); }
RES=${OUT:-/tmp/mem24_r2}; mkdir -p $RES
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu,driver_version --format=csv,noheader | tee $RES/gpu.txt
KA=bench/experiments/mem23/knob_ab.py
for P in 1 2; do
  S=$(( $(left) - (2 - P) * 9 )); [ $S -gt 17 ] && S=17
  if [ $S -lt 5 ]; then echo "process $P skipped ($(left)s left)"; continue; fi
  timeout $S python3 $KA --env KERNELC_TMA_ELECT=tid --work mm_ddesc mm_fp8_tma --rounds 30 \
    --out $RES/tid_p$P.json > $RES/tid_p$P.log 2>&1; echo "process $P rc=$? (limit ${S}s)"
  grep -E "var/base|Error" $RES/tid_p$P.log | sed 's/ms {[^}]*}; //' | cut -c1-170
done
echo "== done in $(( $(date +%s) - T0 ))s"
