"""pytest plugin for run_liger.py (``-p liger_probe``): Liger's tests on kernelc, in the CPU interpreter,
with every kernel specialisation they launch also compiled down to SASS for sm_90a.

In each pytest process (xdist workers included) it installs the ``triton`` alias, then records
- each test's outcome (passed / failed / skipped / xfailed) and, for a failure, its last error lines;
- each distinct launch (kernel, argument types/alignment/constexprs, num_warps, num_stages): compiled once
  with the runtime's own offline path (``launcher.compile_offline``: what ``warmup`` does without a GPU,
  for the stand-in H100), keeping registers, spills, shared memory or the compile error.
Writes ``$LIGER_PROBE_OUT/probe-<pid>.json`` at the end of the session.
``LIGER_PROBE_PER_FUNCTION=K`` keeps the first K parametrisations of each test function (CPU time).
"""
from __future__ import annotations

import collections
import json
import os
import time

import kernelc.compat.pytest_plugin  # noqa: F401  (installs the alias before Liger is imported)
from kernelc.runtime import hooks

_tests = {}
_kernels = {}
_current = [None]


def _describe_key(key):
    out = []
    for part in key:
        out.append(repr(part) if not isinstance(part, tuple) else "/".join(map(str, part)))
    return ", ".join(out)


def _on_enter(rec):
    fn = rec.function
    if fn is None:
        return
    from kernelc.runtime.launcher import compile_offline, get_state
    values = dict(zip(fn.arg_names, rec._values))
    spec = get_state(fn)["spec"]
    try:
        key = spec.key(list(rec._values), list(rec._cmask))
    except Exception as e:   # an argument the specialiser rejects is itself a finding
        key = ("unkeyable", f"{type(e).__name__}: {e}")
    ident = (f"{fn.fn.__module__}.{fn.__name__}" if hasattr(fn, "fn") else fn.__name__, key, rec.num_warps,
             rec.num_stages)
    try:
        hash(ident)
    except TypeError:
        ident = (ident[0], repr(key), rec.num_warps, rec.num_stages)
    entry = _kernels.get(ident)
    if entry is None:
        entry = _kernels[ident] = {"kernel": ident[0], "spec": _describe_key(key) if isinstance(key, tuple) else key,
                                   "num_warps": rec.num_warps, "num_stages": rec.num_stages, "tests": []}
        t0 = time.perf_counter()
        try:
            ck = compile_offline(fn, values, rec.num_warps, rec.num_stages)
            entry.update(ok=True, n_regs=ck.n_regs, n_spills=ck.n_spills, shared=ck.shared,
                         sass_lines=ck.asm["sass"].count("\n"))
        except Exception as e:
            entry.update(ok=False, error=f"{type(e).__name__}: {str(e)[:1500]}")
        entry["compile_s"] = round(time.perf_counter() - t0, 3)
    if _current[0] and len(entry["tests"]) < 3 and _current[0] not in entry["tests"]:
        entry["tests"].append(_current[0])


_handle = hooks.register(enter=_on_enter)


def pytest_collection_modifyitems(session, config, items):
    k = int(os.environ.get("LIGER_PROBE_PER_FUNCTION", "0") or 0)
    if k <= 0:
        return
    seen = collections.Counter()
    keep = []
    for it in items:
        fkey = (str(it.fspath), getattr(it, "originalname", it.name))
        seen[fkey] += 1
        if seen[fkey] <= k:
            keep.append(it)
    items[:] = keep


def pytest_runtest_logstart(nodeid, location):
    _current[0] = nodeid


def pytest_runtest_logreport(report):
    t = _tests.setdefault(report.nodeid, {"outcome": "passed"})
    if report.when == "call" or report.outcome != "passed":
        if hasattr(report, "wasxfail"):
            t["outcome"] = "xfailed" if report.skipped else "xpassed"
        elif report.outcome != "passed" or report.when == "call":
            t["outcome"] = report.outcome if report.when == "call" or report.outcome == "skipped" else "error"
        if report.outcome == "failed":
            text = report.longreprtext or ""
            lines = [ln for ln in text.splitlines() if ln.startswith("E ")]
            t["why"] = "\n".join(lines[-8:])[:2000] or text[-1500:]
        elif report.outcome == "skipped" and isinstance(report.longrepr, tuple):
            t["why"] = str(report.longrepr[2])[:300]
    t["duration_s"] = round(t.get("duration_s", 0) + report.duration, 3)


def pytest_sessionfinish(session, exitstatus):
    out = os.environ.get("LIGER_PROBE_OUT")
    if not out:
        return
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, f"probe-{os.getpid()}.json"), "w") as f:
        json.dump({"tests": _tests, "kernels": list(_kernels.values())}, f, indent=1)
