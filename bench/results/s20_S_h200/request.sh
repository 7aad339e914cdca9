# Issue 21's two softmax rows (fwd, bwd) in four separate processes, one after another: does the process-to-process
# spread mem20 saw between calls (0.2-0.4%) keep kernelc/Triton above or below 1.0?
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,driver_version --format=csv,noheader
T0=$(date +%s)
for i in 1 2 3 4; do
  [ $(( $(date +%s) - T0 )) -gt 150 ] && break
  timeout 45 python3 bench/bench_memory_bound.py ^softmax --no-torch --rounds 5 --timing interleaved > $RES/p$i.log 2>&1
  echo "process $i rc=$? at $(( $(date +%s) - T0 ))s"
  cp bench/results/memory_bound.json $RES/p$i.json 2>/dev/null
  awk '/^[a-z].*(fp16|fp32|bf16) \{/ {print substr($0, 1, 34)} /^   interleaved/ {print substr($0, 1, 250)}' $RES/p$i.log
done
