#!/usr/bin/env bash
# One call on the lent GPU machine: install what it lacks, run the GPU tests and the benchmarks,
# leave logs and JSON results under $OUT.
#   bash scripts/gpu_check.sh [tests] [tests:a.py,b.py] [bench] [compile] [launch] [proton] [overhead_ab] [overhead_train]
#                             [tutorials]
#   (default: tests bench; any other word runs the maintained benchmark `python3 -m bench WORD`, or the
#   experiment bench/experiments/*/WORD.py)
# Wheels travel in .wheels/ (built by scripts/fetch_gpu_wheels.sh on the CPU machine).
set -uo pipefail
OUT=${OUT:-/tmp/kernelc-out}
mkdir -p "$OUT"
SITE=/tmp/site
mkdir -p "$SITE"
what=${*:-tests bench}
if ! python3 -c "import llvmlite, sys; sys.exit(0 if llvmlite.__version__ >= '0.50' else 1)" 2>/dev/null; then
  tarball=$(ls .wheels/*/llvmlite-*-py312.tar.xz 2>/dev/null | head -1)
  [ -f "$SITE/llvmlite/__init__.py" ] || tar xJf "$tarball" -C "$SITE"
fi
# whatever wheel folders were carried (.wheels/core, .wheels/profiler, or a trimmed .wheels/run)
wheels=$(ls .wheels/*/*.whl 2>/dev/null)
[ -n "$wheels" ] && python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "$SITE" $wheels 2>&1 | tail -2
python3 -c "import cuda.pathfinder as p; assert p.find_nvidia_binary_utility('nvdisasm')" 2>/dev/null || \
  { command -v nvdisasm >/dev/null && export KERNELC_NVDISASM=$(command -v nvdisasm); } || \
  { [ -x /usr/local/cuda/bin/nvdisasm ] && export KERNELC_NVDISASM=/usr/local/cuda/bin/nvdisasm; }
export PYTHONPATH="$SITE:$PWD"
export PYTHONUNBUFFERED=1
[ -f /usr/local/cuda/nvvm/libdevice/libdevice.10.bc ] || export KERNELC_LIBDEVICE=$(ls "$PWD"/.wheels/*/libdevice.10.bc | head -1)
export KERNELC_CACHE_DIR=/tmp/kernelc-cache
{
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv
  python3 -c "import llvmlite, torch, triton, numpy; print('llvmlite', llvmlite.__version__, 'torch', torch.__version__, 'triton', triton.__version__, 'numpy', numpy.__version__)"
} 2>&1 | tee "$OUT/env.txt"
for step in $what; do
  [[ $step == tests:* ]] && step=${step//,/ }
  case $step in
    tests)
      # -v: one line per test as it ends, so a log cut by the timeout still names what failed (-rfE prints at the end)
      timeout 500 python3 -m pytest -v -m gpu -p no:cacheprovider tests -rfE --durations=10 2>&1 | tee "$OUT/gpu_tests.log" | grep -vE " (PASSED|SKIPPED) " | tail -60 ;;
    tests:*)  # a subset, comma-separated, one pytest process: tests:tests/gpu/test_gpu_runtime.py,tests/pcsampling
      timeout 420 python3 -m pytest -v -m gpu -p no:cacheprovider ${step#tests:} -rfE 2>&1 | tee -a "$OUT/gpu_tests.log" | grep -vE " (PASSED|SKIPPED) " | tail -40 ;;
    bench)
      timeout 300 python3 -m bench kernels 2>&1 | tee "$OUT/bench_kernels.log" | tail -30 ;;
    compile)
      timeout 200 python3 -m bench compile 2>&1 | tee "$OUT/bench_compile.log" | tail -12 ;;
    launch)
      timeout 200 python3 -m bench launch 2>&1 | tee "$OUT/bench_launch.log" | tail -12 ;;
    overhead_ab)   # profiler overhead, each process its own baseline (bench/profiler_overhead_ab.py)
      timeout 560 python3 -m bench profiler_overhead_ab ${AB_ARGS:-} 2>&1 | tee -a "$OUT/profiler_overhead_ab.log" | tail -30 ;;
    overhead_train)   # whole-process examples/train.py runs, 150 steps each
      timeout 560 python3 -m bench profiler_overhead --only train --rounds 3 --train-steps 150 --train-warmup 10 2>&1 \
        | tee "$OUT/profiler_overhead_train.log" | tail -20 ;;
    tutorials)   # Triton's tutorials (copied to .ext/tutorials) under Triton and kernelc, side by side
      timeout ${TUT_TIMEOUT:-570} python3 bench/triton_tutorials.py --tutorials .ext/tutorials ${TUT_ARGS:---only 01,02,04,05,07} --fresh \
        2>&1 | tee "$OUT/triton_tutorials.log" | tail -40 ;;
    proton)
      timeout 120 python3 -m bench proton_fixture "$OUT/proton_small.hatchet" 2>&1 | tail -5 ;;
    *)
      exp=$(ls bench/experiments/*/"$step".py 2>/dev/null | head -1)
      if python3 -m bench --list | grep -q "^  $step "; then
        timeout 300 python3 -m bench "$step" 2>&1 | tee "$OUT/$step.log" | tail -30
      elif [ -n "$exp" ]; then
        timeout 300 python3 "$exp" 2>&1 | tee "$OUT/$step.log" | tail -30
      else
        echo "gpu_check: no benchmark or experiment named $step (python3 -m bench --list)" | tee -a "$OUT/errors.txt"
      fi ;;
  esac
done
# (benchmarks write their JSON to $OUT/results themselves)
