"""Issue 23: why lazy launch API records lost the scopes' kernels when the profile started before CUDA was up.

Raw CUPTI (cupti-python, no kprof), one fresh process per variant.  Each variant turns the launch ids' driver-API
activity records (``activity_enable_driver_api``, the ids kprof's ``launch_cbids`` names) on and off around the
creation of torch's CUDA context, then launches 64 adds with them off (phase A) and 64 after turning them on
(phase B), and counts the DRIVER records of each phase (and the kernel records, to see that the kernels were all
recorded).  Variants:

  ctx_first         context, on, off, A, on, B               (CUDA up at the start: what worked on the H200)
  off_before_ctx    on, off, context, A, on, B               (lazy started before CUDA: what failed)
  init_off_before_ctx  cuInit, on, off, context, A, on, B   (the driver initialised first: cuInit or the context?)
  never_before_ctx  context created with the ids never on,  A, on, B
  on_through_ctx    on, context, off, A, on, B               (candidate fix: off only once a context exists)
  off_in_ctx_cb     on, off inside CONTEXT_CREATED's callback, A, on, B
  on_in_ctx_cb      on, off, on inside CONTEXT_CREATED's callback, off after it, A, on, B   (a later context)

Each raw variant also runs with ``_nocb`` appended: no CONTEXT_CREATED callback enabled (kprof before session 22
enabled only its graph-node resource callbacks).

``--kprof``: kprof itself, as ``tests/profiler/test_gpu_profiler.py::test_cli_train_example_on_gpu`` runs it
(``python -m kprof -n train examples/train.py --steps 3 --warmup 1``: the profile starts before CUDA is up), under
patched backends (one process each): ``s21`` the launch API records off from the start with no CONTEXT_CREATED
callback (session 21's lazy path that lost the scopes' kernels), ``s21_cb`` the same with the callback enabled but
doing nothing, ``s21_arm`` the same with the callback turning them on (session 22 R2; those two are gone from
the list), ``s21_cupticlk`` s21 with the scope timelines on CUPTI's own clock (``KPROF_CUPTI_TIMELINE_CLK=cupti``),
``branch`` this branch unpatched (on until the first context, off in its callback).  Each also dumps what its
backend had at the end (API records joined, the timelines' clock offsets, CUPTI's clock against REALTIME then).  Per variant: the kernelc kernels
under ``train_step``, the kernels under it and at the root.

Usage: python3 lazy_before_cuda.py [--kprof] [--out FILE.json]   (GPU; ~5 s a raw variant, ~12 s a kprof one)."""
import json
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))
KPROF_VARIANTS = ["s21", "s21_cupticlk", "branch"]

WRAP = r"""
import os, runpy, sys
variant = sys.argv.pop(1)
sys.path.insert(0, os.environ["LBC_ROOT"])
if variant.endswith("_cupticlk"):
    os.environ["KPROF_CUPTI_TIMELINE_CLK"] = "cupti"   # scope timelines on CUPTI's own clock
from profiler.backends import cupti as B
import json, time
_stop = B.CuptiBackend.stop
def stop(self):
    # what the backend had when the run ended: the API records joined, the clock offsets the timelines were mapped
    # through (start, joins), CUPTI's clock against REALTIME now (CUDA up)
    try:
        d = {"api_records": len(self.api), "tl_offsets": self.tl_offsets, "tl_clock": repr(self.tl_clock),
             "offset_now_ns": B.clock_offset(self.clock, time.time_ns)[1], "armed_at": self.armed_at,
             "api_wanted": self.api_wanted, "api_on": self.api_on, "skipped": self.skipped, "errors": self.errors,
             "stats": self.stats()}
        json.dump(d, open(os.environ["LBC_DUMP"], "w"), default=str)
    except Exception as e:
        open(os.environ["LBC_DUMP"], "w").write(json.dumps({"dump_error": repr(e)}))
    return _stop(self)
B.CuptiBackend.stop = stop
if variant.startswith("s21"):
    B._cuda_initialized = lambda: True          # session 21's lazy: records off at the start, CUDA up or not
    if variant == "s21":
        _init = B.CuptiBackend.__init__
        def init(self, *a, **k):
            _init(self, *a, **k)
            self.CONTEXT_CREATED = -1               # no CONTEXT_CREATED callback, as in session 21
        B.CuptiBackend.__init__ = init
    elif variant == "s21_cb":
        B.CuptiBackend._context_created = lambda self: None
sys.argv = ["kprof"] + sys.argv[1:]
runpy.run_module("kprof", run_name="__main__")
"""


def kprof_variant(variant, tmp):
    from profiler.format import read_profile
    d = os.path.join(tmp, variant)
    env = dict(os.environ, LBC_ROOT=ROOT, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""),
               LBC_DUMP=os.path.join(d, "backend.json"))
    env.pop("KPROF_BACKEND", None)
    env.pop("KERNELC_INTERPRET", None)
    os.makedirs(d, exist_ok=True)
    t0 = time.time()
    r = subprocess.run([sys.executable, "-c", WRAP, variant, "-n", "train", os.path.join(ROOT, "examples", "train.py"),
                        "--steps", "3", "--warmup", "1"], cwd=d, env=env, capture_output=True, text=True, timeout=300)
    out = {"variant": variant, "rc": r.returncode, "s": round(time.time() - t0, 1)}
    if r.returncode != 0:
        out["stderr"] = r.stderr[-800:]
        return out
    root, _ = read_profile(os.path.join(d, "train.hatchet"))

    def kernels(node):
        return [n for n, _ in node.walk() if "time (ns)" in n.metrics and n.metrics.get("device_type") == "CUDA"]
    step = next((c for c in root.children if c.name == "train_step"), None)
    ks = kernels(step) if step is not None else []
    out["kernelc_under_train_step"] = sorted({k.extra["kernel"] for k in ks if k.extra and k.extra.get("kind") == "kernel"})
    out["kernels_under_train_step"] = sum(k.metrics.get("count", 0) for k in ks)
    out["kernels_at_root"] = sum(c.metrics.get("count", 0) for c in root.children
                                 if c.metrics.get("device_type") == "CUDA")
    out["stderr_tail"] = r.stderr[-300:]
    try:
        out["backend"] = json.load(open(os.path.join(d, "backend.json")))
    except Exception as e:
        out["backend"] = repr(e)
    return out


VARIANTS = ["ctx_first", "off_before_ctx", "init_off_before_ctx", "never_before_ctx", "on_through_ctx", "off_in_ctx_cb", "on_in_ctx_cb"]
N = 64


def child(variant):
    from cupti import cupti
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", ".."))
    from profiler.backends.cupti import launch_cbids
    import torch
    recs = []

    def requested():
        return 8 << 20, 0

    def completed(activities):
        for a in activities:
            k = int(a.kind)
            if k == int(cupti.ActivityKind.DRIVER):
                recs.append(("api", int(getattr(a, "cbid", -1)), int(a.start), int(a.correlation_id)))
            elif k == int(cupti.ActivityKind.CONCURRENT_KERNEL):
                recs.append(("kernel", 0, int(a.start), int(a.correlation_id)))

    ids = launch_cbids(cupti)
    launch_ids = {int(getattr(cupti.DriverApiTraceCbid, n)) for n in ("cuLaunchKernel", "cuLaunchKernelEx")}

    def api(on):
        for c in ids:
            try:
                cupti.activity_enable_driver_api(c, on)
            except Exception:
                pass

    events = []
    RES = int(cupti.CallbackDomain.RESOURCE)
    CREATED = int(cupti.CallbackIdResource.CONTEXT_CREATED)

    def cb(userdata, domain, cbid, data):
        if int(domain) == RES and int(cbid) == CREATED:
            events.append(("ctx_created", time.perf_counter_ns()))
            if variant == "off_in_ctx_cb":
                api(0)
            elif variant == "on_in_ctx_cb":
                api(1)

    offs = {"subscribe": cupti.get_timestamp() - time.time_ns()}
    sub = cupti.subscribe(cb, None)
    offs["subscribed"] = cupti.get_timestamp() - time.time_ns()
    nocb = variant.endswith("_nocb")
    variant = variant[:-5] if nocb else variant
    if not nocb:
        cupti.enable_callback(1, sub, RES, CREATED)
    cupti.activity_register_callbacks(requested, completed)
    cupti.activity_enable(cupti.ActivityKind.CONCURRENT_KERNEL)

    def ctx():
        x = torch.zeros(1 << 10, device="cuda")
        torch.cuda.synchronize()
        return x

    if variant == "ctx_first":
        x = ctx(); api(1); api(0)
    elif variant == "off_before_ctx":
        api(1); api(0); x = ctx()
    elif variant == "init_off_before_ctx":
        from cuda.bindings import driver as drv
        drv.cuInit(0); api(1); api(0); x = ctx()
    elif variant == "never_before_ctx":
        x = ctx()
    elif variant == "on_through_ctx":
        api(1); x = ctx(); api(0)
    elif variant == "off_in_ctx_cb":
        api(1); x = ctx()
    elif variant == "on_in_ctx_cb":
        api(1); api(0); x = ctx(); api(0)
    torch.cuda.synchronize()
    offs["context"] = cupti.get_timestamp() - time.time_ns()
    t_a = cupti.get_timestamp()
    for _ in range(N):
        x.add_(1)
    torch.cuda.synchronize()
    api(1)
    t_b = cupti.get_timestamp()
    for _ in range(N):
        x.add_(1)
    torch.cuda.synchronize()
    t_end = cupti.get_timestamp()
    cupti.activity_flush_all(1)
    offs["end"] = cupti.get_timestamp() - time.time_ns()
    out = {"variant": variant + ("_nocb" if nocb else ""), "ctx_created_callbacks": len(events),
           "cupti_minus_realtime_ns": offs}
    for name, lo, hi in (("A", t_a, t_b), ("B", t_b, t_end)):
        out[name + "_api_launch"] = sum(1 for r in recs if r[0] == "api" and (r[1] in launch_ids or r[1] < 0) and lo <= r[2] < hi)
        out[name + "_kernels"] = sum(1 for r in recs if r[0] == "kernel" and lo <= r[2] < hi)
    print("RESULT " + json.dumps(out), flush=True)


def main():
    if len(sys.argv) > 2 and sys.argv[1] == "--child":
        child(sys.argv[2])
        return
    out = sys.argv[sys.argv.index("--out") + 1] if "--out" in sys.argv else None
    rows = []
    if "--kprof" in sys.argv:
        import tempfile
        sys.path.insert(0, ROOT)
        tmp = tempfile.mkdtemp()
        for v in KPROF_VARIANTS:
            row = kprof_variant(v, tmp)
            rows.append(row)
            print(json.dumps(row), flush=True)
        for r in rows:
            b = r.get("backend") if isinstance(r.get("backend"), dict) else {}
            print(f"{r['variant']:13s} rc {r['rc']}  kernelc under train_step {r.get('kernelc_under_train_step')}  "
                  f"kernels under it {r.get('kernels_under_train_step')}  at the root {r.get('kernels_at_root')}  "
                  f"API records {b.get('api_records')}  timeline offsets {b.get('tl_offsets')}  "
                  f"CUPTI - REALTIME at the end {b.get('offset_now_ns')} ns")
        if out:
            with open(out, "w") as f:
                json.dump(rows, f, indent=1)
        return
    todo = VARIANTS + [v + "_nocb" for v in ("ctx_first", "off_before_ctx", "on_through_ctx")]
    if "--variants" in sys.argv:
        todo = sys.argv[sys.argv.index("--variants") + 1].split(",")
    for v in todo:
        p = subprocess.run([sys.executable, __file__, "--child", v], capture_output=True, text=True, timeout=60)
        line = next((l for l in p.stdout.splitlines() if l.startswith("RESULT ")), None)
        row = json.loads(line[7:]) if line else {"variant": v, "error": (p.stderr or p.stdout)[-600:]}
        rows.append(row)
        print(json.dumps(row), flush=True)
    print(f"{'variant':18s} ctx_cb  A: api/kernels  B: api/kernels   (expected A 0/{N}, B {N}/{N})")
    for r in rows:
        if "error" in r:
            print(f"{r['variant']:18s} ERROR")
            continue
        print(f"{r['variant']:18s} {r['ctx_created_callbacks']:6d}  {r['A_api_launch']:5d}/{r['A_kernels']:<8d}"
              f" {r['B_api_launch']:5d}/{r['B_kernels']}   CUPTI - REALTIME ns {r.get('cupti_minus_realtime_ns')}")
    if out:
        with open(out, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
