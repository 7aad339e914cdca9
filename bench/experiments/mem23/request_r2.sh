#!/bin/bash
# mem23 R2 (issue #21; limit 110 s, the last round). (1) KERNELC_TMA_ELECT=tid (thread 0 issues the TMA copies, as
# before adf0175f) against the default elect.sync form, both builds in one process (knob_ab.py): matmul_tma,
# attention_tma fwd, matmul_persistent, attention_tma causal, pointer attention fwd (auto-TMA); two processes.
# (2) rope: register ceilings for more blocks per SM (cap40: 12 blocks, 40 B spilled; cap32: 16 blocks, 120 B) and
# the launch bound's build (56 registers, 9 blocks, every load before the first use) against kernelc's (48, 10
# blocks) and Triton; two processes. (3) KERNELC_REDUCE_SCRATCH=loops on cross_entropy / layer_norm bwd against
# Triton (mem21/variants.py), a third process after R1's two.
set -u
T0=$(date +%s); END=$((T0 + 106))
left() { echo $(( END - $(date +%s) )); }
RES=${OUT:-/tmp/mem23_out}; mkdir -p $RES
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu,driver_version --format=csv,noheader | tee $RES/gpu.txt
KA=bench/experiments/mem23/knob_ab.py
V=bench/experiments/mem21/variants.py
for P in 1 2; do
  S=$(( $(left) - 36 - (2 - P) * 25 )); [ $S -gt 40 ] && S=40
  if [ $S -lt 12 ]; then echo "elect process $P skipped ($(left)s left)"; continue; fi
  timeout $S python3 $KA --env KERNELC_TMA_ELECT=tid --work mm_tma attn_tma mm_pers attn_tma_causal attn attn_causal \
    --rounds 30 --out $RES/elect_p$P.json > $RES/elect_p$P.log 2>&1; echo "elect process $P rc=$? (limit ${S}s)"
  grep "var/base" $RES/elect_p$P.log | sed 's/ms {[^}]*}; //' | cut -c1-170
done
for P in 1 2; do
  S=$(( $(left) - 12 - (2 - P) * 12 )); [ $S -gt 12 ] && S=12
  if [ $S -lt 7 ]; then echo "rope process $P skipped ($(left)s left)"; continue; fi
  timeout $S python3 $V rope --rounds 5 --col cap40=cap40 --col cap32=cap32 --col bound=bound \
    --out $RES/rope_p$P.json > $RES/rope_p$P.log 2>&1; echo "rope process $P rc=$? (limit ${S}s)"
  grep -E "^\s+(kernelc|triton)" $RES/rope_p$P.log | cut -c1-100
done
S=$(( $(left) - 1 )); [ $S -gt 14 ] && S=14
if [ $S -ge 7 ]; then
  timeout $S python3 $V "cross_entropy" "layer_norm bwd" --rounds 5 --col loops=own@KERNELC_REDUCE_SCRATCH=loops \
    --out $RES/loops_p3.json > $RES/loops_p3.log 2>&1; echo "loops variants rc=$? (limit ${S}s)"
  grep -E "^\s+kernelc|^(cross|layer)" $RES/loops_p3.log | cut -c1-90
else echo "loops variants skipped ($(left)s left)"; fi
echo "== done in $(( $(date +%s) - T0 ))s"
