"""Which libcupti kprof takes its raw buffers from (``cupti_records="raw"``), in a plain process and in a child
forked from a process that imported torch (as the overhead bench's ``--spawn fork``): whether raw is in effect,
what ``skipped`` says, the candidates and every cupti file mapped.  (H11b, 2026-11-28: a forked child found no
``/libcupti.so`` in its maps and fell back to cupti-python's per-record objects.)

    python3 bench/experiments/profiler_overhead/libcupti_find.py
"""
from __future__ import annotations

import json
import multiprocessing as mp
import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))))


def check(tag: str) -> dict:
    import torch

    import profiler
    from profiler.backends import cupti_raw
    a = torch.zeros(1, device="cuda")
    sid = profiler.start(os.path.join(tempfile.mkdtemp(), "find"))
    b = profiler.session.get(sid).backend
    for _ in range(10):
        a.add_(1)
    torch.cuda.synchronize()
    out = {"where": tag, "raw": getattr(b, "rawbufs", None) is not None, "skipped": list(getattr(b, "skipped", [])),
           "cupti_python_lib": cupti_raw._cupti_python_lib(), "candidates": cupti_raw.libcupti_candidates(),
           "maps": sorted({ln.split()[-1] for ln in open("/proc/self/maps") if "cupti" in ln.lower()})}
    try:
        import cupti
        out["cupti_python"] = cupti.__file__
    except ImportError:
        pass
    profiler.finalize()
    return out


def _child(q):
    q.put(check("forked child"))


def main() -> int:
    if len(sys.argv) > 1 and sys.argv[1] in ("-h", "--help"):
        print(__doc__)
        return 0
    import torch  # noqa: F401  (imported before the fork, as the bench's fork server does)
    ctx = mp.get_context("forkserver")
    ctx.set_forkserver_preload(["torch"])
    q = ctx.Queue()
    p = ctx.Process(target=_child, args=(q,))
    p.start()
    print(json.dumps(q.get(timeout=120)))
    p.join()
    print(json.dumps(check("plain process")))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
