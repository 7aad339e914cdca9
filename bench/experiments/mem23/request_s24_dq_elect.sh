#!/bin/bash
# Written after session 23 (not run): does KERNELC_TMA_ELECT=auto's thread-0 form slow the D=128 ds backward's dQ GEMM
# (CPU: 76 -> 103 loop instructions, no R2UR saved; docs/performance.md "A kernel the auto rule was not fitted on")?
# base = the default (auto: tid for that GEMM), var = elect; matmul_tma as the control whose answer is known (tid
# faster, 1.6%). Both builds in one process (knob_ab.py), two processes. <= 120 s.
set -u
RES=${OUT:-/tmp/dq_elect}; mkdir -p $RES
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,driver_version --format=csv,noheader
for P in 1 2; do
  timeout 55 python3 bench/experiments/mem23/knob_ab.py --env KERNELC_TMA_ELECT=elect \
    --work bwd128_ds bwd128_ds_causal mm_tma --rounds 20 --out $RES/dq_elect_p$P.json > $RES/dq_elect_p$P.log 2>&1
  echo "process $P rc=$?"; grep "var/base" $RES/dq_elect_p$P.log | sed 's/ms {[^}]*}; //' | cut -c1-170
done
