#!/bin/bash
# nvj27's request for session 28 (time limit: 120 s on one H200; no GPU kernel runs, only the host's own nvJitLink).
# Run from the tree's root (main with nvj27 merged), PYTHONPATH set, $OUT the results folder, a fresh KERNELC_CACHE_DIR.
# On CPU nvj27 preloaded nvJitLink 13.0.88 to stand in for the GPU hosts'; this checks it in place:
# 1. the host's nvJitLink version; 2. the six SASS tests kvr27 saw fail with 13.0.88 (now passing on CPU under both);
# 3. sass_by_nvjitlink.py's builds against the CPU's under 13.0.88 (results/builds_nvjitlink13.0.88.json): the same
#    registers, spills and instruction counts expected.
set -u
RES=${OUT:-/tmp/nvj27_s28}; mkdir -p $RES
X=bench/experiments/nvj27
python3 -c "from cuda.bindings import nvjitlink; print('nvJitLink', nvjitlink.version())" 2>&1 | tee $RES/nvjitlink.txt
ls /usr/local/lib/python3*/dist-packages/nvidia/cu13/lib/libnvJitLink* $(python3 -c "import site; print(site.getsitepackages()[0])")/nvidia/cu13/lib/libnvJitLink* 2>/dev/null | tee -a $RES/nvjitlink.txt
timeout 80 python3 -m pytest -q -rA -p no:cacheprovider -n 2 \
  tests/compiler/test_fp8_narrowing.py::test_fixup_instructions_a_pair \
  tests/compiler/test_register_budget.py::test_occupancy_step_reassembles_geglu_bwd_without_spills \
  tests/compiler/test_uniform_warpgroups.py::test_the_k_step_moves_no_descriptor_to_the_uniform_datapath \
  > $RES/sass_tests.log 2>&1 &
timeout 80 python3 $X/sass_by_nvjitlink.py --out $RES/builds > $RES/builds.log 2>&1 &
wait
grep -E "passed|failed" $RES/sass_tests.log | tail -n 1
python3 - "$RES/builds/builds.json" "$X/results/builds_nvjitlink13.0.88.json" <<'PY' 2>&1 | tail -n 14
import json, sys
try:
    got, cpu = (json.load(open(p)) for p in sys.argv[1:3])
except Exception as e:
    sys.exit(f"no builds: {e!r} (builds.log)")
print("host nvJitLink", got["nvjitlink"], "| CPU run", cpu["nvjitlink"])
keys = ("n_regs", "n_spills", "n_instr", "step_len", "step_r2ur", "step_nop", "step_target")
for k, c in cpu["builds"].items():
    g = got["builds"].get(k, {})
    same = all(g.get(f) == c.get(f) for f in keys)
    print(" ", k, "same as CPU 13.0.88" if same else {f: (g.get(f), c.get(f)) for f in keys if g.get(f) != c.get(f)})
PY
