#!/bin/bash
# mem26 F (issue #21; hard limit 60 s), on merged main (KERNELC_L2_REUSE=evict_last the default): a second call on
# softmax fwd 8192^2 fp16 and rope 4x4096x32x128 bf16 -- the shipped build, Triton, Triton's A/A and the streaming
# copies (copies.py under kernelc and Triton, torch's copy_) in the same interleaved rounds, one process; on rope
# also `l2off` (the build without the L2 policy, KERNELC_L2_REUSE=off: the shipped build before session 26) and
# `el` (R2's column: the build without, its cos/sin loads given the policy by a PTX edit; the same SASS as the
# default, bench/experiments/mem26/results/l2_reuse_sass.json), so the policy's gain is measured twice in one process.
set -u
T0=$(date +%s); END=$((T0 + 57))
left() { echo $(( END - $(date +%s) )); }
RES=${OUT:-/tmp/mem26_out}; mkdir -p $RES
timeout 3 nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu,driver_version --format=csv,noheader \
  > $RES/gpu.txt 2>&1; head -1 $RES/gpu.txt
V=bench/experiments/mem21/variants.py
S=$(( $(left) - 2 )); RS=$(( (S - 8) / 2 ))
timeout $S python3 $V "softmax fwd" rope --rounds 16 --row-seconds $RS --copies \
  --col "rope/l2off=own@KERNELC_L2_REUSE=off" --col "rope/el=own+l2el:nost@KERNELC_L2_REUSE=off" \
  --out $RES/headroom_f.json > $RES/headroom_f.log 2>&1
echo "variants rc=$? (limit ${S}s, ${RS}s a row)"
grep -E "Error|error" $RES/headroom_f.log | head -3 | cut -c1-150
python3 bench/experiments/mem26/headroom.py $RES/headroom_f.json --json $RES/summary_f.json > $RES/summary_f.txt 2>&1
sed 's/triton\[control\]/A\/A/' $RES/summary_f.txt | cut -c1-150
echo "== done in $(( $(date +%s) - T0 ))s"
