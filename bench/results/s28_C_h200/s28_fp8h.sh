export KERNELC_CACHE_DIR=/tmp/kc_fp8h
bash bench/experiments/fp8h28/request_s29_fp8h28.sh
