# Source on the GPU machine (after gpu_check.sh has installed .wheels into /tmp/site) to chain commands:
#   bash scripts/gpu_check.sh tests && source scripts/gpu_env.sh && KERNELC_WGMMA_ASYNC=0 python3 bench/x.py
export PYTHONPATH="/tmp/site:$PWD"
export PYTHONUNBUFFERED=1
export KERNELC_CACHE_DIR=${KERNELC_CACHE_DIR:-/tmp/kernelc-cache}
[ -f /usr/local/cuda/nvvm/libdevice/libdevice.10.bc ] || export KERNELC_LIBDEVICE="$PWD/.wheels/core/libdevice.10.bc"
