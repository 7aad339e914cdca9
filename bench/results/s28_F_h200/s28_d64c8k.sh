export KERNELC_CACHE_DIR=/tmp/kc_d64c8k
bash bench/experiments/d64c28/request_s29_d64c.sh
