#!/usr/bin/env bash
# `pip install .` (a real wheel, not editable) into a fresh virtual environment, then, from a directory
# outside the checkout: `python -m kprof -m pcsampling --help`, `kprof-analyze --help`, and README's main
# command (profile examples/train.py, view the profile). Dependencies come from the system site-packages.
#   bash scripts/check_wheel_install.sh [VENV_DIR]
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
WORK=$(mktemp -d)
V=${1:-$WORK/venv}
python3 -m venv --system-site-packages "$V"
# build from a copy of the tracked files, so the checkout gets no build/ or egg-info
git -C "$ROOT" ls-files -z | (cd "$ROOT" && xargs -0 tar cf -) | (mkdir -p "$WORK/src" && cd "$WORK/src" && tar xf -)
if ! "$V/bin/python" -m pip install -q --no-deps --disable-pip-version-check "$WORK/src" >"$WORK/pip.log" 2>&1; then
  cat "$WORK/pip.log"; echo "check_wheel_install: pip install failed"; exit 1
fi
rm -rf "$WORK/src"
mkdir -p "$WORK/run" && cd "$WORK/run"
echo "== installed packages resolve to the venv, not the checkout"
"$V/bin/python" - "$V" "$ROOT" <<'PY'
import sys, importlib
venv, root = sys.argv[1], sys.argv[2]
for name in ("kernelc", "cubintools", "profiler", "analyzer", "kprof"):
    f = importlib.import_module(name).__file__
    print(f"  {name:10s} {f}")
    assert f.startswith(venv) and not f.startswith(root), f"{name} imported from {f}, not from the wheel"
PY
echo "== python -m kprof -m pcsampling --help"
"$V/bin/python" -m kprof -m pcsampling --help | head -5
echo "== kprof-analyze --help"
"$V/bin/kprof-analyze" --help | head -5
echo "== README's main command (from $PWD)"
"$V/bin/python" -m kprof "$ROOT/examples/train.py" && "$V/bin/kprof-viewer" -m time/ms kprof.hatchet | head -12
echo "check_wheel_install: OK"
rm -rf "$WORK"
