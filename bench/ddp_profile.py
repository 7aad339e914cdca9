"""kprof under torchrun on GPUs: a small DDP training step with a planted slow rank.

Runs the same DDP job (an MLP, NCCL, one GPU per rank) under ``torchrun`` without a profiler and
under ``torchrun -m kprof``, rounds interleaved, best round kept, and reports per rank:

* ms per step without and with kprof, and the overhead (ratio), as the single-GPU benches do;
* from ``ddp.merged.hatchet``: the NCCL kernels found and the scope they are attributed to, the
  straggler kprof-analyze names (the planted slow rank does ``--slow-matmuls`` extra 2048^3 matmuls
  per step in scope ``forward/extra``), and the collective the others waited in.

Writes bench/results/ddp_profile.json (and $OUT/results/).  Needs 2+ GPUs for the straggler part; with
one GPU it runs world size 1 (overhead only; NCCL with one rank may launch no kernel at all).

    python bench/ddp_profile.py [--nproc N] [--steps 50] [--rounds 2] [--slow-rank 1] [--slow-matmuls 8]
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, ROOT)


# -- worker: one rank of the DDP job ----------------------------------------------------------------
def worker(args) -> None:
    import torch
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP

    import profiler

    rank, local = int(os.environ["RANK"]), int(os.environ.get("LOCAL_RANK", 0))
    dev = "cpu" if args.cpu else "cuda"
    if not args.cpu:
        torch.cuda.set_device(local)
    dist.init_process_group("gloo" if args.cpu else "nccl")
    torch.manual_seed(0)
    model = torch.nn.Sequential(*[torch.nn.Linear(args.width, args.width) for _ in range(4)]).to(dev)
    ddp = DDP(model, device_ids=None if args.cpu else [local], bucket_cap_mb=4)
    opt = torch.optim.SGD(ddp.parameters(), lr=1e-3)
    x = torch.randn(args.batch, args.width, device=dev)
    n = 256 if args.cpu else 2048
    big = torch.randn(n, n, device=dev, dtype=torch.float32 if args.cpu else torch.float16)
    sync = (lambda: None) if args.cpu else torch.cuda.synchronize

    def step():
        with profiler.scope("forward"):
            loss = ddp(x).square().mean()
            if rank == args.slow_rank:
                with profiler.scope("extra"):  # the planted imbalance: GPU work only this rank does
                    for _ in range(args.slow_matmuls):
                        big @ big
        with profiler.scope("backward"):
            loss.backward()                      # DDP's NCCL all-reduces run here (bucket hooks)
        with profiler.scope("optimizer"):
            opt.step()
            opt.zero_grad(set_to_none=True)

    for _ in range(args.warmup):
        step()
    sync()
    dist.barrier()
    t0 = time.perf_counter()
    for _ in range(args.steps):
        step()
    sync()
    ms = (time.perf_counter() - t0) * 1e3 / args.steps
    with open(os.path.join(args.out, f"steps.rank{rank}.json"), "w") as f:
        json.dump({"rank": rank, "ms_per_step": ms}, f)
    dist.barrier()
    dist.destroy_process_group()


# -- parent ---------------------------------------------------------------------------------------
def run_job(prof: str, nproc: int, args, out: str):
    os.makedirs(out, exist_ok=True)
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", str(nproc)]
    if prof == "kprof":
        cmd += ["-m", "kprof", "-n", os.path.join(out, "ddp"), "--merge-timeout", "120"]
    cmd += [os.path.abspath(__file__), "--worker", "--out", out, "--steps", str(args.steps), "--warmup",
            str(args.warmup), "--slow-rank", str(args.slow_rank), "--slow-matmuls", str(args.slow_matmuls),
            "--width", str(args.width), "--batch", str(args.batch)] + (["--cpu"] if args.cpu else [])
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    t0 = time.perf_counter()
    r = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=args.timeout)
    wall = time.perf_counter() - t0
    if r.returncode != 0:
        raise RuntimeError(f"{prof} job failed (rc {r.returncode}):\n{r.stderr[-4000:]}")
    per_rank = {}
    for rk in range(nproc):
        with open(os.path.join(out, f"steps.rank{rk}.json")) as f:
            per_rank[rk] = json.load(f)["ms_per_step"]
    return per_rank, wall, r.stderr


def profile_facts(path: str) -> dict:
    """NCCL kernels in the merged profile (name -> scope path), and kprof-analyze's straggler finding."""
    from profiler.distributed import is_collective_kernel
    from profiler.format import read_profile
    root, _ = read_profile(path)
    nccl = []
    stack = [(c, (c.name,)) for c in root.children]
    while stack:
        n, p = stack.pop()
        if is_collective_kernel(n.name):
            nccl.append({"kernel": n.name[:80], "scope": "/".join(p[:-1]), "count": n.metrics.get("count"),
                         "wait_ms": round(n.metrics.get("wait (ns)", 0) / 1e6, 3),
                         "transfer_ms": round(n.metrics.get("transfer (ns)", 0) / 1e6, 3)})
        stack.extend((c, p + (c.name,)) for c in n.children)
    import analyzer
    rep = analyzer.analyze(path, validate=False)
    diags = [d.to_json() for d in rep.profile_diagnostics]
    return {"nccl_kernels": nccl, "straggler": diags, "meta": root.extra.get("distributed")}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--out", default=None)
    ap.add_argument("--nproc", type=int, default=None, help="ranks (default: every GPU, at most 8)")
    ap.add_argument("--steps", type=int, default=50)
    ap.add_argument("--warmup", type=int, default=10)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--slow-rank", type=int, default=1)
    ap.add_argument("--slow-matmuls", type=int, default=8)
    ap.add_argument("--width", type=int, default=2048)
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--cpu", action="store_true", help="smoke test of this script on the CPU (gloo; no NCCL kernels)")
    ap.add_argument("--timeout", type=int, default=120, help="seconds per torchrun job")
    args = ap.parse_args()
    if args.worker:
        worker(args)
        return 0
    import torch
    ngpu = torch.cuda.device_count()
    if ngpu == 0 and not args.cpu:
        print("ddp_profile: no GPU; nothing to measure (--cpu: a smoke test with gloo)", file=sys.stderr)
        return 1
    nproc = args.nproc or (2 if args.cpu else min(ngpu, 8))
    work = tempfile.mkdtemp(prefix="ddp_profile_")
    best: dict = {"none": {}, "kprof": {}}
    kprof_dir = None
    for rnd in range(args.rounds):
        for prof in ("none", "kprof"):
            out = os.path.join(work, f"{prof}{rnd}")
            per_rank, wall, _ = run_job(prof, nproc, args, out)
            print(f"round {rnd} {prof:5s}: " + ", ".join(f"rank {r} {v:.3f} ms" for r, v in per_rank.items())
                  + f" (job {wall:.1f} s)", flush=True)
            for r, v in per_rank.items():
                best[prof][r] = min(best[prof].get(r, float("inf")), v)
            if prof == "kprof":
                kprof_dir = out
    result = {"gpus": ngpu, "nproc": nproc, "device": "cpu (gloo smoke test)" if args.cpu else torch.cuda.get_device_name(0), "steps": args.steps,
              "slow_rank": args.slow_rank if nproc > 1 else None, "slow_matmuls": args.slow_matmuls,
              "per_rank": {str(r): {"none_ms": round(best["none"][r], 4), "kprof_ms": round(best["kprof"][r], 4),
                                    "overhead": round(best["kprof"][r] / best["none"][r], 4)} for r in range(nproc)},
              "date": time.strftime("%Y-%m-%d")}
    merged = os.path.join(kprof_dir, "ddp.merged.hatchet")
    if os.path.exists(merged):
        result.update(profile_facts(merged))
        found = [d for d in result["straggler"] if d["id"] == "straggler-rank" and d["severity"] != "info"]
        result["straggler_found"] = bool(found and found[0]["evidence"].get("slow_rank") == args.slow_rank)
    else:
        result["merged_missing"] = merged
    print(json.dumps(result, indent=2))
    if args.cpu:  # a smoke test: nothing to keep
        return 0
    for d in [os.path.join(HERE, "results"), os.path.join(os.environ.get("OUT", ""), "results") if os.environ.get("OUT") else None]:
        if d:
            os.makedirs(d, exist_ok=True)
            with open(os.path.join(d, "ddp_profile.json"), "w") as f:
                json.dump(result, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
