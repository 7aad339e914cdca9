export KERNELC_CACHE_DIR=/tmp/kc_kvr
bash bench/experiments/kvr27/request_s28_kvr27.sh
