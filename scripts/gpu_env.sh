# Source on the GPU machine (after gpu_check.sh has installed .wheels into /tmp/site) to chain commands:
#   bash scripts/gpu_check.sh tests && source scripts/gpu_env.sh && KERNELC_WGMMA_ASYNC=0 python3 bench/x.py
export PYTHONPATH="/tmp/site:$PWD"
export PYTHONUNBUFFERED=1
export KERNELC_CACHE_DIR=${KERNELC_CACHE_DIR:-/tmp/kernelc-cache}
[ -f /usr/local/cuda/nvvm/libdevice/libdevice.10.bc ] || export KERNELC_LIBDEVICE=$(ls "$PWD"/.wheels/*/libdevice.10.bc | head -1)
python3 -c "import cuda.pathfinder as p; assert p.find_nvidia_binary_utility('nvdisasm')" 2>/dev/null || \
  { [ -x /usr/local/cuda/bin/nvdisasm ] && export KERNELC_NVDISASM=/usr/local/cuda/bin/nvdisasm; }
