export KERNELC_CACHE_DIR=/tmp/kc_an28
bash bench/experiments/an28/request_an28.sh
