#!/usr/bin/env bash
# On the GPU machine, from the repository root: run requests one after another, each under its own time limit.
#   bash scripts/device/call.sh TAG NAME:MAXS ...
# NAME is either .ext/gpu/req/NAME.sh (run in this tree) or .ext/br/NAME/{patch,run.sh} (made by round.sh: a
# helper branch's diff, applied to a copy of this tree, run.sh run there with its own kernel cache). Each request
# gets $OUT/NAME; since the device returns at most 8 files, each comes back as one archive, NAME.tgz, and the
# last 25 lines of its log are printed.
set -u
export REPO=$PWD
TAG=$1; shift
OUTROOT=${OUT:-/tmp/out}; mkdir -p $OUTROOT
source scripts/device/setup.sh
{ nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv
  python3 -c "import llvmlite, torch, triton, numpy; print('llvmlite', llvmlite.__version__, 'torch', torch.__version__, 'triton', triton.__version__, 'numpy', numpy.__version__)"
  date -u; } 2>&1 | sed "s/^/[$TAG] /"
for item in "$@"; do
  name=${item%%:*}; maxs=${item#*:}
  export OUT=$OUTROOT/$name; mkdir -p $OUT
  t0=$(date +%s)
  if [ -f "$REPO/.ext/gpu/req/$name.sh" ]; then
    (cd $REPO && source scripts/gpu_env.sh && timeout -k 5 $maxs bash .ext/gpu/req/$name.sh) > $OUT/log.txt 2>&1
    rc=$?
  elif [ -d "$REPO/.ext/br/$name" ]; then
    d=/tmp/br_$name; rm -rf $d; mkdir -p $d
    (cd $REPO && tar cf - --exclude=./.ext --exclude=./.wheels --exclude=./.git . | tar xf - -C $d)
    ln -s $REPO/.wheels $d/.wheels; ln -s $REPO/.ext $d/.ext
    (cd $d && git apply --allow-empty --whitespace=nowarn $REPO/.ext/br/$name/patch) > $OUT/log.txt 2>&1 \
      || echo "PATCH FAILED" >> $OUT/log.txt
    (cd $d && source scripts/gpu_env.sh && export KERNELC_CACHE_DIR=/tmp/kc_$name \
      && timeout -k 5 $maxs bash $REPO/.ext/br/$name/run.sh) >> $OUT/log.txt 2>&1
    rc=$?
  else
    echo "no request $name" > $OUT/log.txt; rc=99
  fi
  echo "== $name rc=$rc $(( $(date +%s) - t0 ))s"
  tail -25 $OUT/log.txt
  (cd $OUTROOT && tar czf $name.tgz $name && rm -rf $name)
done
