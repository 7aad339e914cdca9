"""Why kernelc's autotuner picks another config than Triton's for tutorial 08's ``grouped_matmul_kernel``
(docs/triton-tutorials.md, "09/08 pointer-load GEMMs"): the tutorial's six configs, keyed on ``group_size`` as
the tutorial does, tuned at the tutorial's check sizes (GEMMs of 1024, 512, 256 and 128 cubed), three times
with a fresh autotuner each; per tuning the pick and every config's time as the tuner measured it.

    python3 bench/experiments/tutorial_gaps/grouped_pick_08.py --tutorials DIR [--out FILE.json]

Runs, one process each: kernelc's autotuner as the tutorial gets it (``kernelc``), kernelc's with Triton's
benchmark lengths (``warmup=25, rep=100`` ms: ``kernelc_long``), and Triton 3.6's (``triton``). Then each config
is timed once more with ``do_bench`` (25 + 100 ms, median) outside any tuner. The tutorial file is not part of
this repository. A GPU is needed.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))

_CHILD = r"""
import importlib.util, json, sys, warnings
a = json.loads(sys.argv[1])
if a["impl"] == "kernelc":
    from kernelc.compat import install
    install()
import torch, triton
warnings.simplefilter("ignore")
spec = importlib.util.spec_from_file_location("k08", a["mod"])
mod = importlib.util.module_from_spec(spec); spec.loader.exec_module(mod)
from triton.testing import do_bench
NUM_SMS = torch.cuda.get_device_properties("cuda").multi_processor_count
CONFIGS = [(128, 128, 32, 84), (128, 128, 32, 128), (64, 64, 32, 84), (64, 64, 32, 128), (128, 128, 64, NUM_SMS),
           (64, 128, 64, NUM_SMS)]
def configs():
    return [triton.Config({"BLOCK_SIZE_M": m, "BLOCK_SIZE_N": n, "BLOCK_SIZE_K": k, "NUM_SM": s}) for m, n, k, s in CONFIGS]
sizes = [1024, 512, 256, 128]
torch.manual_seed(0)
As = [torch.rand((s, s), device="cuda", dtype=torch.float16) for s in sizes]
Bs = [torch.rand((s, s), device="cuda", dtype=torch.float16) for s in sizes]
Cs = [torch.empty((s, s), device="cuda", dtype=torch.float16) for s in sizes]
dev = lambda xs, dt=None: torch.tensor(xs, device="cuda", dtype=dt)
arrays = (dev([x.data_ptr() for x in As]), dev([x.data_ptr() for x in Bs]), dev([x.data_ptr() for x in Cs]),
          dev(sum(([s, s, s] for s in sizes), []), torch.int32), dev(sum(([s, s, s] for s in sizes), []), torch.int32))
grid = lambda META: (META["NUM_SM"],)
out = {"tunings": [], "do_bench_ms": {}}
label = lambda c: "{}x{}x{} sm{}".format(c.kwargs["BLOCK_SIZE_M"], c.kwargs["BLOCK_SIZE_N"], c.kwargs["BLOCK_SIZE_K"], c.kwargs["NUM_SM"])
for rep in range(3):
    kw = dict(warmup=25, rep=100) if a["long"] else {}
    tuned = triton.autotune(configs=configs(), key=["group_size"], **kw)(mod.grouped_matmul_kernel)
    tuned[grid](*arrays, len(sizes))
    torch.cuda.synchronize()
    timings = {label(c): (t[0] if isinstance(t, (list, tuple)) else t) for c, t in tuned.configs_timings.items()}
    best = min(timings, key=timings.get)
    ok = all(torch.allclose(C.float(), (A.float() @ B.float()), atol=1e-1, rtol=1e-2) for A, B, C in zip(As, Bs, Cs))
    rec = {"pick": best, "timings_ms": timings, "ok": ok}
    print(json.dumps(rec), flush=True)
    out["tunings"].append(rec)
for (m, n, k, s) in CONFIGS:
    fn = lambda m=m, n=n, k=k, s=s: mod.grouped_matmul_kernel[(s,)](*arrays, len(sizes), NUM_SM=s, BLOCK_SIZE_M=m,
                                                                   BLOCK_SIZE_N=n, BLOCK_SIZE_K=k)
    out["do_bench_ms"]["{}x{}x{} sm{}".format(m, n, k, s)] = do_bench(fn, warmup=25, rep=100)
print(json.dumps({"do_bench_ms": out["do_bench_ms"]}), flush=True)
json.dump(out, open(a["out"], "w"), indent=1)
"""


def main(argv=None) -> int:
    sys.path.insert(0, HERE)
    from tutorial_sweep import kernel_module
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tutorials", default=os.path.join(ROOT, ".ext", "tutorials"))
    ap.add_argument("--triton-site", default="")
    ap.add_argument("--timeout", type=int, default=40, help="seconds per process")
    ap.add_argument("--out", default=os.path.join(HERE, "results", "grouped_pick_08.json"))
    a = ap.parse_args(argv)
    work = tempfile.mkdtemp(prefix="pick08_")
    mod = os.path.join(work, "k08.py")
    with open(mod, "w") as f:
        f.write(kernel_module(os.path.join(a.tutorials, "08-grouped-gemm.py")))
    res = {}
    for label, impl, long in (("kernelc", "kernelc", False), ("kernelc_long", "kernelc", True),
                              ("triton", "triton", False)):
        print(f"== {label}", flush=True)
        out = os.path.join(work, f"{label}.json")
        env = dict(os.environ, TRITON_CACHE_DIR=os.path.join(work, "tc"), KERNELC_CACHE_DIR=os.path.join(work, "kc"),
                   KERNELC_AUTOTUNE_DISK_CACHE="0")
        env["PYTHONPATH"] = (a.triton_site if impl == "triton" else ROOT) + os.pathsep + env.get("PYTHONPATH", "")
        payload = json.dumps(dict(impl=impl, mod=mod, long=long, out=out))
        try:
            r = subprocess.run([sys.executable, "-c", _CHILD, payload], env=env, cwd=work, timeout=a.timeout,
                               capture_output=True, text=True)
            sys.stdout.write(r.stdout)
            sys.stderr.write(r.stderr[-2000:])
            res[label] = json.load(open(out)) if os.path.exists(out) else {"error": r.stderr[-800:]}
        except subprocess.TimeoutExpired as e:
            part = e.stdout.decode() if isinstance(e.stdout, bytes) else (e.stdout or "")
            sys.stdout.write(part)
            res[label] = {"error": f"timeout after {a.timeout} s", "partial": part[-3000:]}
    os.makedirs(os.path.dirname(os.path.abspath(a.out)), exist_ok=True)
    json.dump(res, open(a.out, "w"), indent=1)
    for label, r in res.items():
        if "tunings" in r:
            print(label, "picks:", [t["pick"] for t in r["tunings"]], "| do_bench ms:",
                  {k: round(v, 4) for k, v in r["do_bench_ms"].items()})
        else:
            print(label, r.get("error", "")[:200])
    return 0


if __name__ == "__main__":
    sys.exit(main())
