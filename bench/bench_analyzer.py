"""kprof-analyze on the GPU: each planted kernel must get its diagnosis, its suggested configs are
timed against the original, and the well-tuned example kernels must get no false alarm.

    python bench/bench_analyzer.py [--no-profiler] [--no-sampling] [--no-verify] [names...]

Per planted kernel (tests/analyzer/planted.py):

1. launch it once (compile) and keep the kernelc launch record (compiled kernel, cache key, grid);
2. profile a few launches: under a kprof session (``profiler.start(..., mode="pcsampling")`` when the
   profiler has it, else timing only); without a usable profiler, a profile is written here from the
   launch record and CUDA-event timing (static analysis + timing), so a missing profiler feature
   degrades the evidence, never the run;
3. run the analyzer on that profile and check the expected diagnostic is among its findings;
4. time the kernel (kernelc.testing.do_bench, median) with the profiled config and with each
   suggested config (direct launch), check the output against a torch reference, report the best
   speedup.

The well-tuned kernels (autotuned matmul, softmax, vector add from examples/kernels) go through
steps 1-3 and count a false alarm for every warning or error.  One planted kernel also goes
through ``kprof-analyze --verify`` (a subprocess per config with KERNELC_OVERRIDE).

Results: a table (kernel, expected, found, speedup, ...) on stdout and in bench/results/bench_analyzer.json
(and $OUT/results/ when $OUT is set).  The whole run stays under ~240 s (later timings are skipped past
the budget).
"""
from __future__ import annotations

import argparse
import glob
import inspect
import json
import os
import sys
import tempfile
import time
import traceback

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

import torch  # noqa: E402

from bench.common import write_results  # noqa: E402

BUDGET_S = 240.0
T0 = time.perf_counter()


def elapsed() -> float:
    return time.perf_counter() - T0


def log(msg: str) -> None:
    print(f"[{elapsed():6.1f}s] {msg}", flush=True)


# -------------------------------------------------------------------------------------------------
# launch records and profiles


class Capture:
    """Keeps the last kernelc launch record of a kernel (hooks)."""

    def __init__(self, name: str):
        from kernelc.runtime import hooks
        self.name, self.rec, self._hooks = name, None, hooks
        self.handle = hooks.register(enter=self._enter)

    def _enter(self, rec):
        if rec.name == self.name and rec.backend == "cuda":
            self.rec = rec

    def close(self):
        self._hooks.unregister(self.handle)


def capture(name, fn):
    cap = Capture(name)
    try:
        fn()
        torch.cuda.synchronize()
    finally:
        cap.close()
    return cap.rec


def _jsonable(v):
    try:
        json.dumps(v)
        return True
    except (TypeError, ValueError):
        return False


def kernel_extra(rec) -> dict:
    """The kprof kernel record for a launch, as the profiler writes it (plus the launch's scalars)."""
    ck = rec.compiled
    fn = rec.function
    extra = {"kind": "kernel", "kernel": rec.name, "cache_key": rec.cache_key or getattr(ck, "cache_key", None),
             "signature": dict(ck.signature), "num_warps": rec.num_warps, "num_stages": rec.num_stages,
             "constexprs": {k: v for k, v in rec.constexprs.items() if _jsonable(v)},
             "target": ck.target.arch, "grid": list(rec.grid), "n_regs": ck.n_regs, "n_spills": ck.n_spills,
             "shared": ck.shared}
    try:
        lines, first = inspect.getsourcelines(fn.fn)
        extra["source"] = {"file": os.path.abspath(fn.fn.__code__.co_filename), "first_line": first,
                           "lines": [ln.rstrip("\n") for ln in lines]}
    except Exception:
        pass
    extra["args"] = [{"name": a.name, "kind": a.kind, "value": a.value} for a in rec.args
                     if a.kind in ("int", "float") and _jsonable(a.value)]
    return extra


def device_info() -> dict:
    from profiler.format import device_entry
    p = torch.cuda.get_device_properties(0)
    clock = getattr(p, "clock_rate", 0) or 1_980_000
    mem_clock = getattr(p, "memory_clock_rate", 0) or 2_619_000
    bus = getattr(p, "memory_bus_width", 0) or 5120
    return {"CUDA": {"0": device_entry(f"{p.major}{p.minor}", p.multi_processor_count, clock, mem_clock, bus)}}


def synthetic_profile(path, rec, time_ms: float, count: int) -> str:
    """A kprof-format profile of one kernel from its launch record and a measured time."""
    from profiler.format import ProfileNode, write_profile
    root = ProfileNode("ROOT")
    node = root.child(rec.display_name)
    node.add_metrics({"time (ns)": int(time_ms * 1e6 * count), "count": count, "device_id": "0",
                      "device_type": "CUDA"})
    node.extra = kernel_extra(rec)
    write_profile(path, root, device_info())
    return path


def enrich_profile(path, kernel: str, extra: dict) -> bool:
    """Fill in missing kernel-record keys of the kernel's frames (a profiler in progress may not
    write all of them); True if the profile has the kernel."""
    from profiler.format import read_profile, write_profile
    root, dinfo = read_profile(path)
    found = False
    for node, depth in root.walk():
        if depth == 0 or node.frame_type == "line":
            continue
        ident = (node.extra or {}).get("kernel") or node.name.split(" [", 1)[0]
        if ident != kernel:
            continue
        if "time (ns)" not in node.metrics and not (node.extra or {}).get("kind"):
            continue
        found = True
        merged = dict(extra)
        merged.update(node.extra or {})
        node.extra = merged
    if found:
        write_profile(path, root, dinfo or device_info())
    return found


def kprof_profile(name: str, run, sampling: bool):
    """Profile ``run()`` under a kprof session; returns (path, mode) or (None, reason)."""
    try:
        import profiler
    except Exception as e:
        return None, f"no profiler ({type(e).__name__})"
    if not hasattr(profiler, "start") or not hasattr(profiler, "finalize"):
        return None, "profiler.start not available"
    d = tempfile.mkdtemp(prefix=f"kprof-{name}-")
    base = os.path.join(d, name)
    attempts = ([{"mode": "pcsampling", "hook": "kernelc"}, {"mode": "pcsampling"}] if sampling else []) + \
        [{"hook": "kernelc"}, {}]
    tried_modes = set()
    for kw in attempts:
        mode = kw.get("mode") or "timing"
        if mode in tried_modes:
            continue
        try:
            sid = profiler.start(base, **kw)
        except TypeError:
            continue            # an older signature: try fewer keywords
        except Exception as e:
            log(f"  profiler.start({kw}) failed: {type(e).__name__}: {e}")
            tried_modes.add(mode)
            continue
        tried_modes.add(mode)
        written = []
        try:
            run()
            torch.cuda.synchronize()
        except Exception as e:
            log(f"  workload under the profiler failed: {type(e).__name__}: {e}")
        finally:
            try:
                written = profiler.finalize(sid) if isinstance(sid, int) else profiler.finalize()
            except Exception as e:
                log(f"  profiler.finalize failed: {type(e).__name__}: {e}")
        files = sorted(set([p for p in (written or []) if str(p).endswith(".hatchet") and os.path.exists(p)]
                           + glob.glob(os.path.join(d, "**", "*.hatchet"), recursive=True)
                           + glob.glob(base + "*.hatchet")))
        if files:
            return files[0], mode
        log(f"  no profile written by kprof (mode={mode})")
    return None, "kprof wrote no profile"


def bench_ms(fn) -> float:
    from kernelc.testing import do_bench
    return do_bench(fn, warmup=10, rep=50, return_mode="median")


def make_profile(name: str, kernel: str, rec, run_once, args_ns) -> tuple:
    """(profile path, how it was made): kprof over 3 launches, else a profile from the launch record
    and the measured time."""
    path = None
    how = "synthetic (launch record + CUDA events)"
    if not args_ns.no_profiler:
        path, mode = kprof_profile(name, lambda: [run_once() for _ in range(3)], sampling=not args_ns.no_sampling)
        if path:
            if enrich_profile(path, kernel, kernel_extra(rec)):
                how = f"kprof ({mode})"
            else:
                log(f"  the kprof profile has no frame for {kernel}; falling back")
                path = None
        else:
            log(f"  kprof: {mode}")
    if path is None:
        ms = bench_ms(run_once)
        path = synthetic_profile(os.path.join(tempfile.mkdtemp(prefix="kprof-synth-"), f"{name}.hatchet"), rec, ms, 10)
    return path, how


def analyze(path: str, kernel: str):
    import re
    import analyzer
    rep = analyzer.analyze(path, kernel=f"^{re.escape(kernel)}$", top=1, validate=True)
    return rep.kernels[0] if rep.kernels else None


def close(out, ref, tol) -> bool:
    return bool(torch.allclose(out.float(), ref.float(), atol=tol, rtol=tol))


# -------------------------------------------------------------------------------------------------
# planted kernels


def run_planted(case, args_ns, rows, verify_case):
    name = case.name
    log(f"{name}: expected {case.expected}")
    row = {"kernel": name, "expected": case.expected, "found": "no", "findings": "", "basis": "", "samples": 0,
           "profile": "", "time_us": None, "best_config": "", "best_time_us": None, "speedup": None,
           "correct": None, "note": ""}
    rows.append(row)
    if elapsed() > BUDGET_S + 20:
        row["note"] = "skipped (time budget; run this case alone)"
        return
    try:
        args = case.make_args("cuda")
        run = lambda: case.launch(args)  # noqa: E731
        rec = capture(case.kernel_name, run)
        if rec is None:
            row["note"] = "no kernelc launch record (did it run in the interpreter?)"
            return
        if case.reference is not None:
            row["correct"] = close(args[case.output_index], case.reference(args), case.tolerance)
        path, how = make_profile(name, case.kernel_name, rec, run, args_ns)
        row["profile"] = how
        kr = analyze(path, case.kernel_name)
        if kr is None:
            row["note"] = "analyzer found no kernel in the profile"
            return
        ids = kr.ids()
        row["findings"] = ",".join(dict.fromkeys(ids))
        row["samples"] = int(kr.facts.total_samples)
        hit = [d for d in kr.findings if d.id == case.expected]
        row["found"] = "yes" if hit else "no"
        if hit:
            row["basis"] = hit[0].basis
            log(f"  found: {hit[0].severity} {hit[0].message[:150]}")
        else:
            log(f"  NOT found; findings: {ids}")
        if elapsed() > BUDGET_S:
            row["note"] = "timing skipped (time budget)"
            return
        t0 = bench_ms(run)
        row["time_us"] = round(t0 * 1e3, 2)
        best = None
        for s in kr.suggestions:
            if elapsed() > BUDGET_S:
                row["note"] = "some configs not timed (time budget)"
                break
            try:
                cfg = dict(s.config)
                out_run = lambda: case.launch(args, **cfg)  # noqa: E731
                out_run()
                torch.cuda.synchronize()
                ok = close(args[case.output_index], case.reference(args), case.tolerance) \
                    if case.reference is not None else None
                t = bench_ms(out_run)
                label = ",".join(f"{k}={v}" for k, v in s.changes.items())
                log(f"  config {label}: {t * 1e3:.1f} us (profiled {t0 * 1e3:.1f} us) -> {t0 / t:.2f}x"
                    f"{'' if ok in (True, None) else ' WRONG RESULT'}")
                if ok is False:
                    continue
                if best is None or t < best[0]:
                    best = (t, label)
            except Exception as e:
                log(f"  config {s.changes} failed: {type(e).__name__}: {e}")
        if best:
            row["best_config"] = best[1]
            row["best_time_us"] = round(best[0] * 1e3, 2)
            row["speedup"] = round(t0 / best[0], 3)
        elif not kr.suggestions:
            row["note"] = row["note"] or ("code fix (no config)" if not case.config_fix else "no suggestion")
        if verify_case == name and not args_ns.no_verify and kr.suggestions and elapsed() < BUDGET_S - 60:
            row["verify"] = verify_demo(case, kr)
    except Exception as e:
        row["note"] = f"{type(e).__name__}: {e}"
        traceback.print_exc()


VERIFY_SCRIPT = """\
import sys
sys.path.insert(0, {root!r})
import torch
from tests.analyzer.planted import BY_NAME
case = BY_NAME[{name!r}]
args = case.make_args("cuda")
for _ in range(5):
    case.kernel[case.grid](*args, **dict(case.constexprs, num_warps=case.num_warps, num_stages=case.num_stages))
torch.cuda.synchronize()
"""


def verify_demo(case, kr):
    """``kprof-analyze --verify``'s logic on a generated script: KERNELC_OVERRIDE per config, subprocess
    timing (kprof if installed, else torch.profiler / CUDA events)."""
    from analyzer.verify import verify
    d = tempfile.mkdtemp(prefix="kprof-verify-")
    script = os.path.join(d, f"run_{case.name}.py")
    with open(script, "w") as f:
        f.write(VERIFY_SCRIPT.format(root=ROOT, name=case.name))
    log(f"  --verify with {len(kr.suggestions[:2])} config(s) in subprocesses ...")
    rows = verify(script, [], case.kernel_name, kr.suggestions[:2])
    for r in rows:
        t = r["time_per_launch_ns"]
        log(f"    {r['label']:<28} {('%.1f us' % (t / 1e3)) if t else '-':>10}  "
            f"{('%.2fx' % r['speedup']) if r['speedup'] else '-':>6}  {r['status']} ({r['method']})")
    return [{k: r[k] for k in ("label", "time_per_launch_ns", "speedup", "status", "method")} for r in rows]


# -------------------------------------------------------------------------------------------------
# well-tuned kernels


def well_tuned_cases():
    from examples.kernels import matmul as MM, softmax as SM, vector_add as VA

    def mm():
        a = torch.randn(4096, 4096, device="cuda", dtype=torch.float16)
        b = torch.randn(4096, 4096, device="cuda", dtype=torch.float16)
        MM.matmul(a, b)          # autotune first
        torch.cuda.synchronize()
        return "matmul_kernel", lambda: MM.matmul(a, b)

    def sm(M, N):
        def make():
            x = torch.randn(M, N, device="cuda")
            return "softmax_kernel", lambda: SM.softmax(x)
        return make

    def va():
        x = torch.rand(1 << 28, device="cuda")
        y = torch.rand(1 << 28, device="cuda")
        return "add_kernel", lambda: VA.add(x, y)

    return [("matmul 4096^3 fp16 (autotuned)", mm), ("softmax 4096x4096", sm(4096, 4096)),
            ("softmax 8192x1024", sm(8192, 1024)), ("vector add 2^28", va)]


def run_well_tuned(label, make, args_ns, rows):
    log(f"{label}: expected no warning/error")
    row = {"kernel": label, "expected": "none", "found": "", "findings": "", "basis": "", "samples": 0,
           "profile": "", "time_us": None, "best_config": "", "best_time_us": None, "speedup": None,
           "correct": None, "note": ""}
    rows.append(row)
    if elapsed() > BUDGET_S + 20:
        row["note"] = "skipped (time budget)"
        return
    try:
        kernel, run = make()
        rec = capture(kernel, run)
        if rec is None:
            row["note"] = "no kernelc launch record"
            return
        path, how = make_profile(kernel, kernel, rec, run, args_ns)
        row["profile"] = how
        kr = analyze(path, kernel)
        ids = kr.ids() if kr else []
        row["findings"] = ",".join(dict.fromkeys(ids))
        row["samples"] = int(kr.facts.total_samples) if kr else 0
        row["found"] = "none" if not ids else "FALSE ALARM"
        for d in (kr.findings if kr else []):
            log(f"  false alarm: {d.severity} {d.id}: {d.message[:160]}")
        infos = [d.id for d in (kr.diagnostics if kr else []) if not d.is_finding]
        if infos:
            row["note"] = "info: " + ",".join(dict.fromkeys(infos))
        row["time_us"] = round(bench_ms(run) * 1e3, 2) if elapsed() < BUDGET_S else None
    except Exception as e:
        row["note"] = f"{type(e).__name__}: {e}"
        traceback.print_exc()


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("names", nargs="*", help="planted case names (default: all, then the well-tuned kernels)")
    ap.add_argument("--no-profiler", action="store_true", help="skip kprof; profile from launch records + timing")
    ap.add_argument("--no-sampling", action="store_true", help="kprof without PC sampling")
    ap.add_argument("--no-verify", action="store_true", help="skip the --verify subprocess demo")
    ap.add_argument("--no-well-tuned", action="store_true")
    ap.add_argument("--budget", type=float, default=BUDGET_S, help="seconds after which timings are skipped")
    args = ap.parse_args(argv)
    globals()["BUDGET_S"] = args.budget
    if not torch.cuda.is_available():
        print("bench_analyzer: needs a CUDA GPU", file=sys.stderr)
        return 0
    os.environ.pop("KERNELC_OVERRIDE", None)
    from tests.analyzer.planted import PLANTED
    cases = [c for c in PLANTED if not args.names or c.name in args.names]
    rows = []
    for c in cases:
        run_planted(c, args, rows, verify_case="unpipelined_dot")
    if not args.no_well_tuned and not args.names:
        for label, make in well_tuned_cases():
            run_well_tuned(label, make, args, rows)
    planted = [r for r in rows if r["expected"] != "none"]
    tuned = [r for r in rows if r["expected"] == "none"]
    found = sum(r["found"] == "yes" for r in planted)
    faster = sum(1 for r in planted if (r["speedup"] or 0) > 1.05)
    alarms = sum(r["found"] == "FALSE ALARM" for r in tuned)
    summary = {"planted_found": f"{found}/{len(planted)}", "planted_with_speedup": faster,
               "false_alarms": f"{alarms}/{len(tuned)}", "seconds": round(elapsed(), 1)}
    table = [{k: r[k] for k in ("kernel", "expected", "found", "speedup", "time_us", "best_time_us", "best_config",
                                "basis", "samples", "profile", "findings", "note")} for r in rows]
    write_results("bench_analyzer", table, extra={"summary": summary,
                                                  "verify": [r.get("verify") for r in rows if r.get("verify")]})
    print(json.dumps(summary))
    return 0


if __name__ == "__main__":
    sys.exit(main())
