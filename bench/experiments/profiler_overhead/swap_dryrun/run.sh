#!/bin/bash
# the three workloads of request_s25_proton.sh on CPU (short budgets): ./run.sh TRITON_SITE OUT
here=$(cd "$(dirname "$0")" && pwd); root=$(cd "$here/../../../.." && pwd)
mkdir -p "$2"
for a in "tiny 12 3" "encoder 40 1" "train 40 1"; do
  set -- "$1" "$2" $a
  KPROF_BACKEND=cpu PYTHONPATH=$root:$here/site:$1 timeout 150 python3 "$here/dry.py" $3 $4 $5 "$2" > "$2/swap_$3.log" 2>&1
  echo "$3 rc $?"
done
PYTHONPATH=$root python3 "$root/bench/experiments/profiler_overhead/swap_verdict.py" "$2"
