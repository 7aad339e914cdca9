# Sourced on the GPU machine by call.sh: install the carried wheels (.wheels/*/*.whl) once into /tmp/site and
# export the environment of scripts/gpu_env.sh. REPO is the repository root there.
cd "$REPO"
SITE=/tmp/site; mkdir -p $SITE
if [ ! -f $SITE/.done ] && ls .wheels/*/*.whl >/dev/null 2>&1; then
  python3 -c "import llvmlite, sys; sys.exit(0 if llvmlite.__version__ >= '0.50' else 1)" 2>/dev/null || echo "WARNING: llvmlite < 0.50"
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target $SITE .wheels/*/*.whl 2>&1 | tail -2
  touch $SITE/.done
fi
source scripts/gpu_env.sh
