export KERNELC_CACHE_DIR=/tmp/kc_fp8
bash bench/experiments/fp827/request_s27_fp8.sh
