"""LLVM IR -> PTX for compiles that run at the same time, in worker processes.

llvmlite wraps every LLVM C-API call in one process-wide lock (``llvmlite.binding.ffi._LLVMLock``), so
threads that compile autotune candidates together (``runtime/tuning.py``) queue for the optimiser
and ``llc``: they run one at a time however many cores the machine has, and the first call of an
autotuned kernel pays for each candidate's LLVM time in turn. Only one compile in a process can be
inside LLVM at once; ``to_ptx`` runs a compile in this process when no other one is there, and
otherwise hands the LLVM IR text to a worker process (its own interpreter, its own llvmlite, its
own lock), which returns the PTX and the optimised IR. A worker is started on first need, or as soon as
several compiles run at once (``in_flight``), and kept for later compiles (workers: ``os.cpu_count() - 1``;
``KERNELC_LLVM_PROCESSES=0`` turns this off).
Anything that goes wrong in a worker falls back to compiling here, so errors read the same.

Protocol: pickled ``(kind, args, KERNELC_* environment)`` requests -- ``llvm`` (IR -> PTX), ``ptxas`` (PTX ->
cubin, the assembler's fill policy included) or ``both`` -- and ``("ok", result, timings)`` or ``("error",
message)`` replies, each framed by an 8-byte length, over the worker's stdin/stdout (the worker moves its own
prints to stderr). Assembling (nvJitLink) goes to a worker too when another compile of this process is
assembling (``to_cubin``).
"""
from __future__ import annotations

import atexit
import os
import pickle
import struct
import subprocess
import sys
import threading
from typing import Dict, List, Optional, Tuple

_here = threading.Lock()          # held while this process is inside LLVM for a compile
_pool_lock = threading.Lock()
_idle: List["_Worker"] = []
_started = 0


def _send(f, obj) -> None:
    data = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
    f.write(struct.pack("<Q", len(data)))
    f.write(data)
    f.flush()


def _recv(f):
    head = f.read(8)
    if len(head) < 8:
        raise EOFError("LLVM worker closed its pipe")
    (n,) = struct.unpack("<Q", head)
    data = f.read(n)
    if len(data) < n:
        raise EOFError("LLVM worker closed its pipe")
    return pickle.loads(data)


class _Worker:
    def __init__(self):
        root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
        env = dict(os.environ)
        env["PYTHONPATH"] = root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
        self.proc = subprocess.Popen([sys.executable, "-c", "from kernelc.compiler.backend.llvm_pool import serve; serve()"],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env, cwd=root)

    def run(self, kind: str, *args):
        # the options in force now (the worker's environment is the one it started with): a knob set since then
        # must decide the worker's build as it would this process's
        _send(self.proc.stdin, (kind, args, _knobs()))
        return _recv(self.proc.stdout)

    def close(self) -> None:
        try:
            self.proc.stdin.close()
            self.proc.wait(timeout=5)
        except Exception:
            self.proc.kill()


def _take() -> Optional[_Worker]:
    global _started
    with _pool_lock:
        if _idle:
            return _idle.pop()
        if _started >= max(1, (os.cpu_count() or 2) - 1):
            return None
        _started += 1
    try:
        return _Worker()
    except OSError:
        with _pool_lock:
            _started -= 1
        return None


def _give(w: _Worker, ok: bool) -> None:
    global _started
    if ok:
        with _pool_lock:
            _idle.append(w)
        return
    w.close()
    with _pool_lock:
        _started -= 1


def _after_fork_in_child() -> None:
    """A forked child (a DataLoader worker, a user's pool) starts with no workers: the parent's pipes are the
    parent's, and a lock a parent thread held at the fork would never be released here."""
    global _here, _assembling, _pool_lock, _idle, _started, _in_flight
    _here, _assembling, _pool_lock = threading.Lock(), threading.Lock(), threading.Lock()
    _idle, _started, _in_flight = [], 0, 0


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


@atexit.register
def shutdown() -> None:
    """Stop the idle workers (at exit; a later compile starts new ones)."""
    global _started
    with _pool_lock:
        ws, _idle[:] = list(_idle), []
        _started -= len(ws)
    for w in ws:
        w.close()


_in_flight = 0    # compiles of this process that have started and not finished (compiler.compile)


class in_flight:
    """Around one compile: while several run at once (an autotuner's candidates on threads), start the worker
    processes their LLVM steps will need -- one fewer than the compiles, up to the pool's size -- as the
    compiles start, so that a worker's start (a fresh interpreter importing kernelc, ~0.4 s) overlaps the
    frontend and the tile passes rather than delaying the compile that first needs it. A sequential compile
    starts none."""

    def __enter__(self):
        global _in_flight
        with _pool_lock:
            _in_flight += 1
            want = _in_flight - 1
        if want > 0 and workers_enabled():
            _prestart(want)
        return self

    def __exit__(self, *exc):
        global _in_flight
        with _pool_lock:
            _in_flight -= 1
        return False


def _prestart(want: int) -> None:
    """Start workers (into the idle list) until ``want`` exist or the pool is full; returns at once (a worker
    imports in its own process)."""
    global _started
    while True:
        with _pool_lock:
            if _started >= min(want, max(1, (os.cpu_count() or 2) - 1)):
                return
            _started += 1
        try:
            w = _Worker()
        except OSError:
            with _pool_lock:
                _started -= 1
            return
        with _pool_lock:
            _idle.append(w)


def workers_enabled() -> bool:
    from ...options import get
    return get("KERNELC_LLVM_PROCESSES")


def _knobs() -> Dict[str, str]:
    return {k: v for k, v in os.environ.items() if k.startswith("KERNELC_")}


def _in_worker(kind: str, *args):
    """A worker's reply ``(result, timings)`` to one request, or None (no worker free, or it failed: the caller
    then does the work here, so that errors read the same)."""
    w = _take()
    if w is None:
        return None
    ok = False
    try:
        reply = w.run(kind, *args)
        ok = True
        return (reply[1], reply[2]) if reply[0] == "ok" else None
    except Exception:  # a broken worker: compile here instead
        return None
    finally:
        _give(w, ok)


def _add(timings: Dict[str, float], more: Dict[str, float]) -> None:
    for k, v in more.items():
        timings[k] = timings.get(k, 0.0) + v


def to_ptx(llir_text: str, target, opt_level: int, timings: Dict[str, float]) -> Tuple[str, str]:
    """``llvm.llvm_to_ptx``, in a worker process when another compile of this process is inside LLVM."""
    from .llvm import llvm_to_ptx
    if not workers_enabled():
        return llvm_to_ptx(llir_text, target, opt_level=opt_level, timings=timings)
    if _here.acquire(blocking=False):
        try:
            return llvm_to_ptx(llir_text, target, opt_level=opt_level, timings=timings)
        finally:
            _here.release()
    got = _in_worker("llvm", llir_text, target, opt_level)
    if got is not None:
        _add(timings, got[1])
        return got[0]
    return llvm_to_ptx(llir_text, target, opt_level=opt_level, timings=timings)


_assembling = threading.Lock()    # held while this process assembles (nvJitLink) for a compile


def to_cubin(llir_text: str, target, opt_level: int, timings: Dict[str, float], **ptxas_kw):
    """``(ptx, optimised IR, ptxas.CubinResult)``: LLVM as :func:`to_ptx`, then ``ptxas.ptx_to_cubin`` (its fill
    policy's builds included) in this process unless another compile of it is assembling, else in a worker.
    A compile whose LLVM went to a worker assembles there too (one round trip). nvJitLink releases the GIL; whether
    it links side by side in threads of one process is not established (docs/performance.md, "First calls"), in
    worker processes it does (KERNELC_LLVM_PROCESSES covers both; 0: all here)."""
    from .llvm import llvm_to_ptx
    if not workers_enabled():
        ptx, opt = llvm_to_ptx(llir_text, target, opt_level=opt_level, timings=timings)
        return ptx, opt, _timed_ptxas(ptx, target, opt_level, timings, ptxas_kw)
    if _here.acquire(blocking=False):
        try:
            ptx, opt = llvm_to_ptx(llir_text, target, opt_level=opt_level, timings=timings)
        finally:
            _here.release()
        return ptx, opt, assemble(ptx, target, opt_level, timings, **ptxas_kw)
    got = _in_worker("both", llir_text, target, opt_level, ptxas_kw)
    if got is not None:
        _add(timings, got[1])
        return got[0]
    ptx, opt = llvm_to_ptx(llir_text, target, opt_level=opt_level, timings=timings)
    return ptx, opt, assemble(ptx, target, opt_level, timings, **ptxas_kw)


def assemble(ptx: str, target, opt_level: int, timings: Dict[str, float], **ptxas_kw):
    """``ptxas.ptx_to_cubin`` here, or in a worker while another compile of this process is assembling;
    its wall time is added to ``timings["ptxas"]``."""
    if workers_enabled() and not _assembling.acquire(blocking=False):
        got = _in_worker("ptxas", ptx, target, opt_level, ptxas_kw)
        if got is not None:
            _add(timings, got[1])
            return got[0]
        return _timed_ptxas(ptx, target, opt_level, timings, ptxas_kw)
    try:
        return _timed_ptxas(ptx, target, opt_level, timings, ptxas_kw)
    finally:
        if workers_enabled():
            _assembling.release()


def _timed_ptxas(ptx, target, opt_level, timings, ptxas_kw):
    import time
    from .ptxas import ptx_to_cubin
    t0 = time.perf_counter()
    try:
        return ptx_to_cubin(ptx, target, opt_level=opt_level, **ptxas_kw)
    finally:
        timings["ptxas"] = timings.get("ptxas", 0.0) + time.perf_counter() - t0


def _serve_one(kind: str, args, timings: Dict[str, float]):
    from .llvm import llvm_to_ptx
    if kind == "llvm":
        llir_text, target, opt_level = args
        return llvm_to_ptx(llir_text, target, opt_level=opt_level, timings=timings)
    if kind == "ptxas":
        ptx, target, opt_level, kw = args
        return _timed_ptxas(ptx, target, opt_level, timings, kw)
    llir_text, target, opt_level, kw = args
    ptx, opt = llvm_to_ptx(llir_text, target, opt_level=opt_level, timings=timings)
    return ptx, opt, _timed_ptxas(ptx, target, opt_level, timings, kw)


def serve() -> None:
    """The worker's loop: requests on stdin, replies on stdout, until stdin closes."""
    inp, out = sys.stdin.buffer, os.fdopen(os.dup(sys.stdout.fileno()), "wb")
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())  # stray prints must not corrupt the replies
    from . import llvm, ptxas  # noqa: F401  (imported before the first request, while the parent runs its passes)
    try:
        ptxas._nvjitlink()
    except Exception:  # no nvJitLink here: a request that needs it fails, and the parent assembles
        pass
    while True:
        try:
            kind, args, knobs = _recv(inp)
        except EOFError:
            return
        for k in [k for k in os.environ if k.startswith("KERNELC_") and k not in knobs]:
            del os.environ[k]
        os.environ.update(knobs)
        timings: Dict[str, float] = {}
        try:
            _send(out, ("ok", _serve_one(kind, args, timings), timings))
        except Exception as e:  # the parent compiles again in-process and raises the real error
            _send(out, ("error", str(e)))
