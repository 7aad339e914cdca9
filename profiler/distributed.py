"""kprof under a distributed launcher (torchrun, or anything that sets ``RANK`` and ``WORLD_SIZE``).

* **Per-rank profiles.**  A session started in a process whose environment names its rank writes
  ``NAME.rank<r>.hatchet`` instead of ``NAME.hatchet``; the root frame's ``kprof`` dict carries
  ``{"distributed": {"rank", "world_size", "local_rank", "host", "pid", "devices", "run_id", ...}}``.
  Without ``RANK``/``WORLD_SIZE`` nothing changes.
* **Collective instances.**  Every NCCL kernel (``ncclDevKernel_*``/``ncclKernel_*``, reported by
  CUPTI like any kernel) and every synchronous ``torch.distributed`` collective timed on the host
  (cpu backend, e.g. gloo) keeps its per-call durations, so the merge can match the k-th call of a
  collective in a scope across ranks (:mod:`profiler.merge`).
* **Gathering.**  After writing its own profile, global rank 0 waits (bounded:
  :attr:`Options.merge_timeout`) for the other ranks' files on the same path, then writes
  ``NAME.merged.hatchet`` from the ones that came and names the missing ranks.  kprof adds no
  communication of its own: files on a shared path work after the process group is destroyed, and a
  dead rank cannot hang rank 0 beyond the timeout (see docs/distributed.md).
"""
from __future__ import annotations

import functools
import os
import socket
import sys
import threading
import time
import types
from dataclasses import dataclass
from typing import Any, Dict, List, Optional

from .merge import merged_path, rank_path  # noqa: F401 (the file names; merge.py owns them)

__all__ = ["Options", "options", "configure", "RankInfo", "rank_info", "rank_base", "merged_path", "rank_path",
           "is_collective_kernel", "install_torch_hook", "interrupt", "COLLECTIVE_OPS"]


@dataclass
class Options:
    """Knobs of the distributed mode (``kprof --merge-timeout S --no-merge``, or :func:`configure`)."""

    merge: bool = True            # rank 0 writes NAME.merged.hatchet after the run
    merge_timeout: float = 60.0   # seconds rank 0 waits for the other ranks' profiles
    max_instances: int = 100_000  # per-call durations kept per collective frame and rank
    host_collectives: bool = True  # time torch.distributed calls on the host (cpu backend)


options = Options()


def configure(**kwargs) -> Options:
    """Set fields of :data:`options` by name (unknown names are an error)."""
    for k, v in kwargs.items():
        if not hasattr(options, k):
            raise TypeError(f"unknown distributed option {k!r}; expected one of {', '.join(vars(options))}")
        kind = type(getattr(options, k))
        if kind is bool and not isinstance(v, bool):
            raise TypeError(f"distributed option {k!r} takes True or False, got {v!r}")
        setattr(options, k, v if kind is bool else kind(v))
    if options.merge_timeout < 0:
        raise ValueError(f"merge_timeout must be 0 or more seconds, got {options.merge_timeout}")
    return options


@dataclass(frozen=True)
class RankInfo:
    rank: int
    world_size: int
    local_rank: Optional[int]
    run_id: Optional[str]


def _env_int(name: str) -> Optional[int]:
    v = os.environ.get(name)
    if v is None or not v.strip():
        return None
    try:
        return int(v)
    except ValueError:
        return None


def rank_info() -> Optional[RankInfo]:
    """The launcher's ``RANK``/``WORLD_SIZE``/``LOCAL_RANK`` (``None`` outside a launcher)."""
    rank, world = _env_int("RANK"), _env_int("WORLD_SIZE")
    if rank is None or world is None or world < 1 or not 0 <= rank < world:
        return None
    run_id = os.environ.get("TORCHELASTIC_RUN_ID")
    if not run_id or run_id == "none":  # torchrun's default id when not --standalone says nothing
        job, step = os.environ.get("SLURM_JOB_ID"), os.environ.get("SLURM_STEP_ID")
        run_id = f"slurm:{job}.{step}" if job else None
    return RankInfo(rank, world, _env_int("LOCAL_RANK"), run_id)


def rank_base(base: str, info: Optional[RankInfo]) -> str:
    return base if info is None else f"{base}.rank{info.rank}"


# -- collectives ------------------------------------------------------------------------------
# NCCL's collective kernels, and the kernel its one-rank path runs instead of a collective (world size
# 1: ``oneRankReduce`` from onerank.cu; docs/distributed.md).
_NCCL_MARKERS = ("ncclDevKernel", "ncclKernel", "oneRankReduce")


def is_collective_kernel(name: str) -> bool:
    """An NCCL kernel, mangled (``_Z..ncclDevKernel_AllReduce..``) or not."""
    return any(m in name for m in _NCCL_MARKERS)


def add_instance(session, key: tuple, duration_ns: int) -> None:
    """Remember one call's duration of the collective frame ``key`` = (ctx, name, dtype, did)."""
    store = session.extra.get("collectives")
    if store is None:
        store = session.extra.setdefault("collectives", {})
    lst = store.get(key)
    if lst is None:
        lst = store[key] = []
    if len(lst) < options.max_instances:
        lst.append(int(duration_ns))
    else:
        session.extra["collectives_truncated"] = True


# torch.distributed functions timed on the host; each takes ``async_op`` (default False).
COLLECTIVE_OPS = ("all_reduce", "broadcast", "reduce", "all_gather", "all_gather_into_tensor", "gather",
                  "scatter", "reduce_scatter", "reduce_scatter_tensor", "all_to_all", "all_to_all_single",
                  "barrier", "all_gather_object", "broadcast_object_list", "gather_object", "scatter_object_list")
_hook_lock = threading.Lock()
_hooked: Dict[str, Any] = {}    # op name -> the original function
_inside = threading.local()     # a collective calling another (all_gather_object -> all_gather) counts once


def _group_backend(dist, kwargs) -> str:
    try:
        return str(dist.get_backend(kwargs.get("group")))
    except Exception:
        return "?"


# What the collective wrappers need of profiler/session.py, which imports this module: set by
# bind_sessions() when session.py loads, so that nothing here imports it back.
_sessions = types.SimpleNamespace(active=lambda: (), record=lambda op, backend, start, end: None)


def bind_sessions(active, record) -> None:
    """``active()``: the sessions recording now; ``record(op, backend, start_ns, end_ns)``: a host-timed
    collective call, for each of them."""
    _sessions.active, _sessions.record = active, record


def _wrap(dist, op: str, fn):
    @functools.wraps(fn)
    def timed(*args, **kwargs):
        sessions = [s for s in _sessions.active() if s.backend_name == "cpu"] if options.host_collectives else ()
        if not sessions or kwargs.get("async_op") or getattr(_inside, "depth", 0):
            return fn(*args, **kwargs)
        _inside.depth = 1
        start = time.perf_counter_ns()
        try:
            return fn(*args, **kwargs)
        finally:
            end = time.perf_counter_ns()
            _inside.depth = 0
            try:
                _sessions.record(op, _group_backend(dist, kwargs), start, end)
            except Exception as e:  # never break the program
                print(f"kprof: could not record {op} ({type(e).__name__}: {e})", file=sys.stderr)

    timed.__kprof_original__ = fn
    return timed


def install_torch_hook() -> bool:
    """Time ``torch.distributed``'s collective functions (module attributes, so ``dist.all_reduce``
    calls made after this are seen).  Imports torch.distributed; False if it is not available."""
    with _hook_lock:
        if _hooked:
            return True
        try:
            import torch.distributed as dist
        except Exception:
            return False
        if not dist.is_available():
            return False
        for op in COLLECTIVE_OPS:
            fn = getattr(dist, op, None)
            if fn is None or hasattr(fn, "__kprof_original__"):
                continue
            _hooked[op] = fn
            setattr(dist, op, _wrap(dist, op, fn))
        return True


def uninstall_torch_hook() -> None:
    with _hook_lock:
        try:
            import torch.distributed as dist
        except Exception:
            _hooked.clear()
            return
        for op, fn in _hooked.items():
            setattr(dist, op, fn)
        _hooked.clear()


# -- session start and end ----------------------------------------------------------------------
def session_started(session, info: RankInfo, unsuffixed_base: str) -> None:
    session.extra["distributed"] = {"info": info, "base": unsuffixed_base, "wall_start": time.time()}
    if options.host_collectives and session.backend_name == "cpu":
        install_torch_hook()


def _devices(session) -> List[str]:
    out = [f"{t} {i}" for t, i in sorted(session.data.devices, key=lambda d: (d[0], str(d[1]))) if t != "host"]
    torch = sys.modules.get("torch")
    try:
        if torch is not None and torch.cuda.is_initialized():
            d = torch.cuda.current_device()
            name = f"CUDA {d} ({torch.cuda.get_device_name(d)})"
            out = [name] + [x for x in out if x != f"CUDA {d}"]
    except Exception:
        pass
    return out


def annotate(session, root, kernel_nodes: Dict[tuple, Any]) -> None:
    """Before writing a per-rank profile: rank metadata on the root, per-call durations on the
    collective frames."""
    if session.extra.get("distributed") is None:
        return
    try:
        _annotate(session, root, kernel_nodes)
    except Exception as e:  # the rank's profile is written without them rather than lost
        print(f"kprof: rank metadata left out of the profile ({type(e).__name__}: {e})", file=sys.stderr)


def _annotate(session, root, kernel_nodes: Dict[tuple, Any]) -> None:
    d = session.extra["distributed"]
    info: RankInfo = d["info"]
    meta = {"rank": info.rank, "world_size": info.world_size, "local_rank": info.local_rank,
            "host": socket.gethostname(), "pid": os.getpid(), "devices": _devices(session),
            "backend": session.backend_name, "run_id": info.run_id, "wall_start": d["wall_start"],
            "cuda_visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES")}
    root.extra = dict(root.extra or {})
    root.extra["distributed"] = meta
    for key, durations in (session.extra.get("collectives") or {}).items():
        node = kernel_nodes.get(key)
        if node is None:
            continue
        extra = dict(node.extra or {})
        extra.setdefault("kind", "collective")
        extra["collective"] = True
        extra["instances_ns"] = list(durations)
        if session.extra.get("collectives_truncated"):
            extra["instances_truncated"] = True
        node.extra = extra


_stop = threading.Event()


def interrupt() -> None:
    """Stop a merge wait now (kprof's command line calls this on SIGINT/SIGTERM)."""
    _stop.set()


def after_finalize(session, written: List[str]) -> List[str]:
    """On global rank 0, once its own profile is written: wait for the others and merge.  Returns
    the merged path(s) written; never raises (problems are printed)."""
    d = session.extra.get("distributed")
    if d is None or not options.merge or d["info"].rank != 0 or session.path not in written:
        return []
    try:
        from .merge import gather_and_merge
        path = gather_and_merge(d["base"], d["info"], wall_start=d["wall_start"], timeout=options.merge_timeout,
                                stop=_stop)
        return [path] if path else []
    except Exception as e:
        print(f"kprof: could not merge the per-rank profiles ({type(e).__name__}: {e})", file=sys.stderr)
        return []
