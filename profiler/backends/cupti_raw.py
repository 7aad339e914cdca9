"""CUPTI activity buffers taken from libcupti itself (``cupti_records="raw"``, profiler/options.py).

cupti-python's buffer-completed callback builds one Python object per record (each a copy of its
struct) on CUPTI's thread, under the GIL, before any code of kprof runs; a launch-bound training loop
pays that for every kernel and launch record while it runs.  Here kprof hands libcupti its own
buffer callbacks through ctypes (``cuptiActivityRegisterCallbacks``; cupti-python's registration is
replaced, its subscriber and everything else stay): a completed buffer is only kept, no Python runs
per record, and the buffers are decoded at the flush -- or in the callback once more than
``max_bytes`` are held, so memory stays bounded.

Decoding walks each buffer's records (CUPTI packs them back to back, each starting with its kind):
the first buffer with a new kind is walked with ``cuptiActivityGetNextRecord``, which also gives the
kind's record size; later buffers are walked with the sizes learned, in Python, then each kind's
records are gathered into one numpy array of cupti-python's dtype for that struct (the one whose size
fits) and handed to :func:`profiler.backends.cupti_records.add_columns`.
"""
from __future__ import annotations

import ctypes
import os
import threading
import time
from collections import defaultdict
from typing import Any, Callable, Dict, List, Optional, Tuple

import numpy as np

from . import cupti_records

_ns = time.perf_counter_ns
_u8p = ctypes.POINTER(ctypes.c_uint8)
REQUESTED = ctypes.CFUNCTYPE(None, ctypes.POINTER(_u8p), ctypes.POINTER(ctypes.c_size_t),
                             ctypes.POINTER(ctypes.c_size_t))
COMPLETED = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_uint32, _u8p, ctypes.c_size_t, ctypes.c_size_t)

# kind -> cupti-python dtype names of the structs CUPTI may write for it, newest first
_DTYPES = {
    "CONCURRENT_KERNEL": ("activity_kernel13", "activity_kernel12", "activity_kernel11", "activity_kernel10",
                          "activity_kernel9"),
    "KERNEL": ("activity_kernel13", "activity_kernel12", "activity_kernel11", "activity_kernel10", "activity_kernel9"),
    "MEMCPY": ("activity_memcpy7", "activity_memcpy6", "activity_memcpy5"),
    "MEMSET": ("activity_memset5", "activity_memset4"),
    "DRIVER": ("activity_api",),
    "RUNTIME": ("activity_api",),
    "EXTERNAL_CORRELATION": ("activity_external_correlation",),
}


class _DlInfo(ctypes.Structure):
    _fields_ = [("dli_fname", ctypes.c_char_p), ("dli_fbase", ctypes.c_void_p),
                ("dli_sname", ctypes.c_char_p), ("dli_saddr", ctypes.c_void_p)]


def _path_of(addr: int) -> Optional[str]:
    """The file of the loaded library that holds code address ``addr`` (``dladdr``), or None."""
    try:
        libc = ctypes.CDLL(None)
        dladdr = libc.dladdr
    except (OSError, AttributeError):
        return None
    dladdr.argtypes = [ctypes.c_void_p, ctypes.POINTER(_DlInfo)]
    info = _DlInfo()
    if not addr or not dladdr(ctypes.c_void_p(addr), ctypes.byref(info)) or not info.dli_fname:
        return None
    return info.dli_fname.decode(errors="replace")


def _cupti_python_lib() -> Optional[str]:
    """The file of the libcupti cupti-python itself calls (its resolved ``cuptiActivityRegisterCallbacks``),
    or None: the one library whose callbacks kprof may replace."""
    try:
        from cupti._internal import cupti as internal
        return _path_of(int(internal._inspect_function_pointer("__cuptiActivityRegisterCallbacks")))
    except Exception:
        return None


def _mapped_cupti() -> List[str]:
    """Files named libcupti* mapped into this process (any suffix: a vendored copy may be renamed)."""
    out: List[str] = []
    try:
        with open("/proc/self/maps") as f:
            for line in f:
                parts = line.split(None, 5)
                if len(parts) == 6:
                    path = parts[5].strip()
                    base = path.rsplit("/", 1)[-1]
                    if base.startswith("libcupti") and ".so" in base and path not in out:
                        out.append(path)
    except OSError:
        pass
    return out


def libcupti_candidates() -> List[str]:
    """Where :func:`find_libcupti` looks, in order: cupti-python's own library, then every libcupti*
    mapped; said in ``skipped`` when none of them serves."""
    first = _cupti_python_lib()
    return ([first] if first else []) + [p for p in _mapped_cupti() if p != first]


def find_libcupti() -> Optional[ctypes.CDLL]:
    """The libcupti this process has loaded (cupti-python's), or None.  cupti-python's resolved entry
    point says which file it is; failing that, a libcupti* mapped into the process, then an already
    loaded ``libcupti.so.13``/``.12`` (``RTLD_NOLOAD``: never a second copy).  The H11b run
    (2026-11-28) found no ``/libcupti.so`` in the maps of a forked child where earlier runs had, and
    kprof fell back to cupti-python's per-record objects."""
    for path in libcupti_candidates():
        try:
            lib = ctypes.CDLL(path)
        except OSError:
            continue
        if hasattr(lib, "cuptiActivityRegisterCallbacks"):
            return lib
    noload = getattr(os, "RTLD_NOLOAD", 0)
    if noload:
        for name in ("libcupti.so.13", "libcupti.so.12", "libcupti.so"):
            try:
                lib = ctypes.CDLL(name, mode=noload)
            except OSError:
                continue
            if hasattr(lib, "cuptiActivityRegisterCallbacks"):
                return lib
    return None


def pick_dtype(cupti, kind_name: str, size: int):
    """cupti-python's dtype for a record of ``kind_name`` that takes ``size`` bytes in the buffer:
    the largest struct that fits (records are padded to 8 bytes), newest first among equals."""
    best = None
    for name in _DTYPES.get(kind_name, ()):
        dt = getattr(cupti, name + "_dtype", None)
        if dt is None or dt.itemsize > size:
            continue
        if best is None or dt.itemsize > best.itemsize:
            best = dt
    return best


class Walker:
    """Finds the records of a buffer: ``next_record(addr, valid, cur) -> next address or 0`` is CUPTI's
    iterator (``cur`` 0: the first); record sizes per kind are learned from it."""

    def __init__(self, next_record: Callable[[int, int, int], int], sizes: Optional[Dict[int, int]] = None):
        self.next_record = next_record
        self.sizes: Dict[int, int] = {} if sizes is None else sizes

    def offsets(self, arr, valid: int) -> Dict[int, List[int]]:
        """``{kind: [offset, ...]}`` of the records in the first ``valid`` bytes of ``arr``."""
        ints = memoryview(arr).cast("B").cast("i")
        sizes = self.sizes
        out: Dict[int, List[int]] = defaultdict(list)
        off = 0
        while off < valid:
            k = ints[off >> 2]
            size = sizes.get(k)
            if size is None:
                return self._walk_cupti(arr, valid)
            out[k].append(off)
            off += size
        if off != valid:  # a size learned wrong: trust CUPTI's own walk
            return self._walk_cupti(arr, valid)
        return out

    def _walk_cupti(self, arr, valid: int) -> Dict[int, List[int]]:
        base = ctypes.addressof(arr)
        ints = memoryview(arr).cast("B").cast("i")
        out: Dict[int, List[int]] = defaultdict(list)
        cur = self.next_record(base, valid, 0)
        while cur:
            nxt = self.next_record(base, valid, cur)
            off = cur - base
            k = ints[off >> 2]
            out[k].append(off)
            if nxt:
                self.sizes[k] = nxt - cur
            cur = nxt
        return out


# the fields cupti_records.add_columns reads
FIELDS = ("kind", "correlation_id", "start", "end", "device_id", "stream_id", "graph_node_id", "name", "bytes",
          "copy_kind", "thread_id", "external_id")


def gather(arr, valid: int, offsets: List[int], dtype) -> np.ndarray:
    """The :data:`FIELDS` of ``dtype`` of the records at ``offsets`` of ``arr``, as one structured
    array: one 1-D gather per field (records start 8-byte aligned and CUPTI's fields are naturally
    aligned), not a copy of every struct."""
    offs = np.asarray(offsets, dtype=np.int64)
    names = [f for f in FIELDS if f in dtype.names]
    out = np.empty(len(offs), dtype=[(f, dtype.fields[f][0]) for f in names])
    for f in names:
        ft, fo = dtype.fields[f][0], dtype.fields[f][1]
        size = ft.itemsize
        if fo % size:
            raw = np.frombuffer(arr, dtype=np.uint8, count=valid)
            idx = (offs + fo)[:, None] + np.arange(size, dtype=np.int64)
            out[f] = raw[idx].copy().view(ft).reshape(len(offs))
            continue
        col = np.frombuffer(arr, dtype=ft, count=valid // size)
        out[f] = col[(offs + fo) // size]
    return out


# record sizes per kind learned from cuptiActivityGetNextRecord, shared by every RawBuffers of the process
# (one libcupti): a profile started after another walks its buffers without CUPTI's iterator at once
LEARNED_SIZES: Dict[int, int] = {}
# buffers handed to libcupti and not completed yet, by address, shared by every RawBuffers of the process:
# a buffer handed out under one profile's registration may be completed into a later one's callback
OUTSTANDING: Dict[int, Any] = {}


class RawBuffers:
    """libcupti's buffer callbacks: buffers handed out, completed ones kept until :meth:`take`.

    ``stats`` counts what the completion callback did on CUPTI's thread (buffers, bytes, ns spent
    in it, ``on_full`` calls): the overhead bench reports it per profiled block."""

    def __init__(self, lib, size: int, max_bytes: int, on_full: Callable[[], None]):
        self.lib = lib
        self.size = int(size)
        self.max_bytes = max_bytes
        self.on_full = on_full
        self.out: Dict[int, Any] = OUTSTANDING  # address -> buffer handed to CUPTI
        self.done: List[Tuple[Any, int]] = []   # (buffer, valid bytes), completed
        self.held = 0                           # bytes of the completed buffers kept
        self.eager = False                      # decode each buffer as it completes (delivery not deferred)
        self.lock = threading.Lock()
        self.errors: List[str] = []
        self._req = REQUESTED(self._requested)
        self._cmp = COMPLETED(self._completed)
        lib.cuptiActivityGetNextRecord.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.POINTER(ctypes.c_void_p)]
        lib.cuptiActivityGetNextRecord.restype = ctypes.c_int
        self._rec = ctypes.c_void_p()
        self.walker = Walker(self._next_record, LEARNED_SIZES)
        self.stats = {"buffers": 0, "bytes": 0, "callback_ns": 0, "full_calls": 0}

    def register(self) -> None:
        rc = self.lib.cuptiActivityRegisterCallbacks(self._req, self._cmp)
        if rc != 0:
            raise RuntimeError(f"cuptiActivityRegisterCallbacks returned {rc}")

    def _next_record(self, base: int, valid: int, cur: int) -> int:
        self._rec.value = cur or None
        if self.lib.cuptiActivityGetNextRecord(base, valid, ctypes.byref(self._rec)) != 0:
            return 0
        return self._rec.value or 0

    def _requested(self, buf, size, max_records) -> None:
        try:
            arr = (ctypes.c_uint8 * self.size)()   # malloc'd: aligned beyond the 8 bytes CUPTI needs
            self.out[ctypes.addressof(arr)] = arr
            buf[0] = ctypes.cast(arr, _u8p)
            size[0] = self.size
            max_records[0] = 0
        except Exception as e:  # CUPTI then drops records; never raise into C
            buf[0] = _u8p()
            size[0] = 0
            self._error(f"buffer request: {e}")

    def _completed(self, ctx, stream, buf, size, valid) -> None:
        t0 = _ns()
        try:
            addr = ctypes.cast(buf, ctypes.c_void_p).value or 0
            arr = self.out.pop(addr, None)
            if arr is None or not valid:
                return
            with self.lock:
                self.done.append((arr, int(valid)))
                self.held += len(arr)
                full = self.eager or self.held >= self.max_bytes
                st = self.stats
                st["buffers"] += 1
                st["bytes"] += int(valid)
            if full:
                st["full_calls"] += 1
                self.on_full()
        except Exception as e:
            self._error(f"buffer completed: {e}")
        finally:
            self.stats["callback_ns"] += _ns() - t0

    def _error(self, msg: str) -> None:
        if len(self.errors) < 20:
            self.errors.append(msg)

    def take(self, keep_bytes: Optional[int] = None) -> List[Tuple[Any, int]]:
        """The completed buffers, oldest first: all of them, or (``keep_bytes``) only the oldest ones
        beyond the newest ``keep_bytes`` -- past the memory bound, each completion then decodes about
        one buffer, instead of the whole bound at once inside the program's loop."""
        with self.lock:
            if keep_bytes is None:
                done, self.done, self.held = self.done, [], 0
                return done
            n = 0
            while n < len(self.done) and self.held > keep_bytes:
                self.held -= len(self.done[n][0])
                n += 1
            done, self.done = self.done[:n], self.done[n:]
        return done


def decode(cupti, buffers, walker: Walker, kinds, memcpy_name, names: Dict[int, str]) -> cupti_records.Records:
    """The records of completed raw ``buffers`` (``[(buffer, valid bytes)]``) as :class:`Records`."""
    out = cupti_records.Records()
    kind_names = {int(v): n for n, v in cupti.ActivityKind.__members__.items()}
    wanted = set(kinds[0]) | {k for k in kinds[1:] if isinstance(k, int) and k >= 0}
    for arr, valid in buffers:
        for k, offs in walker.offsets(arr, valid).items():
            if k not in wanted:
                continue
            size = walker.sizes.get(k)
            if size is None:  # only ever seen last in a buffer: the bytes left after it
                size = valid - offs[-1]
            dt = pick_dtype(cupti, kind_names.get(k, ""), size)
            if dt is None:
                raise ValueError(f"no cupti-python struct fits a {kind_names.get(k, k)} record of {size} bytes")
            cupti_records.add_columns(gather(arr, valid, offs, dt), kinds, memcpy_name, names, out)
    return out
