"""``InterpreterBuilder``: executes tile-IR ops eagerly on numpy arrays.

Handles are numpy arrays (0-d for scalars) whose dtype is exactly the element type's numpy dtype
(``ml_dtypes`` for bf16/fp8); pointers are ``int64`` addresses into the launch's
:class:`~kernelc.runtime.interpreter.memory.Memory`. The op names and attributes are those of
``kernelc/compiler/ir/ops.py`` as emitted by ``kernelc/language/semantic.py``; numeric rules are in
:mod:`~kernelc.runtime.interpreter.numerics`.
"""
from __future__ import annotations

import sys
from typing import List, Optional

import numpy as np

from ...errors import InterpreterError, format_source_snippet
from ...language import dtypes as T, syntax
from ...language.core import DeviceFunction, tensor
from . import numerics as N
from .locate import current_location
from .descriptors import IMPLS as _DESCRIPTOR_IMPLS, DescriptorHandle
from .memory import Fault

_F32 = np.dtype(np.float32)
_F64 = np.dtype(np.float64)

# numpy dtype -> kernelc scalar type (pointers are int64 handles; their casts are bit-preserving).
_NP_TO_KL = {}
for _t in T.ALL_DTYPES:
    _NP_TO_KL[N.np_dtype(_t)] = _t


def _kl_of(arr: np.ndarray):
    return _NP_TO_KL[arr.dtype]


def _is_float(d: np.dtype) -> bool:
    return d.kind == "f" or d.name in ("bfloat16", "float8_e4m3fn", "float8_e5m2")


def _is_narrow_float(d: np.dtype) -> bool:
    """fp16, bf16 and fp8: computed in fp32 and rounded back."""
    return _is_float(d) and d not in (_F32, _F64)


_FLOAT_BIN = {"fadd": np.add, "fsub": np.subtract, "fmul": np.multiply, "fdiv": np.true_divide,
              "frem": np.fmod}
_INT_BIN = {"add": np.add, "sub": np.subtract, "mul": np.multiply, "and": np.bitwise_and,
            "or": np.bitwise_or, "xor": np.bitwise_xor, "smax": np.maximum, "smin": np.minimum,
            "umax": np.maximum, "umin": np.minimum}
_MATH = {"fneg": np.negative, "fabs": np.abs, "exp": np.exp, "exp2": np.exp2, "log": np.log, "log2": np.log2,
         "sqrt": np.sqrt, "sqrt_rn": np.sqrt, "rsqrt": lambda x: 1 / np.sqrt(x), "sin": np.sin, "cos": np.cos,
         "erf": N.erf, "floor": np.floor, "ceil": np.ceil, "tanh": np.tanh}


class InterpreterBuilder:
    """The numpy builder: ``semantic.py`` calls it while the user's kernel function runs."""

    is_interpreter = True

    def __init__(self, fn, grid, memory, kernel_name: str = ""):
        self.fn = fn
        self.grid = tuple(int(g) for g in grid)
        self.memory = memory
        self.kernel_name = kernel_name or getattr(fn, "__name__", "kernel")
        self.pid = (0, 0, 0)
        code = getattr(getattr(fn, "fn", fn), "__code__", None)
        self.known_codes = {code} if code is not None else set()

    # -- the builder contract -----------------------------------------------------------------
    def create(self, op: str, operands: list, ty, **attrs):
        impl = _IMPLS.get(op)
        if impl is None:
            raise NotImplementedError(f"the interpreter does not implement the op '{op}'")
        r = impl(self, [o if isinstance(o, DescriptorHandle) else np.asarray(o) for o in operands], ty, **attrs)
        if ty is None:
            return None
        if isinstance(ty, T.tensor_descriptor_type):
            return r  # a DescriptorHandle (descriptors.py)
        return _fit(r, ty)

    def create_multi(self, op: str, operands: list, tys: list, **attrs):
        if op != "split":
            raise NotImplementedError(f"the interpreter does not implement the multi-result op '{op}'")
        x = np.asarray(operands[0])
        return [_fit(N.contig(x[..., i]), t) for i, t in enumerate(tys)]

    def constant(self, value, ty):
        return N.constant(value, ty)

    def reduce(self, inputs: List[tensor], axis: int, combine_fn, kind: Optional[str]):
        arrs = [np.asarray(t.handle) for t in inputs]
        ptrs = any(t.dtype.is_ptr() for t in inputs)  # the combine function decides (and rejects)
        res = None if ptrs else self._reduce_fast(arrs, axis, kind)
        if res is None:
            res = self._reduce_tree(inputs, arrs, axis, combine_fn)
        shape = arrs[0].shape[:axis] + arrs[0].shape[axis + 1:]
        return [(_fit(h, T.block_type(e, shape) if shape else e), e) for h, e in res]

    def scan(self, inputs: List[tensor], axis: int, combine_fn, kind: Optional[str], reverse: bool):
        arrs = [np.asarray(t.handle) for t in inputs]
        if reverse:
            arrs = [np.flip(a, axis) for a in arrs]
        res = None if any(t.dtype.is_ptr() for t in inputs) else self._scan_fast(arrs, axis, kind)
        if res is None:
            res = self._scan_tree(inputs, arrs, axis, combine_fn)
        if reverse:
            res = [(np.ascontiguousarray(np.flip(h, axis)), e) for h, e in res]
        return [(_fit(h, T.block_type(e, arrs[0].shape)), e) for h, e in res]

    def map_elementwise(self, fn, args: List[tensor], shape):
        """``fn`` called once per element on scalars (it may branch on their values)."""
        f = getattr(fn, "fn", fn)
        code = getattr(f, "__code__", None)
        if code is not None and not str(getattr(f, "__module__", "")).startswith("kernelc."):
            self.known_codes.add(code)
        from ...language import semantic
        outs, tys = None, None
        for idx in np.ndindex(*shape) if shape else [()]:
            scal = [tensor(N.contig(np.asarray(a.handle)[idx]), a.dtype) for a in args]
            r = f(*scal)
            single = not isinstance(r, (tuple, list))
            rs = [semantic.to_tensor(x) for x in ([r] if single else r)]
            if outs is None:
                tys = [x.dtype for x in rs]
                outs = [np.zeros(shape, N.np_dtype(t)) for t in tys]
            for o, x, t in zip(outs, rs, tys):
                if x.dtype != t:
                    raise TypeError(f"map_elementwise() function returned {x.dtype} for one element and {t} "
                                    f"for another; cast inside the function")
                o[idx] = np.asarray(x.handle)
        res = [self._wrap(o, t) for o, t in zip(outs, tys)]
        return res[0] if single else tuple(res)

    # -- locations and errors ------------------------------------------------------------------
    def where(self):
        loc = current_location(self.known_codes)
        if loc is None:
            f = getattr(self.fn, "fn", self.fn)
            return f.__code__.co_filename, f.__code__.co_firstlineno, None, self.kernel_name
        return loc

    def error(self, headline: str, detail: str, loc=None, **info) -> InterpreterError:
        file, line, col, func = loc or self.where()
        where = f"{file}:{line}"
        fn_part = f" (in {func})" if func and func != self.kernel_name else ""
        head = f"{headline} in kernel {self.kernel_name} at {where}{fn_part}, program id {self.pid}:"
        snippet = format_source_snippet(file, line, col)
        err = InterpreterError("\n".join(x for x in (head, snippet, detail) if x))
        err.file, err.line, err.col, err.program_id, err.kernel = file, line, col, self.pid, self.kernel_name
        for k, v in info.items():
            setattr(err, k, v)
        return err

    def fault_error(self, what: str, f: Fault, shape) -> InterpreterError:
        lane = tuple(int(i) for i in np.unravel_index(f.lane, shape)) if shape else ()
        lane_s = f"lane {lane}" if shape else "scalar access"
        buf = f.buffer
        arg = buf.arg_for(f.addr) if buf is not None else None
        if f.reason == "readonly":
            name = arg[0] if arg else "?"
            return self.error(f"{what} into read-only memory",
                              f"argument '{name}' is a read-only numpy array (flags.writeable is False); "
                              f"pass a writable copy", arg_name=name, offset=None, kind=what)
        if f.reason == "misaligned":
            name = arg[0] if arg else "?"
            return self.error(f"misaligned {what}",
                              f"{lane_s}: address 0x{f.addr:x} in argument '{name}' is not a multiple of the "
                              f"element size ({f.itemsize} bytes); the GPU faults with 'misaligned address'",
                              arg_name=name, offset=None, kind=what, address=f.addr)
        if arg is None:
            return self.error(f"out-of-bounds {what}",
                              f"{lane_s}: address 0x{f.addr:x} is not inside any argument's memory",
                              arg_name=None, offset=None, kind=what, address=f.addr)
        name, ptr, elt = arg
        isz = f.itemsize
        delta = f.addr - ptr
        off = delta // isz if delta % isz == 0 else delta / isz
        n = max(0, (buf.base + buf.size - ptr) // isz)
        detail = (f"{lane_s}: argument '{name}' element offset {off} is outside its buffer of {n} elements "
                  f"(valid offsets 0..{n - 1}); mask the access (mask=...) or fix the offsets")
        return self.error(f"out-of-bounds {what}", detail, arg_name=name, offset=off, size=n, kind=what,
                          lane=lane)

    @staticmethod
    def _kl_of(arr: np.ndarray):
        return _kl_of(arr)

    # -- combine-function helpers ---------------------------------------------------------------
    def _call_combine(self, combine_fn, args: List[tensor]):
        f = getattr(combine_fn, "fn", combine_fn)
        if isinstance(combine_fn, DeviceFunction):
            syntax.check(combine_fn)  # what the compiler rejects when it inlines the combine function
        code = getattr(f, "__code__", None)
        if code is not None and not str(getattr(f, "__module__", "")).startswith("kernelc."):
            self.known_codes.add(code)  # user code: errors inside it point at its lines
        res = f(*args)
        if isinstance(res, tensor) or not isinstance(res, (tuple, list)):
            res = [res]
        from ...language import semantic
        out = []
        shape = args[0].handle.shape
        for r in res:
            r = semantic.to_tensor(r)
            h = np.asarray(r.handle)
            if h.shape != shape:
                h = np.broadcast_to(h, shape)
            out.append((h, r.dtype))
        return out

    def _wrap(self, arr: np.ndarray, elt) -> tensor:
        ty = T.block_type(elt, arr.shape) if arr.ndim else elt
        return tensor(arr, ty)

    # -- reductions ------------------------------------------------------------------------------
    def _reduce_fast(self, arrs, axis, kind):
        if kind in ("add", "max", "min", "xor") and len(arrs) == 1:
            x = arrs[0]
            d = x.dtype
            if d == np.bool_:
                return None
            if kind == "xor":
                if _is_float(d):
                    return None
                r = np.bitwise_xor.reduce(x, axis=axis)
            elif _is_float(d):
                xf = x.astype(_F32) if _is_narrow_float(d) else x
                uf = {"add": np.add, "max": np.fmax, "min": np.fmin}[kind]
                r = uf.reduce(xf, axis=axis)
                r = N.float_to_float(np.asarray(r), d)
            else:
                uf = {"add": np.add, "max": np.maximum, "min": np.minimum}[kind]
                r = uf.reduce(x, axis=axis, dtype=d) if kind == "add" else uf.reduce(x, axis=axis)
            return [(np.asarray(r, dtype=d), _kl_of(x))]
        if kind in ("argmax", "argmin") and len(arrs) == 2:
            v, ix = arrs
            if _is_float(v.dtype) and np.isnan(v.astype(_F64)).any():
                return None  # NaN handling follows the combine function exactly
            vv = v.astype(_F64) if _is_narrow_float(v.dtype) else v
            pos = (np.argmax if kind == "argmax" else np.argmin)(vv, axis=axis)  # first index on ties
            pos = np.expand_dims(pos, axis)
            rv = np.take_along_axis(v, pos, axis).squeeze(axis)
            ri = np.take_along_axis(ix, pos, axis).squeeze(axis)
            return [(np.asarray(rv), _kl_of(v)), (np.asarray(ri), _kl_of(ix))]
        return None

    def _reduce_tree(self, inputs, arrs, axis, combine_fn):
        """Order-preserving pairwise tree: combine(x[2i], x[2i+1]) level by level."""
        xs = [np.moveaxis(a, axis, -1) for a in arrs]
        elts = [t.dtype for t in inputs]
        n = xs[0].shape[-1]
        while n > 1:
            m = n // 2
            left = [self._wrap(np.ascontiguousarray(x[..., 0:2 * m:2]), e) for x, e in zip(xs, elts)]
            right = [self._wrap(np.ascontiguousarray(x[..., 1:2 * m:2]), e) for x, e in zip(xs, elts)]
            res = self._call_combine(combine_fn, left + right)
            if len(res) != len(xs):
                raise TypeError(f"the combine function returned {len(res)} values for {len(xs)} reduce inputs")
            new = []
            for (h, e), x in zip(res, xs):
                if n % 2:
                    tail = x[..., n - 1:n]
                    if tail.dtype != h.dtype:
                        tail = N.cast(tail, _kl_of(tail), e)
                    h = np.concatenate([h, tail], axis=-1)
                new.append(h)
            xs = new
            elts = [e for _, e in res]
            n = xs[0].shape[-1]
        return [(N.contig(x[..., 0]), e) for x, e in zip(xs, elts)]

    def _scan_fast(self, arrs, axis, kind):
        if kind not in ("add", "mul") or len(arrs) != 1:
            return None
        x = arrs[0]
        d = x.dtype
        if d == np.bool_:
            return None
        f = np.cumsum if kind == "add" else np.cumprod
        if _is_narrow_float(d):
            r = N.float_to_float(f(x.astype(_F32), axis=axis), d)
        else:
            r = f(x, axis=axis, dtype=d)
        return [(np.asarray(r, dtype=d), _kl_of(x))]

    def _scan_tree(self, inputs, arrs, axis, combine_fn):
        """Hillis-Steele inclusive scan: x[i] = combine(x[i-d], x[i]) for d = 1, 2, 4, ..."""
        xs = [np.moveaxis(a, axis, -1) for a in arrs]
        elts = [t.dtype for t in inputs]
        n = xs[0].shape[-1]
        d = 1
        while d < n:
            left = [self._wrap(np.ascontiguousarray(x[..., :n - d]), e) for x, e in zip(xs, elts)]
            right = [self._wrap(np.ascontiguousarray(x[..., d:]), e) for x, e in zip(xs, elts)]
            res = self._call_combine(combine_fn, left + right)
            if len(res) != len(xs):
                raise TypeError(f"the combine function returned {len(res)} values for {len(xs)} scan inputs")
            new = []
            for (h, e), x in zip(res, xs):
                head = x[..., :d]
                if head.dtype != h.dtype:
                    head = N.cast(head, _kl_of(head), e)
                new.append(np.concatenate([head, h], axis=-1))
            xs = new
            elts = [e for _, e in res]
            d *= 2
        return [(np.ascontiguousarray(np.moveaxis(x, -1, axis)), e) for x, e in zip(xs, elts)]

    # -- memory ------------------------------------------------------------------------------------
    def _load(self, ops, ty, cache="", eviction="", volatile=False):
        ptr = ops[0]
        mask = ops[1] if len(ops) > 1 else None
        d = N.np_dtype(ty)
        try:
            out = self.memory.load(ptr, d, mask)
        except Fault as f:
            raise self.fault_error("load", f, ptr.shape) from None
        if mask is not None and len(ops) > 2:
            out = np.where(mask, out, ops[2])
        return out

    def _store(self, ops, ty, cache="", eviction=""):
        ptr, val = ops[0], ops[1]
        mask = ops[2] if len(ops) > 2 else None
        try:
            self.memory.store(ptr, val, mask)
        except Fault as f:
            raise self.fault_error("store", f, ptr.shape) from None

    def _active(self, ptr, mask):
        flat = ptr.reshape(-1).astype(np.int64)
        lanes = np.arange(flat.size) if mask is None else np.nonzero(np.broadcast_to(mask, ptr.shape).reshape(-1))[0]
        return flat, lanes

    def _locate_all(self, what, ptr, lanes, isz):
        """(buffer, byte offset) per active lane, or the out-of-bounds error before any effect."""
        flat = ptr.reshape(-1).astype(np.int64)
        mem = self.memory
        try:
            idx = mem._resolve(flat[lanes], isz, lanes)
        except Fault as f:
            raise self.fault_error(what, f, ptr.shape) from None
        out = []
        for k, lane in enumerate(lanes):
            buf = mem.buffers[int(idx[k])]
            if buf.readonly:
                raise self.fault_error(what, Fault(int(lane), int(flat[lane]), buf, isz, "readonly"), ptr.shape)
            out.append((buf, int(flat[lane]) - buf.base))
        return out

    def _atomic_rmw(self, ops, ty, kind, sem="acq_rel", scope="gpu"):
        ptr, val = ops[0], ops[1]
        mask = ops[2] if len(ops) > 2 else None
        d = N.np_dtype(ty)
        shape = ptr.shape
        _, lanes = self._active(ptr, mask)
        vals = np.broadcast_to(val, shape).reshape(-1)
        old = np.zeros(ptr.size, d)
        locs = self._locate_all("atomic", ptr, lanes, d.itemsize)
        for lane, (buf, off) in zip(lanes, locs):  # sequential, in lane order
            cur = buf.data[off:off + d.itemsize].view(d).copy()
            old[lane] = cur[0]
            new = _rmw(kind, cur, vals[lane:lane + 1])
            buf.data[off:off + d.itemsize] = np.ascontiguousarray(new, dtype=d).view(np.uint8)
        return old.reshape(shape)

    def _atomic_cas(self, ops, ty, sem="acq_rel", scope="gpu"):
        ptr, cmp, val = ops
        d = N.np_dtype(ty)
        shape = ptr.shape
        _, lanes = self._active(ptr, None)
        cmps = np.broadcast_to(cmp, shape).reshape(-1)
        vals = np.broadcast_to(val, shape).reshape(-1)
        old = np.zeros(ptr.size, d)
        locs = self._locate_all("atomic", ptr, lanes, d.itemsize)
        for lane, (buf, off) in zip(lanes, locs):
            raw = buf.data[off:off + d.itemsize]
            old[lane] = raw.view(d)[0]
            if bytes(raw) == np.ascontiguousarray(cmps[lane:lane + 1]).view(np.uint8).tobytes():
                buf.data[off:off + d.itemsize] = np.ascontiguousarray(vals[lane:lane + 1]).view(np.uint8)
        return old.reshape(shape)

    # -- debugging ---------------------------------------------------------------------------------
    def _print(self, ops, ty, prefix="", hex=False, types=()):
        x, y, z = self.pid
        pfx = str(prefix).strip()
        many = len(ops) > 1
        out = sys.stdout
        for k, h in enumerate(ops):
            kl_t = T.scalar_of(types[k]) if k < len(types) else _kl_of(h)
            suffix = f" (operand {k})" if many else ""
            for idx in np.ndindex(*h.shape):
                v = _format_value(h[idx], kl_t, hex)
                head = f"pid ({x}, {y}, {z}) idx ({', '.join(str(i) for i in idx)})"
                out.write(" ".join(p for p in (head, pfx + suffix if (pfx or suffix) else "", v) if p) + "\n")
        if not ops:
            out.write(f"pid ({x}, {y}, {z}) {pfx}\n")

    def _assert(self, ops, ty, msg=""):
        cond = ops[0]
        if not np.all(cond):
            bad = tuple(int(i) for i in np.argwhere(~np.asarray(cond, bool))[0]) if cond.ndim else ()
            at = f" at index {bad}" if cond.ndim else ""
            raise self.error("device assertion failed", f"assertion failed{at}: {msg}" if msg else
                             f"assertion failed{at}", message=msg, index=bad)

    def _hint(self, ops, ty, **attrs):
        x = ops[0]
        mult = attrs.get("multiple_of")
        if mult and x.ndim == 0 and not T.scalar_of(ty).is_ptr():
            m = int(mult[0])
            if int(x) % m:
                raise self.error("broken kl.multiple_of promise",
                                 f"the value {int(x)} is not a multiple of {m}; on the GPU the compiler would "
                                 f"generate wrong code from this hint", value=int(x), multiple=m)
        return x

    # -- linear algebra ----------------------------------------------------------------------------
    def _dot(self, ops, ty, input_precision="tf32", max_num_imprecise_acc=0):
        a, b, acc = ops
        d = N.np_dtype(ty)
        if a.dtype == _F64 or b.dtype == _F64:
            r = np.matmul(a.astype(_F64), b.astype(_F64)) + acc.astype(_F64)
            return N.float_to_float(r, d) if _is_float(d) else r.astype(d)
        if a.dtype == _F32:
            if input_precision == "tf32":
                a, b = N.round_tf32(a), N.round_tf32(b)
            r = np.matmul(a.astype(_F64), b.astype(_F64)) + acc.astype(_F64)
            return N.float_to_float(r, d)
        if a.dtype in N.FP8_NAMES and b.dtype in N.FP8_NAMES:
            # fp8 x fp8 products are exact; summed in fp64 and rounded once to fp32 they give the dot as
            # exactly as fp32 can hold it (the GPU's accumulation differs only by its rounding along K)
            r = np.matmul(a.astype(_F64), b.astype(_F64)) + acc.astype(_F64)
            return N.float_to_float(r.astype(_F32) if d == _F32 else r, d)
        if _is_float(a.dtype):
            r = np.matmul(a.astype(_F32), b.astype(_F32)) + acc.astype(_F32)
            return N.float_to_float(r, d)
        r = np.matmul(a.astype(np.int64), b.astype(np.int64)) + acc.astype(np.int64)
        return r.astype(d)


# ---------------------------------------------------------------------------------------------
# Op implementations: f(builder, operand arrays, result type, **attrs) -> array
# ---------------------------------------------------------------------------------------------


def _fit(r, ty):
    d = N.np_dtype(ty)
    shape = T.shape_of(ty)
    r = np.asarray(r)
    if r.dtype != d:
        r = r.astype(d)
    if r.shape != shape:
        try:
            r = np.broadcast_to(r, shape)
        except ValueError:
            raise RuntimeError(f"kernelc interpreter bug: a value of shape {r.shape} was produced "
                               f"for type {ty}") from None
    return r


def _rmw(kind, cur, val):
    d = cur.dtype
    if kind == "fadd":
        return N.fbinary(np.add, cur, val, d)
    if kind == "add":
        return N.ibinary(np.add, cur, val)
    if kind in ("max", "umax"):
        return np.maximum(cur, val)
    if kind in ("min", "umin"):
        return np.minimum(cur, val)
    if kind == "fmax":
        return N.fbinary(np.fmax, cur, val, d)
    if kind == "fmin":
        return N.fbinary(np.fmin, cur, val, d)
    if kind == "xchg":
        return val.astype(d)
    if kind == "and":
        return np.bitwise_and(cur, val)
    if kind == "or":
        return np.bitwise_or(cur, val)
    if kind == "xor":
        return np.bitwise_xor(cur, val)
    raise NotImplementedError(f"atomic kind {kind!r}")


def _format_value(v, ty, hex_):
    if hex_:
        a = np.asarray(v).reshape(1)
        if a.dtype == np.bool_:
            return f"0x{int(a[0]):x}"
        u = a.view({1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}[a.dtype.itemsize])[0]
        return f"0x{int(u):0{2 * a.dtype.itemsize}x}"
    if isinstance(v, (np.bool_, bool)):
        return str(int(v))
    if ty is not None and getattr(ty, "is_ptr", lambda: False)():
        return f"0x{int(v):x}"
    return str(v)


def _impl_float_bin(op):
    f = _FLOAT_BIN[op]
    return lambda b, o, ty, **a: N.fbinary(f, o[0], o[1], o[0].dtype)


def _impl_int_bin(op):
    f = _INT_BIN[op]
    return lambda b, o, ty, **a: N.ibinary(f, o[0], o[1])


def _impl_math(op):
    f = _MATH[op]
    return lambda b, o, ty, **a: N.funary(f, o[0], o[0].dtype)


def _minmax_f(which):
    def impl(b, o, ty, propagate_nan="none", **a):
        if propagate_nan == "all":
            f = np.maximum if which == "max" else np.minimum
        else:
            f = np.fmax if which == "max" else np.fmin
        return N.fbinary(f, o[0], o[1], o[0].dtype)
    return impl


def _cast(b, o, ty, rounding="rtne", **a):
    x = o[0]
    src = _kl_of(x)
    return N.cast(x, src, T.scalar_of(ty), rounding or "rtne")


def _addptr(b, o, ty, **a):
    p, off = o
    isz = T.scalar_of(ty).element_ty.itemsize
    return p.astype(np.int64) + off.astype(np.int64) * np.int64(isz)


def _select(b, o, ty, **a):
    return np.where(o[0], o[1], o[2])


def _arange(b, o, ty, start, end, **a):
    return np.arange(start, end, dtype=np.int32)


def _program_id(b, o, ty, axis, **a):
    return np.array(b.pid[axis], np.int32)


def _num_programs(b, o, ty, axis, **a):
    return np.array(b.grid[axis], np.int32)


def _constant(b, o, ty, value, **a):
    return N.constant(value, ty)


_IMPLS = {}
for _op in _FLOAT_BIN:
    _IMPLS[_op] = _impl_float_bin(_op)
for _op in _INT_BIN:
    _IMPLS[_op] = _impl_int_bin(_op)
for _op in _MATH:
    _IMPLS[_op] = _impl_math(_op)
_IMPLS.update({
    "fmax": _minmax_f("max"),
    "fmin": _minmax_f("min"),
    "fma": lambda b, o, ty, **a: N.fma(o[0], o[1], o[2], o[0].dtype),
    "sdiv": lambda b, o, ty, **a: N.idiv(o[0], o[1], True),
    "udiv": lambda b, o, ty, **a: N.idiv(o[0], o[1], False),
    "srem": lambda b, o, ty, **a: N.irem(o[0], o[1], True),
    "urem": lambda b, o, ty, **a: N.irem(o[0], o[1], False),
    "shl": lambda b, o, ty, **a: N.shift(o[0], o[1], "shl"),
    "ashr": lambda b, o, ty, **a: N.shift(o[0], o[1], "ashr"),
    "lshr": lambda b, o, ty, **a: N.shift(o[0], o[1], "lshr"),
    "umulhi": lambda b, o, ty, **a: N.mulhi(o[0], o[1], False),
    "smulhi": lambda b, o, ty, **a: N.mulhi(o[0], o[1], True),
    "iabs": lambda b, o, ty, **a: np.abs(o[0]),
    "cmpi": lambda b, o, ty, pred, **a: N.icmp(o[0], o[1], pred),
    "cmpf": lambda b, o, ty, pred, **a: N.fcmp(o[0], o[1], pred),
    "select": _select,
    "cast": _cast,
    "bitcast": lambda b, o, ty, **a: N.bitcast(o[0], T.scalar_of(ty)),
    "addptr": _addptr,
    "hint": lambda b, o, ty, **a: b._hint(o, ty, **a),
    "constant": _constant,
    "arange": _arange,
    "program_id": _program_id,
    "num_programs": _num_programs,
    "splat": lambda b, o, ty, **a: np.broadcast_to(o[0], T.shape_of(ty)),
    "broadcast": lambda b, o, ty, **a: np.broadcast_to(o[0], T.shape_of(ty)),
    "expand_dims": lambda b, o, ty, axis, **a: np.expand_dims(o[0], axis),
    "reshape": lambda b, o, ty, **a: np.reshape(o[0], T.shape_of(ty)),
    "trans": lambda b, o, ty, perm, **a: np.transpose(o[0], perm),
    "convert_layout": lambda b, o, ty, **a: o[0],  # a register layout has no meaning here
    "join": lambda b, o, ty, **a: np.stack([o[0], o[1]], axis=-1),
    "cat": lambda b, o, ty, **a: np.concatenate([o[0], o[1]], axis=0),
    "load": lambda b, o, ty, **a: b._load(o, ty, **a),
    "store": lambda b, o, ty, **a: b._store(o, ty, **a),
    "atomic_rmw": lambda b, o, ty, **a: b._atomic_rmw(o, ty, **a),
    "atomic_cas": lambda b, o, ty, **a: b._atomic_cas(o, ty, **a),
    "dot": lambda b, o, ty, **a: b._dot(o, ty, **a),
    "print": lambda b, o, ty, **a: b._print(o, ty, **a),
    "assert": lambda b, o, ty, **a: b._assert(o, ty, **a),
    "barrier": lambda b, o, ty, **a: None,
    "prefetch": lambda b, o, ty, **a: None,  # a cache hint: nothing to do without caches
})
_IMPLS.update(_DESCRIPTOR_IMPLS)


def _bulk_add(b, o, ty, kind="add", **a):
    """``kl.bulk_add`` (fp32 only, language/bulk.py): relaxed adds at the staging offsets, as the compiler's
    fallback writes them."""
    from ...language.bulk import staging_offset_of
    ptr, val = o
    R, C = val.shape
    off = np.array([[staging_offset_of(r, c, R, C, 4) for c in range(C)] for r in range(R)], np.int64)
    b._atomic_rmw([np.asarray(ptr, np.int64) + off * 4, val], T.block_type(T.float32, (R, C)), "fadd", sem="relaxed")


_IMPLS["bulk_add"] = _bulk_add


def _extern(b, o, ty, symbol, lib="libdevice", **a):
    from ...language.extra.libdevice import SYMBOLS
    from .libdevice import IMPLS
    name = SYMBOLS.get(symbol)
    if name is None or name not in IMPLS:
        raise NotImplementedError(f"the interpreter has no implementation of the {lib} function {symbol}")
    return IMPLS[name](o, N.np_dtype(ty))


def _inline_asm(b, o, ty, asm="", **a):
    raise b.error("inline assembly cannot run in the interpreter",
                  f"tl.inline_asm_elementwise runs PTX ({asm.strip().splitlines()[0] if asm.strip() else ''!r}), "
                  f"which only the GPU executes; run this kernel on a GPU, or branch on "
                  f"kl.extra.cuda-free code paths when interpreting")


def _gather(b, o, ty, axis, **a):
    src, idx = o
    n = src.shape[axis]
    i64 = idx.astype(np.int64)
    if ((i64 < 0) | (i64 >= n)).any():
        bad = tuple(int(v) for v in np.argwhere((i64 < 0) | (i64 >= n))[0])
        raise b.error("out-of-range gather index",
                      f"index[{bad}] = {int(i64[bad])} is outside 0..{n - 1} along axis {axis}; on the GPU the "
                      f"result would be undefined", index=bad)
    return np.take_along_axis(src, i64, axis)


def _sort_key(x):
    # sort in fp32/fp64 for narrow floats (numpy cannot order bf16/fp8 directly)
    return x.astype(_F32) if _is_narrow_float(x.dtype) else x


def _sort(b, o, ty, descending=False, k=None, **a):
    x = o[0]
    order = np.argsort(_sort_key(x), axis=-1, kind="stable")
    r = np.take_along_axis(x, order, -1)
    if descending:
        r = np.flip(r, -1)
    return N.contig(r[..., :k] if k is not None else r)


def _bitonic_merge(b, o, ty, descending=False, **a):
    """The merge network: compare-and-swap at strides n/2, n/4, ..., 1 (sorts a bitonic sequence).

    As in Triton 3.6, each position decides alone with IEEE ``>``: it takes its partner's value when
    ``(mine > other) != (descending ^ upper)``. A pair holding a NaN compares false both ways, so both
    positions get the lower one's value (ascending) or the upper one's (descending)."""
    x = N.contig(o[0])
    n = x.shape[-1]
    lead = x.shape[:-1]
    d = bool(descending)
    s = n // 2
    while s >= 1:
        v = x.reshape(lead + (n // (2 * s), 2, s))
        lo, hi = v[..., 0, :], v[..., 1, :]
        kl_, kh = _sort_key(lo), _sort_key(hi)
        with np.errstate(invalid="ignore"):
            new_lo = np.where((kl_ > kh) != d, hi, lo)
            new_hi = np.where((kh > kl_) != (not d), lo, hi)
        x = np.stack([new_lo, new_hi], axis=-2).reshape(x.shape)
        s //= 2
    return x


def _histogram(b, o, ty, num_bins, **a):
    x = o[0].astype(np.int64)
    keep = (x >= 0) & (x < num_bins)
    if len(o) > 1:
        keep &= o[1].astype(bool)
    return np.bincount(x[keep], minlength=num_bins).astype(np.int32)


_IMPLS.update({
    "extern_elementwise": _extern,
    "inline_asm": _inline_asm,
    "flip": lambda b, o, ty, axis, **a: N.contig(np.flip(o[0], axis)),
    "gather": _gather,
    "sort": _sort,
    "bitonic_merge": _bitonic_merge,
    "histogram": _histogram,
})
