"""What kprof's Python costs per CUPTI activity record, on CPU, with synthetic cupti-python records.

Records are real cupti-python objects (``ActivityKernel13``, ``ActivityAPI``, ``ActivityMemset4``,
``ActivityExternalCorrelation``) built from bytes, mixed as a launch-bound step makes them: per launch
one kernel record and one driver-API record (plus one external-correlation record with
``cupti_attribution="external-correlation"``), a memset every ``--memset-every`` launches.  Timed, in
ns per record of the buffer:

* ``make``: building the record objects from their structs -- roughly what cupti-python itself does
  per record before kprof's callback runs (the CUPTI floor pays it too);
* ``split``: :func:`profiler.backends.cupti_records.split`, what the buffer-completed callback runs
  on CUPTI's thread with ``cupti_records="split"`` (the default);
* ``deferred``: what the callback runs with ``cupti_records="deferred"`` (keep the list);
* ``decode``: turning held columns into tuples/dicts at the flush (``device()``, ``api()``, ``ext()``);
* ``raw_decode``: with ``cupti_records="raw"``, walking a libcupti buffer of these records and
  gathering them into columns at the flush (the callback itself only keeps the buffer: nothing per
  record, and cupti-python's ``make`` is not paid at all);
* ``place_timeline`` / ``place_ext``: placing one launch in its scope at the flush, by the thread's
  timeline (:func:`profiler.context.node_at`) or by its external correlation id
  (:func:`profiler.context.ext_node`).

    python bench/experiments/profiler_overhead/record_processing_cost.py [--launches 20000] [--repeat 5]
"""
from __future__ import annotations

import argparse
import ctypes
import json
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))
sys.path.insert(0, ROOT)

_NAMES = [ctypes.create_string_buffer(f"_Z8kernel_{i}Pf".encode()) for i in range(64)]


def _struct(dtype, **fields):
    import numpy as np
    raw = np.zeros(1, dtype=dtype)
    for k, v in fields.items():
        raw[k] = v
    return raw.tobytes()


def structs(cupti, launches: int, memset_every: int, ext: bool):
    """``[(record class, struct bytes)]`` in buffer order."""
    K = cupti.ActivityKind
    out = []
    cid = 0
    for i in range(launches):
        cid += 1
        if ext:
            out.append((cupti.ActivityExternalCorrelation,
                        _struct(cupti.activity_external_correlation_dtype, kind=int(K.EXTERNAL_CORRELATION),
                                external_kind=int(cupti.ExternalCorrelationKind.CUSTOM0),
                                external_id=(1 << 40) | (1 + i % 7), correlation_id=cid)))
        out.append((cupti.ActivityAPI, _struct(cupti.activity_api_dtype, kind=int(K.DRIVER), cbid=307,
                                               start=1000 * cid, end=1000 * cid + 500, thread_id=4242,
                                               correlation_id=cid)))
        out.append((cupti.ActivityKernel13, _struct(cupti.activity_kernel13_dtype, kind=int(K.CONCURRENT_KERNEL),
                                                    correlation_id=cid, start=2000 * cid, end=2000 * cid + 900,
                                                    device_id=0, stream_id=7,
                                                    name=ctypes.addressof(_NAMES[i % len(_NAMES)]))))
        if memset_every and i % memset_every == 0:
            cid += 1
            out.append((cupti.ActivityMemset4, _struct(cupti.activity_memset4_dtype, kind=int(K.MEMSET),
                                                       correlation_id=cid, start=2000 * cid, end=2000 * cid + 300,
                                                       bytes=512, device_id=0, stream_id=7)))
    return out


def _best(fn, repeat):
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter_ns()
        fn()
        best = min(best, time.perf_counter_ns() - t0)
    return best


def measure(launches: int, memset_every: int, ext: bool, repeat: int) -> dict:
    from cupti import cupti
    from profiler import context
    from profiler.backends import cupti_records
    K = cupti.ActivityKind
    kinds = ({int(K.CONCURRENT_KERNEL), int(K.KERNEL)}, int(K.MEMCPY), int(K.MEMSET), int(K.DRIVER),
             int(K.EXTERNAL_CORRELATION))
    raw = structs(cupti, launches, memset_every, ext)
    n = len(raw)
    acts = [cls.from_buffer(bytearray(b)) for cls, b in raw]
    label = {}

    def memcpy_name(k):
        return label.setdefault(k, f"memcpy {k}")

    held = []
    r = {"records": n, "launches": launches, "external_correlation": ext,
         "make": _best(lambda: [cls.from_buffer(bytearray(b)) for cls, b in raw], repeat) / n,
         "split": _best(lambda: held.append(cupti_records.split(cupti, acts, kinds, memcpy_name, {})), repeat) / n}
    keep = []
    r["deferred"] = _best(lambda: keep.append(acts), repeat) / n
    recs = held[-1]
    # cupti_records="raw": the buffer as libcupti fills it, walked with the record sizes already learned
    from profiler.backends import cupti_raw
    data = b"".join(b for _, b in raw)
    buf = (ctypes.c_uint8 * len(data)).from_buffer_copy(data)
    walker = cupti_raw.Walker(lambda *a: 0)
    for cls, b in raw:
        walker.sizes[int.from_bytes(b[:4], "little")] = len(b)
    r["raw_decode"] = _best(lambda: cupti_raw.decode(cupti, [(buf, len(data))], walker, kinds, memcpy_name, {}),
                            repeat) / n
    r["decode"] = _best(lambda: (recs.device(), recs.api(), recs.ext()), repeat) / n
    # placement at the flush: a main-thread timeline of 3 scopes per 100 launches
    times = list(range(0, 1000 * (launches + 2), 1000 * 33))
    context.MAIN.times, context.MAIN.nodes = times, [1 + i % 7 for i in range(len(times))]
    api = recs.api()
    tid = context.MAIN.tid
    threads = context.live_threads()
    starts = [s for (_t, s) in api.values()]
    r["place_timeline"] = _best(lambda: [context.node_at(tid, s, threads) for s in starts], repeat) / len(starts)
    if ext:
        eids = list(recs.ext().values())
        gen = context._ext_gen
        context._ext_gen = 1
        try:
            r["place_ext"] = _best(lambda: [context.ext_node(e) for e in eids], repeat) / len(eids)
        finally:
            context._ext_gen = gen
    context.MAIN.times, context.MAIN.nodes = [], []
    return {k: (round(v, 1) if isinstance(v, float) else v) for k, v in r.items()}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--launches", type=int, default=20000)
    ap.add_argument("--memset-every", type=int, default=5)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--no-write", action="store_true")
    args = ap.parse_args(argv)
    measure(500, args.memset_every, True, 1)  # warm-up: imports, numpy's first calls
    rows = [measure(args.launches, args.memset_every, ext, args.repeat) for ext in (False, True)]
    for row in rows:
        print(json.dumps(row))
    if not args.no_write:
        from bench.common import write_results
        write_results("record_processing_cost", rows, {"units": "ns per record (place_*: per launch)"},
                      results_dir=os.path.join(HERE, "results"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
