"""Liger-Kernel's own tests on kernelc, on CPU: every test's outcome, and every kernel launch compiled to SASS.

    python3 bench/experiments/liger/run_liger.py --liger DIR [--files rms_norm,swiglu] [--per-function K]
        [-n WORKERS] [--timeout S] [--name liger_cpu]

``DIR`` is a Liger-Kernel checkout (src/ and test/; not part of this repository). The script runs
``pytest`` on ``DIR/test/transformers/test_<file>.py`` (default: every file whose kernels are Triton; the
cutedsl/cutile/cute backends and the whole-model tests are left out) with the ``liger_probe`` plugin
(this folder): the ``triton`` alias is installed in every pytest process, kernels run in kernelc's CPU
interpreter (no GPU here: Liger's ``infer_device()`` is ``cpu``), and each distinct launch is compiled
for sm_90a by the runtime's offline path. ``--per-function K`` keeps the first K parametrisations of each
test function (the interpreter is slow). Writes ``results/<name>.json`` and ``results/<name>.md``:
per test file: passed / failed / skipped; per failure: why, and the Triton API kernelc lacks when that is
the cause; per kernel: specialisations compiled / failed, registers, spills, shared memory.
"""
from __future__ import annotations

import argparse
import collections
import glob
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))
# not Triton (other DSL backends) or whole-model / trainer tests that load transformers models
NOT_TRITON = re.compile(r"cutedsl|cutile|cute_|_cute|ascend")
WHOLE_MODEL = {"monkey_patch", "auto_model", "transformers", "trainer_integration", "flex_attention"}
MISSING_API = re.compile(r"(triton[\w.]*) is not supported by kernelc")


def default_files(liger):
    out = []
    for p in sorted(glob.glob(os.path.join(liger, "test", "transformers", "test_*.py"))):
        name = os.path.basename(p)[5:-3]
        if NOT_TRITON.search(name) or name in WHOLE_MODEL:
            continue
        out.append(name)
    return out


def classify(test):
    """(category, detail) of a failed test."""
    why = test.get("why", "")
    m = MISSING_API.search(why)
    if m:
        return "unsupported API", m.group(1)
    if "CompilationError" in why or "compil" in why.lower() and "kernelc" in why:
        return "compile error", why.splitlines()[-1] if why else ""
    if "AssertionError" in why or "Mismatched elements" in why or "not close" in why:
        return "wrong result", why.splitlines()[-1] if why else ""
    return "error", why.splitlines()[-1] if why else ""


def merge(probe_dir):
    tests, kernels = {}, {}
    rank = {"failed": 5, "error": 4, "xpassed": 3, "passed": 2, "xfailed": 1, "skipped": 0}
    for p in sorted(glob.glob(os.path.join(probe_dir, "probe-*.json"))):
        d = json.load(open(p))
        for nid, t in d["tests"].items():
            old = tests.get(nid)
            # the xdist controller and the worker both see a report; keep the one that says the most
            if old is None or rank.get(t["outcome"], 0) > rank.get(old["outcome"], 0) or ("why" in t and "why" not in old):
                tests[nid] = t
        for k in d["kernels"]:
            key = (k["kernel"], k["spec"], k["num_warps"], k["num_stages"])
            if key not in kernels:
                kernels[key] = k
            else:
                kernels[key]["tests"] = sorted(set(kernels[key]["tests"]) | set(k["tests"]))[:3]
    return tests, list(kernels.values())


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--liger", required=True, help="Liger-Kernel checkout (src/, test/)")
    ap.add_argument("--files", help="comma-separated test file stems (rms_norm,swiglu,...); default: all Triton ones")
    ap.add_argument("--per-function", type=int, default=0, help="first K parametrisations per test function (0: all)")
    ap.add_argument("-n", "--workers", type=int, default=1, help="pytest-xdist workers")
    ap.add_argument("--timeout", type=int, default=3000, help="seconds for the pytest run")
    ap.add_argument("--name", default="liger_cpu", help="results/<name>.json and .md")
    ap.add_argument("-k", dest="keyword", help="pytest -k expression")
    a = ap.parse_args(argv)
    liger = os.path.abspath(a.liger)
    files = a.files.split(",") if a.files else default_files(liger)
    paths = [os.path.join("test", "transformers", f"test_{f}.py") for f in files]
    probe = tempfile.mkdtemp(prefix="liger_probe_")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([ROOT, HERE, os.path.join(liger, "src"), liger]),
               LIGER_PROBE_OUT=probe, LIGER_PROBE_PER_FUNCTION=str(a.per_function))
    cmd = [sys.executable, "-m", "pytest", "-p", "liger_probe", "-p", "no:cacheprovider", "-q", "-rf",
           "--continue-on-collection-errors", *paths]
    if a.workers > 1:
        cmd[3:3] = ["-n", str(a.workers)]
    if a.keyword:
        cmd += ["-k", a.keyword]
    t0 = time.time()
    try:
        r = subprocess.run(cmd, cwd=liger, env=env, capture_output=True, text=True, timeout=a.timeout)
        tail, rc = r.stdout[-6000:] + r.stderr[-2000:], r.returncode
    except subprocess.TimeoutExpired as e:
        tail, rc = f"timed out after {a.timeout} s\n" + ((e.stdout or b"")[-4000:].decode(errors="replace")
                                                          if isinstance(e.stdout, bytes) else (e.stdout or "")[-4000:]), None
    wall = time.time() - t0
    print(tail[-3000:])
    tests, kernels = merge(probe)
    shutil.rmtree(probe, ignore_errors=True)
    # collection errors never reach the probe: take them from pytest's summary
    collect_errors = re.findall(r"^ERROR (test/\S+) - (.*)$", tail, re.M)

    per_file = collections.OrderedDict((f, collections.Counter()) for f in files)
    failures = []
    for nid, t in sorted(tests.items()):
        stem = os.path.basename(nid.split("::")[0])[5:-3]
        per_file.setdefault(stem, collections.Counter())[t["outcome"]] += 1
        if t["outcome"] in ("failed", "error"):
            cat, detail = classify(t)
            failures.append({"test": nid, "category": cat, "detail": detail, "why": t.get("why", "")})
    per_kernel = collections.OrderedDict()
    for k in sorted(kernels, key=lambda k: k["kernel"]):
        s = per_kernel.setdefault(k["kernel"], {"specialisations": 0, "compiled": 0, "errors": [], "max_regs": 0,
                                                "spills": 0, "max_shared": 0, "compile_s": 0.0})
        s["specialisations"] += 1
        s["compile_s"] = round(s["compile_s"] + k.get("compile_s", 0), 2)
        if k.get("ok"):
            s["compiled"] += 1
            s["max_regs"] = max(s["max_regs"], k["n_regs"])
            s["spills"] = max(s["spills"], k["n_spills"])
            s["max_shared"] = max(s["max_shared"], k["shared"])
        elif len(s["errors"]) < 3:
            s["errors"].append({"spec": k["spec"], "error": k.get("error", "")})
    result = {"liger": liger, "command": " ".join(cmd), "per_function": a.per_function, "wall_s": round(wall, 1),
              "pytest_rc": rc, "collect_errors": [{"file": f, "error": e} for f, e in collect_errors],
              "per_file": {f: dict(c) for f, c in per_file.items()}, "failures": failures,
              "kernels": per_kernel, "specialisations": kernels, "tests": tests}
    os.makedirs(os.path.join(HERE, "results"), exist_ok=True)
    sys.path.insert(0, ROOT)
    from bench import common
    common.write_results(a.name, [{"file": f, **c} for f, c in result["per_file"].items()], result,
                         results_dir=os.path.join(HERE, "results"))
    with open(os.path.join(HERE, "results", f"{a.name}.md"), "w") as f:
        tot = collections.Counter()
        for c in per_file.values():
            tot.update(c)
        f.write(f"# Liger-Kernel tests on kernelc, CPU interpreter ({time.strftime('%Y-%m-%d', time.gmtime())})\n\n"
                f"`{' '.join(cmd[2:])}` (per function: {a.per_function or 'all'}), {wall:.0f} s, "
                f"total: {dict(tot)}\n\n| test file | passed | failed | error | skipped | xfailed |\n"
                "| --- | ---: | ---: | ---: | ---: | ---: |\n")
        for name, c in per_file.items():
            f.write(f"| {name} | {c['passed']} | {c['failed']} | {c['error']} | {c['skipped']} | {c['xfailed']} |\n")
        if collect_errors:
            f.write("\nCollection errors:\n\n" + "".join(f"- {p}: {e}\n" for p, e in collect_errors))
        f.write("\n## Failures\n\n")
        for x in failures:
            f.write(f"- `{x['test']}`: {x['category']}: {x['detail'][:300]}\n")
        f.write("\n## Kernels compiled for sm_90a (each launch's specialisation)\n\n"
                "| kernel | specialisations | compiled | max regs | spills | max shared B | compile s | first error |\n"
                "| --- | ---: | ---: | ---: | ---: | ---: | ---: | --- |\n")
        for name, s in per_kernel.items():
            err = s["errors"][0]["error"].splitlines()[0][:200] if s["errors"] else ""
            f.write(f"| {name} | {s['specialisations']} | {s['compiled']} | {s['max_regs']} | {s['spills']} | "
                    f"{s['max_shared']} | {s['compile_s']} | {err} |\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
