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

Usage: python3 lazy_before_cuda.py [--out FILE.json]   (GPU; ~5 s a variant)."""
import json
import os
import subprocess
import sys
import time

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

    sub = cupti.subscribe(cb, None)
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
    out = {"variant": variant, "ctx_created_callbacks": len(events)}
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
    for v in VARIANTS:
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
              f" {r['B_api_launch']:5d}/{r['B_kernels']}")
    if out:
        with open(out, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
