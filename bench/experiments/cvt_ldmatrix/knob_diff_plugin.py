"""pytest plugin (CPU): while a test suite runs its kernels in kernelc's interpreter, compile every new
specialisation for sm_90a twice, ``KERNELC_CVT_LDMATRIX`` on and off, and record which kernels the knob changes.

    KERNELC_INTERPRET=1 KNOB_DIFF_OUT=diff.jsonl python3 -m pytest -p kernelc.compat.pytest_plugin \\
        -p knob_diff_plugin TESTS...   # with this folder on PYTHONPATH

Finds, without a GPU, the kernels of other people's code (Liger-Kernel's tests) where the ldmatrix read changes
the generated code; only those need the GPU comparison of outputs with the knob on and off. One JSON line per
specialisation: kernel, signature, constexprs, warps, ldmatrix count on/off, whether the PTX differs, or the error.
"""
from __future__ import annotations

import json
import os
import re

_SEEN = set()


def _compile_both(fn, values, num_warps, num_stages):
    import kernelc
    from kernelc.runtime.launcher import get_state
    st = get_state(fn)
    names = fn.arg_names
    key = st["spec"].key([values[n] for n in names], fn.constexpr_mask(values))
    tag = (fn.__name__, repr(key), num_warps, num_stages)
    if tag in _SEEN:
        return
    _SEEN.add(tag)
    sig, cx, div, eq1, _ = st["spec"].signature(key)
    div = dict(div, **{n: 1 for n, t in sig.items() if t.startswith("*") and n not in div})
    rec = {"kernel": fn.__name__, "signature": sig, "constexprs": {k: repr(v) for k, v in cx.items()},
           "num_warps": num_warps}
    old = os.environ.get("KERNELC_CVT_LDMATRIX")
    try:
        ptx = {}
        for v in ("1", "0"):
            os.environ["KERNELC_CVT_LDMATRIX"] = v
            ck = kernelc.compile(fn, sig, cx, target="sm_90a", num_warps=num_warps, num_stages=num_stages,
                                 divisibility=div, equal_to_1=eq1)
            ptx[v] = ck.asm["ptx"]
            rec[f"ldmatrix_{v}"] = len(re.findall(r"^\s*ldmatrix\.", ptx[v], re.M))
            rec[f"conversions_{v}"] = [c.get("smem") for c in ck.reports.get("conversions", [])]
        rec["differs"] = ptx["1"] != ptx["0"]
    except Exception as e:  # a kernel kernelc cannot compile for sm_90a is recorded, not fatal
        rec["error"] = f"{type(e).__name__}: {str(e)[:200]}"
    finally:
        if old is None:
            os.environ.pop("KERNELC_CVT_LDMATRIX", None)
        else:
            os.environ["KERNELC_CVT_LDMATRIX"] = old
    with open(os.environ.get("KNOB_DIFF_OUT", "knob_diff.jsonl"), "a") as f:
        f.write(json.dumps(rec) + "\n")


def pytest_configure(config):
    from kernelc.runtime.jit import JITFunction
    orig = JITFunction._run_interpreter

    def run(self, values, grid3, num_warps, num_stages, options, warmup):
        _compile_both(self, values, num_warps, num_stages)
        return orig(self, values, grid3, num_warps, num_stages, options, warmup)
    JITFunction._run_interpreter = run
