"""Which kernels does CUPTI PC sampling see, depending on when their module was loaded?

    python scripts/pcs_diag.py            (on the GPU machine; one subprocess per scenario)

CUPTI counts samples of kernels it does not know as ``nonUsrKernelsTotalSamples`` and gives no PCs
for them.  Each scenario prints one JSON line: samples read as PCs vs. "non-user" samples, per
workload, and the time of a launch loop with PC sampling enabled-but-stopped (does keeping it
enabled cost anything?).
"""
import json
import os
import subprocess
import sys
import textwrap

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

PRELUDE = """
import json, time, torch
from profiler.pcsampling import PCSampler
from examples import workloads
def sample(run, n=2, **kw):
    s = PCSampler(period=10, **kw); ok = s.start()
    for _ in range(n): run()
    torch.cuda.synchronize(); s.close(); i = s.info()
    return {"ok": ok, "pcs": i.get("pcs_read"), "total": i.get("cupti_total_samples"),
            "non_user": i.get("non_user_samples"), "err": s.error}
def loop_us(run, n=200):
    run(); torch.cuda.synchronize(); t = time.perf_counter()
    for _ in range(n): run()
    torch.cuda.synchronize(); return round((time.perf_counter() - t) / n * 1e6, 2)
def session(mode, run, n=2, env=None):
    import os, profiler
    from profiler.format import read_profile
    os.environ.update(env or {})
    import tempfile; path = tempfile.mktemp(prefix="pcs_diag_")
    profiler.start(path, mode=mode)
    for _ in range(n): run()
    torch.cuda.synchronize(); p = profiler.finalize()[0]
    root, _ = read_profile(p)
    ks = [(n.name[:30], n.metrics.get("time (ns)"), (n.extra.get("pcsampling") or {}).get("samples", 0))
          for n, d in root.walk() if n.extra and n.extra.get("kind") == "kernel"]
    summ = (root.extra or {}).get("pcsampling") or {}
    return {"kernels": ks, "samples": summ.get("samples"), "error": summ.get("error") or summ.get("errors")}
out = {}
"""

SCENARIOS = {
    # the module of softmax is loaded before the first sampler of the process
    "first_sampler_after_load": """
        sm = workloads.kernelc_softmax(); sm()
        out["softmax"] = sample(sm)
    """,
    # a sampler came and went before softmax's module was loaded (the failing GPU tests)
    "module_loaded_between_samplers": """
        mm = workloads.kernelc_matmul(); mm()
        out["matmul_1"] = sample(mm)
        sm = workloads.kernelc_softmax(); sm()
        out["softmax_2"] = sample(sm)
        out["matmul_2"] = sample(mm)
    """,
    # the module is loaded while sampling runs
    "module_loaded_while_sampling": """
        mm = workloads.kernelc_matmul(); mm(); torch.cuda.synchronize()
        s = PCSampler(period=10); s.start()
        sm = workloads.kernelc_softmax(); sm(); sm(); tm = workloads.torch_matmul(); tm(); tm()
        torch.cuda.synchronize(); s.close(); i = s.info()
        out["mixed"] = {"pcs": i["pcs_read"], "total": i["cupti_total_samples"], "non_user": i["non_user_samples"],
                        "functions": sorted({c.function[:40] for c in s.table.by_launch().values()})}
    """,
    # PC sampling left enabled (stopped) while a module loads, then started again
    "enabled_but_stopped_across_load": """
        from profiler.pcsampling.cupti_pc import Collector, Cupti
        from profiler.pcsampling.sampler import current_context
        mm = workloads.kernelc_matmul(); mm(); torch.cuda.synchronize()
        base = {"matmul_us": loop_us(mm)}
        cupti = Cupti(); ctx = current_context()
        got = []
        c = Collector(cupti, ctx, period=10, sink=lambda cols, names: got.append(len(cols["pc"])))
        c.enable(); c.start(); mm(); torch.cuda.synchronize(); c.stop()
        first = c.stats.pcs_read
        base["matmul_us_enabled_stopped"] = loop_us(mm)
        sm = workloads.kernelc_softmax(); sm(); tm = workloads.torch_matmul(); tm(); torch.cuda.synchronize()
        c.start(); sm(); tm(); torch.cuda.synchronize(); c.stop()
        out["stats"] = {"first_pcs": first, "after_pcs": c.stats.pcs_read - first, "non_user": c.stats.non_user_samples,
                        "names": sorted(set(v[:40] for v in c.names.values()))}
        c.disable()
        base["matmul_us_disabled"] = loop_us(mm)
        out["timing"] = base
    """,
    # a kprof timing session came and went before sampling (the GPU test suite's order)
    "after_timing_session": """
        import profiler
        mm = workloads.kernelc_matmul(); mm(); torch.cuda.synchronize()
        profiler.start("/tmp/pcs_diag_timing"); mm(); torch.cuda.synchronize(); profiler.finalize()
        out["matmul_after_session"] = sample(mm)
        sm = workloads.kernelc_softmax(); sm()
        out["softmax_after_session"] = sample(sm)
    """,
    "after_timing_session_callbacks": """
        import os; os.environ["KPROF_CUPTI_CALLBACKS"] = "1"
        import profiler
        mm = workloads.kernelc_matmul(); mm(); torch.cuda.synchronize()
        profiler.start("/tmp/pcs_diag_timing2"); mm(); torch.cuda.synchronize(); profiler.finalize()
        out["matmul_after_session"] = sample(mm)
    """,
    # sampling first, then a timing session, then sampling again
    "sampler_session_sampler": """
        import profiler
        mm = workloads.kernelc_matmul(); mm(); torch.cuda.synchronize()
        out["first"] = sample(mm)
        profiler.start("/tmp/pcs_diag_timing3"); mm(); torch.cuda.synchronize(); profiler.finalize()
        out["second"] = sample(mm)
    """,
    # profiler.start(mode="pcsampling") as the GPU test does (timing + samples in one session)
    "session_mode": """
        mm = workloads.kernelc_matmul(); mm(); torch.cuda.synchronize()
        out["session"] = session("pcsampling:period=10", mm)
    """,
    "session_mode_callbacks": """
        mm = workloads.kernelc_matmul(); mm(); torch.cuda.synchronize()
        out["session"] = session("pcsampling:period=10", mm, env={"KPROF_CUPTI_CALLBACKS": "1"})
    """,
    # a sampling session, then a module loaded, then a sampler (the analyzer-then-sampler test order)
    "session_then_new_module": """
        mm = workloads.kernelc_matmul(); mm(); torch.cuda.synchronize()
        out["session"] = session("pcsampling:period=10", mm)
        sm = workloads.kernelc_softmax(); sm()
        out["softmax_after"] = sample(sm)
        out["session2"] = session("pcsampling:period=10", sm)
    """,
    "session_keep_then_new_module": """
        mm = workloads.kernelc_matmul(); mm(); torch.cuda.synchronize()
        out["session"] = session("pcsampling:period=10:keep=1", mm)
        sm = workloads.kernelc_softmax(); sm()
        out["softmax_after"] = sample(sm)
        out["session2"] = session("pcsampling:period=10:keep=1", sm)
        out["matmul_after"] = sample(mm)
    """,
}


def main() -> int:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([REPO, os.environ.get("PYTHONPATH", "")]))
    only = sys.argv[1:]
    for name, body in SCENARIOS.items():
        if only and name not in only:
            continue
        code = PRELUDE + textwrap.dedent(body) + "\nprint(json.dumps(out))\n"
        r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=240, env=env, cwd=REPO)
        last = r.stdout.strip().splitlines()[-1] if r.stdout.strip() else ""
        print(f"{name}: rc={r.returncode} {last}")
        if r.returncode:
            print(r.stderr[-2000:])
    return 0


if __name__ == "__main__":
    sys.exit(main())
