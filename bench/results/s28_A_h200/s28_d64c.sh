export KERNELC_CACHE_DIR=/tmp/kc_d64c
bash bench/experiments/d64c27/request_s28_d64c.sh
