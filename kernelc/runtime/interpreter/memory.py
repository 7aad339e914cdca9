"""The interpreter's memory: kernel arguments mapped into one virtual address space.

Each array argument (numpy array, torch tensor on CPU or CUDA, any dtype, contiguous or strided) is
mapped as a byte buffer covering its whole underlying storage, at a base address that is a multiple
of 2**20 with 2**40 bytes of unmapped guard space between buffers (so 16-byte divisibility of data
pointers holds as on the GPU, and an out-of-bounds offset never lands in a neighbour, nor nearer to
it than to its own buffer: any int32 element offset of up to 16-byte elements is below 2**36). The pointer
passed to the kernel is ``base + storage_offset * itemsize``.

Host memory (numpy arrays, CPU tensors) is aliased, so stores land directly in the caller's array.
CUDA tensors are copied to the host before the launch and back after it. Arguments that share a
storage share one buffer, so aliasing between arguments behaves as on the GPU.

Loads and stores gather/scatter by address and check every active lane against its buffer; a lane
outside every buffer (or not aligned to its element size, which faults on the GPU too) raises
:class:`Fault`, which the builder turns into a user-facing error.
"""
from __future__ import annotations

import ctypes
from typing import Callable, List, Optional, Tuple

import numpy as np

GRANULE = 1 << 20
FIRST_BASE = 1 << 32  # above 4 GiB: a pointer truncated to 32 bits never stays valid
GUARD = 1 << 40
# Copy CPU tensors too (instead of aliasing them), as CUDA tensors always are: lets CPU-only tests
# exercise the copy-in / write-back path.
FORCE_HOST_COPY = False


class Fault(Exception):
    """An active lane addressed memory outside every mapped buffer (internal; see builder)."""

    def __init__(self, lane: int, addr: int, buffer: Optional["Buffer"], itemsize: int, reason: str = "oob"):
        super().__init__(f"fault at 0x{addr:x}")
        self.lane, self.addr, self.buffer, self.itemsize, self.reason = lane, addr, buffer, itemsize, reason


class Buffer:
    """One mapped storage: ``data`` is a uint8 numpy array aliasing (or copying) its bytes."""

    def __init__(self, base: int, data: np.ndarray, *, readonly: bool = False,
                 writeback: Optional[Callable[[], None]] = None, keepalive=None, desc: str = ""):
        self.base = base
        self.data = data
        self.size = int(data.size)
        self.readonly = readonly
        self.writeback = writeback
        self.keepalive = keepalive
        self.desc = desc
        self.args: List[Tuple[str, int, object]] = []  # (argument name, pointer value, kl element type)
        self._views = {}

    def typed(self, dt: np.dtype) -> np.ndarray:
        """The buffer viewed as ``dt`` elements (the tail that does not fill one element is dropped)."""
        v = self._views.get(dt)
        if v is None:
            n = self.size - self.size % dt.itemsize
            v = self.data[:n].view(dt)
            self._views[dt] = v
        return v

    def arg_for(self, addr: int):
        """(name, pointer, element type) of the argument that best explains ``addr``."""
        if not self.args:
            return None
        below = [a for a in self.args if a[1] <= addr]
        return max(below, key=lambda a: a[1]) if below else min(self.args, key=lambda a: a[1])


def _torch():
    import torch
    return torch


def _is_torch_tensor(x) -> bool:
    mod = type(x).__module__
    return mod.startswith("torch") and hasattr(x, "untyped_storage")


def _host_bytes(lo: int, n: int) -> np.ndarray:
    """A writable uint8 array aliasing ``n`` bytes of host memory at ``lo``."""
    if n == 0:
        return np.zeros(0, np.uint8)
    return np.ctypeslib.as_array((ctypes.c_uint8 * n).from_address(lo))


class Memory:
    """All buffers of one launch, sorted by base address."""

    def __init__(self):
        self.buffers: List[Buffer] = []
        self._by_key = {}
        self._next = FIRST_BASE
        self._bases = np.zeros(0, np.int64)
        self._ends = np.zeros(0, np.int64)

    # -- mapping ----------------------------------------------------------------------------
    def _add(self, key, make) -> Buffer:
        buf = self._by_key.get(key)
        if buf is None:
            data, readonly, writeback, keep, desc = make()
            buf = Buffer(self._next, data, readonly=readonly, writeback=writeback, keepalive=keep, desc=desc)
            self._next = (self._next + buf.size + GUARD + GRANULE - 1) // GRANULE * GRANULE
            self.buffers.append(buf)
            self._by_key[key] = buf
            self._bases = np.array([b.base for b in self.buffers], np.int64)
            self._ends = np.array([b.base + b.size for b in self.buffers], np.int64)
        return buf

    def map(self, obj, name: str, elt) -> int:
        """Map an array-like argument; returns the pointer value (an int64 address)."""
        if isinstance(obj, np.ndarray):
            buf, ptr = self._map_numpy(obj)
        elif _is_torch_tensor(obj):
            buf, ptr = self._map_torch(obj)
        else:
            raise TypeError(f"cannot map {type(obj).__name__} into interpreter memory")
        buf.args.append((name, ptr, elt))
        return ptr

    def _map_numpy(self, arr: np.ndarray):
        root = arr
        while isinstance(root.base, np.ndarray):
            root = root.base
        lo, hi = np.lib.array_utils.byte_bounds(root)
        n = hi - lo

        def make():
            return _host_bytes(lo, n), not root.flags.writeable, None, root, "numpy array"

        buf = self._add(("host", lo, n), make)
        addr0 = arr.__array_interface__["data"][0]
        return buf, buf.base + (addr0 - lo)

    def _map_torch(self, t):
        torch = _torch()
        if t.layout != torch.strided:
            raise TypeError(f"the interpreter needs dense (strided) tensors, got layout {t.layout}")
        if t.device.type == "meta":
            raise TypeError("meta tensors have no data; the interpreter needs real tensors")
        st = t.untyped_storage()
        nbytes = st.nbytes()
        dev = t.device

        def make():
            with torch.no_grad():
                flat = torch.empty(0, dtype=torch.uint8, device=dev).set_(st, 0, (nbytes,), (1,))
                if dev.type == "cpu" and not FORCE_HOST_COPY:
                    return flat.numpy(), False, None, (flat, st), "CPU tensor"
                host = flat.to("cpu", copy=True)

                def writeback():
                    with torch.no_grad():
                        flat.copy_(host)

                return host.numpy(), False, writeback, (flat, host, st), f"{dev.type} tensor"

        buf = self._add(("torch", str(dev), st.data_ptr(), nbytes), make)
        return buf, buf.base + t.storage_offset() * t.element_size()

    def write_back(self):
        for b in self.buffers:
            if b.writeback is not None:
                b.writeback()

    # -- address resolution ------------------------------------------------------------------
    def nearest(self, addr: int) -> Optional[Buffer]:
        """The buffer an out-of-bounds address most likely meant (None for null-ish addresses)."""
        if not self.buffers or addr < GRANULE:
            return None
        i = int(np.searchsorted(self._bases, addr, side="right")) - 1
        cands = []
        if i >= 0:
            cands.append((abs(addr - int(self._ends[i])) if addr >= self._ends[i] else 0, i))
        if i + 1 < len(self.buffers):
            cands.append((int(self._bases[i + 1]) - addr, i + 1))
        return self.buffers[min(cands)[1]] if cands else None

    def _resolve(self, addr: np.ndarray, isz: int, lanes: np.ndarray):
        """Buffer index per address; raises Fault for the first address not fully inside a buffer."""
        idx = np.searchsorted(self._bases, addr, side="right") - 1
        if len(self.buffers) == 0:
            ok = np.zeros(addr.shape, bool)
        else:
            ic = np.maximum(idx, 0)
            ok = (idx >= 0) & (addr + isz <= self._ends[ic])
        if not ok.all():
            bad = int(np.argmin(ok))
            a = int(addr[bad])
            raise Fault(int(lanes[bad]), a, self.nearest(a), isz)
        if isz > 1:
            mis = (addr - self._bases[idx]) % isz != 0
            if mis.any():  # the GPU faults with "misaligned address"
                bad = int(np.argmax(mis))
                raise Fault(int(lanes[bad]), int(addr[bad]), self.buffers[int(idx[bad])], isz, "misaligned")
        return idx

    def _groups(self, addr, isz, lanes):
        idx = self._resolve(addr, isz, lanes)
        if idx.size == 0:
            return
        first = idx[0]
        if (idx == first).all():
            yield self.buffers[int(first)], slice(None)
            return
        for u in np.unique(idx):
            yield self.buffers[int(u)], np.nonzero(idx == u)[0]

    # -- access ------------------------------------------------------------------------------
    def load(self, addr: np.ndarray, dt: np.dtype, mask: Optional[np.ndarray]) -> np.ndarray:
        """Gather elements of ``dt`` at ``addr`` (any shape); masked-off lanes give zeros."""
        shape = addr.shape
        flat = addr.reshape(-1).astype(np.int64, copy=False)
        out = np.zeros(flat.shape, dt)
        lanes = np.arange(flat.size) if mask is None else np.nonzero(mask.reshape(-1))[0]
        act = flat if mask is None else flat[lanes]
        isz = dt.itemsize
        for buf, sel in self._groups(act, isz, lanes):
            off = act[sel] - buf.base
            dst = lanes[sel]
            out[dst] = buf.typed(dt)[off // isz]  # _resolve checked alignment
        return out.reshape(shape)

    def store(self, addr: np.ndarray, values: np.ndarray, mask: Optional[np.ndarray]) -> None:
        dt = values.dtype
        flat = addr.reshape(-1).astype(np.int64, copy=False)
        vals = np.broadcast_to(values, addr.shape).reshape(-1)
        lanes = np.arange(flat.size) if mask is None else np.nonzero(mask.reshape(-1))[0]
        act = flat if mask is None else flat[lanes]
        isz = dt.itemsize
        for buf, sel in self._groups(act, isz, lanes):
            if buf.readonly:
                raise Fault(int(lanes[sel][0]), int(act[sel][0]), buf, isz, "readonly")
            off = act[sel] - buf.base
            src = vals[lanes[sel]]
            buf.typed(dt)[off // isz] = src
