#!/bin/bash
# mem24 R1 (issue #21; limit 90 s). (1) attention_bwd's D=128 ds backward, non-causal, KERNELC_TMA_ELECT=elect against
# the auto default (thread 0 for its dQ GEMM), both builds in one process (mem23/knob_ab.py, now with o and lse from
# a real forward: P24's random lse overflowed dq in fp16, mem24/bwd_operands.py); two processes. (2) softmax fwd and
# rope against Triton (mem21/variants.py): the shipped build, its PTX with streaming stores (`stcs`: st.global.cs) and with
# an L2 evict_first policy on its stores (`stef`),
# two processes. (3) KERNELC_REDUCE_SCRATCH=loops on bench_kernels' softmax (4096x4096 and 8192x1024 fp32: 4 -> 3
# barriers, CPU) against the default, both rows in one process (knob_ab.py).
set -u
T0=$(date +%s); END=$((T0 + 87))
left() { echo $(( END - $(date +%s) )); }
RES=${OUT:-/tmp/mem24_out}; mkdir -p $RES
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu,driver_version --format=csv,noheader | tee $RES/gpu.txt
git log -1 --format=%H 2>/dev/null | tee $RES/commit.txt
KA=bench/experiments/mem23/knob_ab.py
V=bench/experiments/mem21/variants.py
for P in 1 2; do
  S=$(( $(left) - 40 - (2 - P) * 13 )); [ $S -gt $(( 34 - P * 7 )) ] && S=$(( 34 - P * 7 ))   # 27 s, then 20
  if [ $S -lt 8 ]; then echo "dq elect process $P skipped ($(left)s left)"; continue; fi
  timeout $S python3 $KA --env KERNELC_TMA_ELECT=elect --work bwd128_ds --rounds 30 \
    --out $RES/dq_elect_p$P.json > $RES/dq_elect_p$P.log 2>&1; echo "dq elect process $P rc=$? (limit ${S}s)"
  grep -E "var/base|Error" $RES/dq_elect_p$P.log | sed 's/ms {[^}]*}; //' | cut -c1-170
done
for P in 1 2; do
  S=$(( $(left) - 10 - (2 - P) * 15 )); [ $S -gt 16 ] && S=16
  if [ $S -lt 8 ]; then echo "variants process $P skipped ($(left)s left)"; continue; fi
  timeout $S python3 $V "softmax fwd" rope --rounds 4 --col stcs=own+stcs --col stef=own+stef \
    --out $RES/sm_rope_p$P.json > $RES/sm_rope_p$P.log 2>&1; echo "variants process $P rc=$? (limit ${S}s)"
  grep -E "^\s+(kernelc|triton)|^(softmax|rope)" $RES/sm_rope_p$P.log | cut -c1-100
done
S=$(( $(left) - 1 )); [ $S -gt 24 ] && S=24
if [ $S -ge 8 ]; then
  timeout $S python3 $KA --env KERNELC_REDUCE_SCRATCH=loops --work softmax_4096 softmax_8192x1024 --rounds 30 \
    --out $RES/loops_sm.json > $RES/loops_sm.log 2>&1; echo "loops softmax rc=$? (limit ${S}s)"
  grep -E "var/base|Error" $RES/loops_sm.log | sed 's/ms {[^}]*}; //' | cut -c1-170
else echo "loops softmax skipped ($(left)s left)"; fi
echo "== done in $(( $(date +%s) - T0 ))s"
