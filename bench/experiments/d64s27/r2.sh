#!/bin/bash
# d64s27's R2 request (session 27). Time limit: 150 s on one H200. Run from the tree's root (main + branch d64s27's
# diff), PYTHONPATH set, $OUT the results folder, a fresh KERNELC_CACHE_DIR.
# (1) compiles in parallel; (2) each kernel of sepwsq (and of the candidates' copies, the fused default) timed alone at
# N 16384 D=64, and sepwsq's kernels at D=128; (3) cuDNN's kernels and ours under torch.profiler; (4) the A/B at
# N 16384 (4 rounds) and N 4096 (6 rounds): cuDNN, the default, sepwsq and its candidates.
set -u
RES=${OUT:-/tmp/d64s27_r2}; mkdir -p $RES
T0=$(date +%s); END=$((T0 + 145))
left() { echo $(( END - $(date +%s) )); }
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,driver_version --format=csv,noheader | tee $RES/gpu.txt
git log --oneline -1 2>/dev/null | head -c 120; echo
S=bench/experiments/d64s27/bwd_ab.py
E="cudnn def sepwsq sepwsq_za sepwsq_zapp sepwsq_pp sepwsq_q3 sepwsq_k4 sepwsq_t sepwsq_tk sepwsq_tq3 sepwsq_zat sepwsq_zat4 sepwsq_2s"
echo "== 1: compiles in parallel"
for e in def sepwsq sepwsq_za sepwsq_zapp sepwsq_pp sepwsq_q3 sepwsq_k4 "sepwsq_t sepwsq_tk sepwsq_tq3" sepwsq_zat sepwsq_zat4; do
  timeout 50 python3 $S --warm --seq 1024 --entries $e > "$RES/warm_${e%% *}.log" 2>&1 &
done
timeout 50 python3 $S --warm --seq 1024 --head-dim 128 --entries sepwsq > $RES/warm_d128.log 2>&1 &
timeout 50 python3 $S --warm --seq 1024 --head-dim 128 --entries def def_za > $RES/warm_d128def.log 2>&1 &
wait; tail -qn 1 $RES/warm_*.log | grep -v Warn
echo "== 2: kernels alone, N 16384, $(left)s left"
timeout 30 python3 $S --part kernels --seq 16384 --entries sepwsq sepwsq_za sepwsq_t sepwsq_zat def --rounds 2 --rep-ms 60 \
  --out $RES/kernels_d64.json > $RES/kernels_d64.log 2>&1
timeout 20 python3 $S --part kernels --seq 16384 --head-dim 128 --entries sepwsq --rounds 1 --rep-ms 60 \
  --out $RES/kernels_d128.json > $RES/kernels_d128.log 2>&1
grep -E "dkdv|dq" $RES/kernels_d64.log $RES/kernels_d128.log | sed 's/^.*kernels_//'
echo "== 3: torch.profiler, N 16384, $(left)s left"
timeout 20 python3 $S --part prof --seq 16384 --entries cudnn sepwsq --rounds 2 --out $RES/prof.json \
  > $RES/prof.log 2>&1
grep -E "GPU kernels" $RES/prof.log
echo "== 4: A/B N 16384, $(left)s left"
T=$(( $(left) - 25 )); [ $T -gt 65 ] && T=65
timeout $T python3 $S --seq 16384 --entries $E --rounds 4 --rep-ms 100 --out $RES/n16384.json > $RES/n16384.log 2>&1
echo "== 5: A/B N 4096, $(left)s left"
T=$(( $(left) - 22 )); [ $T -gt 25 ] && T=25
[ $T -gt 8 ] && timeout $T python3 $S --seq 4096 --entries $E --rounds 6 --rep-ms 30 --out $RES/n4096.json \
  > $RES/n4096.log 2>&1
echo "== 6: D=128 A/B N 16384 (the default with KERNELC_WGMMA_ZERO_ACC=ws), $(left)s left"
T=$(( $(left) - 2 )); [ $T -gt 25 ] && T=25
[ $T -gt 12 ] && timeout $T python3 $S --seq 16384 --head-dim 128 --entries cudnn def def_za --rounds 3 \
  --rep-ms 100 --out $RES/d128_n16384.json > $RES/d128_n16384.log 2>&1
echo "== summary"
cat $RES/n16384.log $RES/n4096.log $RES/d128_n16384.log 2>/dev/null | grep '^N=' | sed 's/cuDNN\/this/r/; s/  err first/ e/'
echo "== done in $(( $(date +%s) - T0 ))s"
