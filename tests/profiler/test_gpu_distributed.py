"""kprof under torchrun on one GPU (world size 1, NCCL): NCCL kernels come through CUPTI like any
kernel and are attributed to the scope that issued them; rank 0 writes the per-rank and the merged
profile.  (Two GPUs: bench/ddp_profile.py.)"""
import os
import subprocess
import sys
import textwrap

import pytest

from profiler.distributed import is_collective_kernel
from profiler.format import read_profile

from .conftest import REPO

pytestmark = pytest.mark.gpu

PROG = """
import torch, torch.distributed as dist, profiler
torch.cuda.set_device(0)
dist.init_process_group("nccl")
x = torch.ones(1 << 20, device="cuda")
y = torch.empty_like(x)
dist.all_to_all_single(y, x)            # NCCL's first calls set up its communicator: keep them outside
dist.all_reduce(x, op=dist.ReduceOp.AVG)  # any scope (their kernels sit at the root)
torch.cuda.synchronize()
with profiler.scope("grad_sync"):
    for _ in range(3):
        dist.all_to_all_single(y, x)    # one rank: a device-to-device copy
        dist.all_reduce(x, op=dist.ReduceOp.AVG)  # one rank: NCCL's oneRankReduce kernel
    torch.cuda.synchronize()
with profiler.scope("compute"):
    (x * 2).sum().item()
dist.destroy_process_group()
"""


def test_nccl_kernels_attributed_to_their_scope_world_size_1(tmp_path):
    (tmp_path / "prog.py").write_text(textwrap.dedent(PROG))
    env = dict(os.environ)
    env["PYTHONPATH"] = REPO + os.pathsep + env.get("PYTHONPATH", "")
    env.pop("KPROF_BACKEND", None)
    env.pop("KERNELC_INTERPRET", None)
    r = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "1",
                        "-m", "kprof", "-n", "nccl", "prog.py"], cwd=tmp_path, env=env, capture_output=True,
                       text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-5000:]
    root, _ = read_profile(str(tmp_path / "nccl.rank0.hatchet"))
    meta = root.extra["distributed"]
    assert (meta["rank"], meta["world_size"], meta["backend"]) == (0, 1, "cupti"), meta
    assert any(d.startswith("CUDA 0") for d in meta["devices"]), meta
    everything = {"/".join(p): n for n, p in _paths(root)}
    nccl = {p: n for p, n in everything.items() if is_collective_kernel(n.name)}
    assert nccl, f"no NCCL kernel in the profile; frames: {sorted(everything)}"
    # the warm-up calls before any scope sit at the root; none in compute
    assert all(p.startswith("grad_sync/") or "/" not in p for p in nccl), sorted(nccl)
    for n in nccl.values():
        assert n.extra.get("collective") and len(n.extra["instances_ns"]) == n.metrics["count"], n.extra
    assert sum(n.metrics["count"] for p, n in nccl.items() if p.startswith("grad_sync/")) == 3
    merged, _ = read_profile(str(tmp_path / "nccl.merged.hatchet"))
    assert merged.extra["distributed"]["ranks"] == [0]
    for p, n in {"/".join(p): n for n, p in _paths(merged)}.items():
        if is_collective_kernel(n.name):
            assert n.metrics["wait (ns):rank0"] == 0 and n.metrics["transfer (ns)"] == n.metrics["time (ns)"]


def _paths(root):
    stack = [(c, (c.name,)) for c in root.children]
    while stack:
        n, p = stack.pop()
        yield n, p
        stack.extend((c, p + (c.name,)) for c in n.children)
