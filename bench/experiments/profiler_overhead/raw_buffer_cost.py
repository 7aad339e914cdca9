"""Where ``cupti_records="raw"`` spends its time, on CPU: inside the program's loop or at the flush.

Checks the hypothesis of docs/performance.md ("Overhead at CUPTI's floor", 2026-11-25) that raw's cost
on examples/train.py came from buffers decoded inside the timed blocks (at the memory bound) or from
the ctypes buffer callbacks.  libcupti is simulated: a second thread (CUPTI's) takes buffers from
kprof's real :class:`profiler.backends.cupti_raw.RawBuffers` through its ctypes function pointers
(so each call crosses C and takes the GIL as libcupti's would), fills them with the record bytes of
``record_processing_cost.py`` and completes them, at the rate a workload makes records, while the main
thread runs a Python loop that stands for the program.  For comparison the same thread runs what
cupti-python and kprof's default do per buffer: build cupti-python's record objects (``make``), then
:func:`profiler.backends.cupti_records.split`.

Per workload mix (records per step from the H100/H200 runs: train 267 kernels + 336 launch/copy API
records + 66 memsets + 3 copies per ~21 ms step; tiny one kernel and one API record per ~7 us launch)
and per mode it prints, per completed 1 MiB buffer: the time the callback held CUPTI's thread (``cb_us``),
how much of that was decoding (``in_loop_decoded``), the main loop's slowdown against no callbacks,
and the decode time per buffer at the flush; and, for the overhead bench's blocks, how many bytes a
block makes against the bound (64 MiB).

    python bench/experiments/profiler_overhead/raw_buffer_cost.py [--seconds 2] [--reps 3] [--no-write]
"""
from __future__ import annotations

import argparse
import ctypes
import json
import os
import statistics
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))
sys.path.insert(0, ROOT)
sys.path.insert(0, HERE)

BUF = 1 << 20
# records per step and step time (s) of the bench's workloads (docs/performance.md, H100/H200 runs)
MIX = {"train": {"launches": 267, "memset_every": 4, "step_s": 0.021, "block_s": 0.5},
       "tiny": {"launches": 1, "memset_every": 0, "step_s": 7e-6, "block_s": 0.2}}


def _records(cupti, launches, memset_every):
    from record_processing_cost import structs
    return structs(cupti, launches, memset_every, False)


def _fill(recs, size):
    """Records of the mix repeated to fill one buffer of ``size``: (bytes, [(class, struct)...])."""
    out, n, i = [], 0, 0
    while True:
        cls, b = recs[i % len(recs)]
        if n + len(b) > size:
            break
        out.append((cls, b))
        n += len(b)
        i += 1
    return b"".join(b for _, b in out), out


def main_loop(stop, counter):
    """The program: pure-Python work in steps (holds the GIL like a training loop's Python)."""
    x = 0
    while not stop.is_set():
        for j in range(200):
            x += j * j
        counter[0] += 1


def run(mode, wl, seconds, cupti, kinds):
    from profiler.backends import cupti_raw, cupti_records
    mix = MIX[wl]
    recs = _records(cupti, mix["launches"], mix["memset_every"])
    step_bytes = sum(len(b) for _, b in recs)
    data, objs = _fill(recs, BUF)
    # buffers per second at the workload's rate
    rate = step_bytes / mix["step_s"] / len(data)
    period = 1.0 / rate if mode != "none" else None
    cb_ns = []
    names = {}

    def memcpy_name(k):
        return f"memcpy {k}"

    stop = threading.Event()
    counter = [0]
    rb = None
    if mode == "raw":
        decoded = []
        rb = cupti_raw.RawBuffers(_FakeLib(), BUF, 64 << 20, lambda: decoded.append(1))
        rb.walker.sizes.update({int.from_bytes(b[:4], "little"): len(b) for _, b in recs})
        req = cupti_raw.REQUESTED(ctypes.cast(rb._req, ctypes.c_void_p).value)
        cmp = cupti_raw.COMPLETED(ctypes.cast(rb._cmp, ctypes.c_void_p).value)

    def cupti_thread():
        nxt = time.perf_counter()
        while not stop.is_set():
            nxt += period
            d = nxt - time.perf_counter()
            if d > 0:
                time.sleep(d)
            t0 = time.perf_counter_ns()
            if mode == "raw":
                u8p = ctypes.POINTER(ctypes.c_uint8)
                bufp, size, mx = ctypes.pointer(u8p()), ctypes.pointer(ctypes.c_size_t()), ctypes.pointer(ctypes.c_size_t())
                req(bufp, size, mx)   # libcupti asks for a buffer (through the C thunk: takes the GIL)
                addr = ctypes.cast(bufp.contents, ctypes.c_void_p).value
                ctypes.memmove(addr, data, len(data))   # CUPTI writes records (no GIL in real life)
                t0 = time.perf_counter_ns()
                cmp(None, 0, bufp.contents, size.contents.value, len(data))
            else:  # cupti-python: one object per record, then kprof's split under the GIL
                acts = [cls.from_buffer(bytearray(b)) for cls, b in objs]
                cupti_records.split(cupti, acts, kinds, memcpy_name, names)
            cb_ns.append(time.perf_counter_ns() - t0)

    base = None
    th = threading.Thread(target=main_loop, args=(stop, counter))
    t_start = time.perf_counter()
    th.start()
    ct = None
    if mode != "none":
        ct = threading.Thread(target=cupti_thread, daemon=True)
        ct.start()
    time.sleep(seconds)
    stop.set()
    th.join()
    if ct is not None:
        ct.join()
    elapsed = time.perf_counter() - t_start
    out = {"workload": wl, "mode": mode, "steps_per_s": counter[0] / elapsed, "buffers": len(cb_ns),
           "records_per_buffer": len(objs), "buffers_per_s": round(rate, 2) if period else 0,
           "cb_us_median": round(sorted(cb_ns)[len(cb_ns) // 2] / 1e3, 1) if cb_ns else 0,
           "block_bytes": int(step_bytes / mix["step_s"] * mix["block_s"])}
    if mode == "raw":
        out["in_loop_decoded"] = len(decoded)
        held = rb.take()
        t0 = time.perf_counter_ns()
        cupti_raw.decode(cupti, held, rb.walker, kinds, memcpy_name, names)
        out["flush_decode_ms_per_buffer"] = round((time.perf_counter_ns() - t0) / 1e6 / max(len(held), 1), 2)
    return out, base


class _FakeLib:
    """What RawBuffers needs of libcupti here: nothing is registered, the sizes are known."""

    class _Fn:
        argtypes = restype = None

        def __call__(self, *a):
            return 1

    def __init__(self):
        self.cuptiActivityGetNextRecord = self._Fn()


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=2.0)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--no-write", action="store_true")
    args = ap.parse_args(argv)
    from cupti import cupti
    K = cupti.ActivityKind
    kinds = ({int(K.CONCURRENT_KERNEL), int(K.KERNEL)}, int(K.MEMCPY), int(K.MEMSET), int(K.DRIVER),
             int(K.EXTERNAL_CORRELATION))
    rows = []
    for wl in MIX:
        # modes interleaved, --reps times: the loop's speed is the median over its runs (a loaded
        # machine moves it by tens of percent between runs)
        runs = {}
        for _ in range(args.reps):
            for mode in ("none", "raw", "split"):
                runs.setdefault(mode, []).append(run(mode, wl, args.seconds, cupti, kinds)[0])
        base = statistics.median(r["steps_per_s"] for r in runs["none"])
        for mode, rs in runs.items():
            r = dict(rs[-1])
            r["steps_per_s"] = statistics.median(x["steps_per_s"] for x in rs)
            r["cb_us_median"] = statistics.median(x["cb_us_median"] for x in rs)
            r["loop_slowdown_%"] = round(100 * (base / r["steps_per_s"] - 1), 2)
            r["loop_slowdown_per_run_%"] = [round(100 * (base / x["steps_per_s"] - 1), 1) for x in rs]
            rows.append(r)
            print(json.dumps(r), flush=True)
    if not args.no_write:
        from bench.common import write_results
        write_results("raw_buffer_cost", rows, {"units": "cb_us: per completed 1 MiB buffer"},
                      results_dir=os.path.join(HERE, "results"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
