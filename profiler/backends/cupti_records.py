"""Completed CUPTI activity buffers to compact columns, with as little Python per record as possible.

The buffer-completed callback runs on CUPTI's own thread and holds the GIL while it works, so
every microsecond per record is taken from the profiled program (a 20 ms training step of
examples/train.py produces ~500 records).  cupti-python hands over one object per record, each
owning a copy of the C struct and exposing it through the buffer protocol; reading eight
attributes off each cost ~1 us, joining it to its launch another ~2 us.  Here the structs of each
record type are concatenated by one ``bytes.join`` and viewed through cupti-python's own numpy
dtype of that struct, so the fields come out as arrays; names are read once per distinct name
pointer (CUPTI shares one string per kernel).

The result of :func:`split` is a :class:`Records`, which turns into the plain tuples the backend's
join takes (device records) and ``{correlation id: (thread id, start)}`` (API records) only when
the backend delivers them: with API records on, that is at the flush.
"""
from __future__ import annotations

import ctypes
import re
from typing import Any, Dict, List, Optional, Tuple

import numpy as np

TID_MASK = 0xFFFFFFFF

# record class -> (numpy dtype, struct size) or None (not handled here: the caller reads attributes)
_layouts: Dict[type, Optional[Tuple[Any, int]]] = {}


def _layout(cupti, cls) -> Optional[Tuple[Any, int]]:
    lay = _layouts.get(cls, ())
    if lay == ():
        # cupti-python names the dtype of record class ActivityKernel13 `activity_kernel13_dtype`, of
        # ActivityAPI `activity_api_dtype`, of ActivityExternalCorrelation `activity_external_correlation_dtype`
        base = cls.__name__[len("Activity"):]
        dt = getattr(cupti, "activity_" + base.lower() + "_dtype", None)
        if dt is None:
            dt = getattr(cupti, "activity_" + re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", base).lower() + "_dtype", None)
        lay = (dt, int(dt.itemsize)) if dt is not None and dt.names else None
        _layouts[cls] = lay
    return lay


class Records:
    """Records of completed buffers, kept as numpy columns until :meth:`device` and :meth:`api`
    turn them into Python objects (at delivery, which may be much later than the buffer)."""

    __slots__ = ("chunks", "api_chunks", "ext_chunks", "loose", "loose_api", "loose_ext", "max_cid", "count")

    def __init__(self):
        self.chunks: List[tuple] = []       # (label of row i: fn(i), columns...)
        self.api_chunks: List[tuple] = []   # (cids, thread ids, starts)
        self.ext_chunks: List[tuple] = []   # (cids, external ids)
        self.loose: List[tuple] = []        # device tuples read attribute by attribute
        self.loose_api: Dict[int, tuple] = {}
        self.loose_ext: Dict[int, int] = {}
        self.max_cid = 0                    # newest correlation id among the device records
        self.count = 0                      # device records held

    def device(self) -> List[tuple]:
        """``(cid, name, is_kernel, device, start, end, bytes, stream, graph node)`` per record."""
        out = list(self.loose)
        for labels, is_kernel, cids, dev, start, end, nbytes, stream, gnode in self.chunks:
            n = len(cids)
            out.extend(zip(cids.tolist(), labels(), [is_kernel] * n, dev.tolist(), start.tolist(), end.tolist(),
                           nbytes.tolist() if nbytes is not None else [None] * n, stream.tolist(), gnode.tolist()))
        return out

    def api(self) -> Dict[int, tuple]:
        """``{cid: (thread id, start)}`` of the launch API records."""
        out = dict(self.loose_api)
        for cids, tids, start in self.api_chunks:
            out.update(zip(cids.tolist(), zip(tids.tolist(), start.tolist())))
        return out

    def ext(self) -> Dict[int, int]:
        """``{cid: external correlation id}`` of the external-correlation records."""
        out = dict(self.loose_ext)
        for cids, eids in self.ext_chunks:
            out.update(zip(cids.tolist(), eids.tolist()))
        return out

    def take_oldest(self, keep: int) -> "Records":
        """Move out the oldest device records (loose ones first, then whole chunks) until at most
        ``keep`` stay here, with every API / external-correlation record (the launches of the records
        moved may be in any chunk): the backend delivers past its bound about one buffer per
        completion this way."""
        out = Records()
        out.api_chunks, self.api_chunks = self.api_chunks, []
        out.ext_chunks, self.ext_chunks = self.ext_chunks, []
        out.loose_api, self.loose_api = self.loose_api, {}
        out.loose_ext, self.loose_ext = self.loose_ext, {}
        k = max(0, min(len(self.loose), self.count - keep))
        out.loose, self.loose = self.loose[:k], self.loose[k:]
        moved = k
        n = 0
        while n < len(self.chunks) and self.count - moved > keep:
            moved += len(self.chunks[n][2])
            n += 1
        out.chunks, self.chunks = self.chunks[:n], self.chunks[n:]
        out.count, self.count = moved, self.count - moved
        out.max_cid = self.max_cid
        return out

    def extend(self, other: "Records") -> None:
        self.chunks += other.chunks
        self.api_chunks += other.api_chunks
        self.ext_chunks += other.ext_chunks
        self.loose += other.loose
        self.loose_api.update(other.loose_api)
        self.loose_ext.update(other.loose_ext)
        self.max_cid = max(self.max_cid, other.max_cid)
        self.count += other.count


def _columns(objs: list, dt, size: int) -> np.ndarray:
    # each record object exposes its struct through the buffer protocol: one C-level join
    data = b"".join(objs)
    if len(data) != size * len(objs):
        raise ValueError(f"record size {len(data) // max(len(objs), 1)} is not {size}")
    return np.frombuffer(data, dtype=dt)


def split(cupti, activities, kinds, memcpy_name, names: Dict[int, str]) -> Records:
    """Split ``activities`` (one completed buffer) into :class:`Records`.  ``kinds``: the backend's
    ``(kernel kinds, memcpy, memset, driver API[, external correlation])`` ints; ``memcpy_name(copy_kind)`` names a copy;
    ``names``: kernel name by name pointer, shared across buffers (CUPTI keeps one string per kernel,
    so a pointer is read once; it is read here, while the buffer's strings are certainly alive)."""
    k_kernel, k_memcpy, k_memset, k_driver = kinds[:4]
    k_ext = kinds[4] if len(kinds) > 4 else -1
    out = Records()
    groups: Dict[type, list] = {}
    for a in activities:
        g = groups.get(type(a))
        if g is None:
            g = groups[type(a)] = []
        g.append(a)
    for cls, objs in groups.items():
        lay = _layout(cupti, cls)
        if lay is None:
            _by_attributes(objs, kinds, memcpy_name, out)
            continue
        add_columns(_columns(objs, *lay), kinds, memcpy_name, names, out)
    return out


def add_columns(arr, kinds, memcpy_name, names: Dict[int, str], out: Records) -> None:
    """Add ``arr`` (records of one kind, viewed through cupti-python's dtype of their struct) to
    ``out``; records of kinds not in ``kinds`` are dropped."""
    k_kernel, k_memcpy, k_memset, k_driver = kinds[:4]
    k_ext = kinds[4] if len(kinds) > 4 else -1
    if not len(arr):
        return
    kind = int(arr["kind"][0])
    cids = arr["correlation_id"]
    if kind == k_ext:
        out.ext_chunks.append((cids, arr["external_id"]))
        return
    if kind == k_driver:
        out.api_chunks.append((cids, arr["thread_id"] & TID_MASK, arr["start"]))
        return
    fields = arr.dtype.names
    zeros = np.zeros(len(arr), dtype=np.int64)
    gnode = arr["graph_node_id"] if "graph_node_id" in fields else zeros
    stream = arr["stream_id"] if "stream_id" in fields else zeros
    if kind in k_kernel:
        ptrs = arr["name"]
        for p in np.unique(ptrs).tolist():
            if p not in names:
                names[p] = ctypes.string_at(p).decode("utf-8", "replace") if p else "<unnamed kernel>"
        labels = _kernel_labels(ptrs, names)
        is_kernel, nbytes = True, None
    elif kind == k_memcpy:
        labels = _memcpy_labels(arr["copy_kind"], memcpy_name)
        is_kernel, nbytes = False, arr["bytes"]
    elif kind == k_memset:
        labels = _const_labels(len(arr), "memset")
        is_kernel, nbytes = False, arr["bytes"]
    else:
        return
    out.max_cid = max(out.max_cid, int(cids.max()))
    out.count += len(arr)
    out.chunks.append((labels, is_kernel, cids, arr["device_id"], arr["start"], arr["end"], nbytes, stream, gnode))


def _kernel_labels(ptrs, names):
    return lambda: [names[p] for p in ptrs.tolist()]


def _memcpy_labels(kinds, memcpy_name):
    return lambda: [memcpy_name(k) for k in kinds.tolist()]


def _const_labels(n, label):
    return lambda: [label] * n


def _by_attributes(objs: list, kinds, memcpy_name, out: Records) -> None:
    """Record classes without a dtype: read attribute by attribute."""
    k_kernel, k_memcpy, k_memset, k_driver = kinds[:4]
    k_ext = kinds[4] if len(kinds) > 4 else -1
    for a in objs:
        kind = int(a.kind)
        if kind in k_kernel:
            name, nbytes = a.name or "<unnamed kernel>", None
        elif kind == k_memcpy:
            name, nbytes = memcpy_name(a.copy_kind), int(a.bytes)
        elif kind == k_memset:
            name, nbytes = "memset", int(a.bytes)
        elif kind == k_driver:
            out.loose_api[int(a.correlation_id)] = (int(a.thread_id) & TID_MASK, int(a.start))
            continue
        elif kind == k_ext:
            out.loose_ext[int(a.correlation_id)] = int(a.external_id)
            continue
        else:
            continue
        cid = int(a.correlation_id)
        out.max_cid = max(out.max_cid, cid)
        out.count += 1
        out.loose.append((cid, name, kind in k_kernel, int(a.device_id), int(a.start), int(a.end), nbytes,
                           int(getattr(a, "stream_id", 0) or 0), int(getattr(a, "graph_node_id", 0) or 0)))
