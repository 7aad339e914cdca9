#!/bin/bash
# mem23 R2 (issue #21; limit 150 s). (1) KERNELC_TMA_ELECT=tid (thread 0 issues the TMA copies, as before adf0175f)
# against the default elect.sync form, both builds in one process (knob_ab.py): matmul_tma, attention_tma fwd
# (non-causal, causal), matmul_persistent, pointer attention fwd (auto-TMA); two processes. (2) KERNELC_REDUCE_SCRATCH
# =loops on bench_kernels' softmax and layernorm rows (one process) and on cross_entropy / layer_norm bwd against
# Triton (mem21/variants.py, a third process after R1's two). (3) rope: register ceilings for more blocks per SM
# (cap40: 12 blocks, 40 B spilled; cap32: 16 blocks, 120 B) and the launch bound's build (56 registers, 9 blocks,
# every load before the first use) against kernelc's (48, 10 blocks) and Triton; two processes.
set -u
T0=$(date +%s); END=$((T0 + 146))
left() { echo $(( END - $(date +%s) )); }
RES=${OUT:-/tmp/mem23_out}; mkdir -p $RES
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu,driver_version --format=csv,noheader | tee $RES/gpu.txt
KA=bench/experiments/mem23/knob_ab.py
for P in 1 2; do
  S=$(( $(left) - 70 - (2 - P) * 28 )); [ $S -gt 44 ] && S=44
  if [ $S -lt 12 ]; then echo "elect process $P skipped ($(left)s left)"; continue; fi
  timeout $S python3 $KA --env KERNELC_TMA_ELECT=tid --work mm_tma attn_tma attn_tma_causal mm_pers attn attn_causal \
    --rounds 30 --out $RES/elect_p$P.json > $RES/elect_p$P.log 2>&1; echo "elect process $P rc=$? (limit ${S}s)"
  grep "var/base" $RES/elect_p$P.log | sed 's/ms {[^}]*}; //' | cut -c1-170
done
S=$(( $(left) - 50 )); [ $S -gt 20 ] && S=20
if [ $S -ge 8 ]; then
  timeout $S python3 $KA --env KERNELC_REDUCE_SCRATCH=loops --work softmax_4096 softmax_8192x1024 layernorm \
    --rounds 30 --out $RES/loops_kernels.json > $RES/loops_kernels.log 2>&1; echo "loops kernels rc=$? (limit ${S}s)"
  grep "var/base" $RES/loops_kernels.log | sed 's/ms {[^}]*}; //' | cut -c1-170
else echo "loops kernels skipped ($(left)s left)"; fi
V=bench/experiments/mem21/variants.py
S=$(( $(left) - 30 )); [ $S -gt 16 ] && S=16
if [ $S -ge 8 ]; then
  timeout $S python3 $V "cross_entropy" "layer_norm bwd" --rounds 6 --col loops=own@KERNELC_REDUCE_SCRATCH=loops \
    --out $RES/loops_p3.json > $RES/loops_p3.log 2>&1; echo "loops variants rc=$? (limit ${S}s)"
  grep -E "^\s+kernelc|^(cross|layer)" $RES/loops_p3.log | cut -c1-90
else echo "loops variants skipped ($(left)s left)"; fi
for P in 1 2; do
  S=$(( $(left) - 1 - (2 - P) * 14 )); [ $S -gt 14 ] && S=14
  if [ $S -lt 7 ]; then echo "rope process $P skipped ($(left)s left)"; continue; fi
  timeout $S python3 $V rope --rounds 5 --col cap40=cap40 --col cap32=cap32 --col bound=bound \
    --out $RES/rope_p$P.json > $RES/rope_p$P.log 2>&1; echo "rope process $P rc=$? (limit ${S}s)"
  grep -E "^\s+(kernelc|triton)" $RES/rope_p$P.log | cut -c1-100
done
echo "== done in $(( $(date +%s) - T0 ))s"
