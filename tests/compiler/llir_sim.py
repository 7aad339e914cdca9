"""A small CPU simulator of the NVPTX LLVM IR kernelc emits, for one CTA: every thread runs the
kernel's instructions in Python, all threads meeting at each ``barrier0``; shared memory is one byte
buffer, global memory the numpy arrays passed as pointer arguments.

It covers the instructions the shared-memory lowerings of ``codegen/permute.py`` emit (integer and
float arithmetic, compares, selects, GEPs, scalar/vector loads and stores, ``srem``, casts, shared
atomics, branches, ``tid.x``, predicated ``st.global`` and vector ``red.global.add`` inline asm) and raises ``Unsupported`` on
anything else, so a test can compare a compiled kernel with the interpreter without a GPU. Memory
accesses are bounds-checked, and a shared-memory byte that one thread writes and another reads or
writes between the same two barriers (a race; atomics excepted) raises ``Race``.
"""
from __future__ import annotations

import functools
import re
from typing import Dict, List

import ml_dtypes
import numpy as np

_FLOATS = {"half": np.float16, "bfloat": ml_dtypes.bfloat16, "float": np.float32, "double": np.float64}
_INT_BITS = {"i1": 1, "i8": 8, "i16": 16, "i32": 32, "i64": 64}
_UINT = {1: np.uint8, 8: np.uint8, 16: np.uint16, 32: np.uint32, 64: np.uint64}
_ICMP = {"eq": lambda a, b: a == b, "ne": lambda a, b: a != b, "slt": lambda a, b: a < b,
         "sle": lambda a, b: a <= b, "sgt": lambda a, b: a > b, "sge": lambda a, b: a >= b,
         "ult": lambda a, b: a < b, "ule": lambda a, b: a <= b, "ugt": lambda a, b: a > b,
         "uge": lambda a, b: a >= b}
_FCMP = {"eq": lambda a, b: a == b, "gt": lambda a, b: a > b, "ge": lambda a, b: a >= b,
         "lt": lambda a, b: a < b, "le": lambda a, b: a <= b, "ne": lambda a, b: a != b}


def _tdiv(a: int, b: int) -> int:
    """Integer division rounding toward zero (LLVM's sdiv)."""
    q = abs(a) // abs(b)
    return q if (a < 0) == (b < 0) else -q


_INT_OPS = {"add": lambda x, y, sx, sy: x + y, "sub": lambda x, y, sx, sy: x - y,
            "mul": lambda x, y, sx, sy: x * y, "and": lambda x, y, sx, sy: x & y,
            "or": lambda x, y, sx, sy: x | y, "xor": lambda x, y, sx, sy: x ^ y,
            "shl": lambda x, y, sx, sy: x << y, "lshr": lambda x, y, sx, sy: x >> y,
            "ashr": lambda x, y, sx, sy: sx >> y, "udiv": lambda x, y, sx, sy: x // y,
            "urem": lambda x, y, sx, sy: x % y, "sdiv": lambda x, y, sx, sy: _tdiv(sx, sy),
            "srem": lambda x, y, sx, sy: sx - sy * _tdiv(sx, sy)}
_FLOAT_OPS = {"fadd": np.add, "fsub": np.subtract, "fmul": np.multiply, "fdiv": np.divide}
_FLAGS = re.compile(r"^(?:(?:nuw|nsw|disjoint|exact|fast|nnan|ninf|contract|inbounds) )+")


class Unsupported(Exception):
    pass


class Race(Exception):
    pass


def _scalar_types(ty: str):
    """(element type, count) of a scalar or ``<k x t>`` vector type."""
    m = re.fullmatch(r"<(\d+) x (\w+)>", ty)
    return (m.group(2), int(m.group(1))) if m else (ty, 1)


def _dtype(ty: str):
    if ty in _FLOATS:
        return np.dtype(_FLOATS[ty])
    if ty in _INT_BITS:
        return np.dtype(_UINT[_INT_BITS[ty]])
    raise Unsupported(f"type {ty}")


@functools.lru_cache(maxsize=None)
def _nbytes(ty: str) -> int:
    et, k = _scalar_types(ty)
    return k * _dtype(et).itemsize


def _signed(v: int, bits: int) -> int:
    return v - (1 << bits) if v >> (bits - 1) & 1 else v


def _split_args(s: str) -> List[str]:
    out, depth, cur = [], 0, ""
    for ch in s:
        if ch in "(<[":
            depth += 1
        elif ch in ")>]":
            depth -= 1
        if ch == "," and depth == 0:
            out.append(cur.strip())
            cur = ""
        else:
            cur += ch
    if cur.strip():
        out.append(cur.strip())
    return out


def _const(ty: str, tok: str):
    if tok in ("undef", "poison", "zeroinitializer"):
        et, k = _scalar_types(ty)
        z = _FLOATS[et](0) if et in _FLOATS else 0
        return (z,) * k if ty.startswith("<") else z
    if ty in _INT_BITS:
        return int(tok == "true") if tok in ("true", "false") else int(tok) & ((1 << _INT_BITS[ty]) - 1)
    if ty in _FLOATS:
        if tok.startswith("0x"):  # LLVM writes float constants as a double's bits
            return _FLOATS[ty](np.frombuffer(int(tok, 16).to_bytes(8, "little"), np.float64)[0])
        return _FLOATS[ty](float(tok))
    raise Unsupported(f"constant {tok} of type {ty}")


def _operand(ty: str, tok: str):
    tok = tok.strip()
    if tok[0] in "%@":
        return lambda env: env[tok]
    c = _const(ty, tok)
    return lambda env: c


def _typed(s: str):
    ty, tok = s.rsplit(" ", 1)
    return ty, _operand(ty, tok)


def _to_bytes(ty: str, v) -> np.ndarray:
    et, k = _scalar_types(ty)
    vals = v if ty.startswith("<") else (v,)
    return np.array(list(vals), _dtype(et)).view(np.uint8)


def _from_bytes(ty: str, b: np.ndarray):
    et, k = _scalar_types(ty)
    a = b.view(_dtype(et))
    vals = [x if et in _FLOATS else int(x) & ((1 << _INT_BITS[et]) - 1) for x in a]
    return tuple(vals) if ty.startswith("<") else vals[0]


class Kernel:
    """The kernel function of an LLVM IR module (the text of ``ck.asm["llir"]``)."""

    def __init__(self, llir: str):
        m = re.search(r"define ptx_kernel void @\w+\((.*)\)[^{\n]*\{\n(.*?)\n\}", llir, re.S)
        if m is None:
            raise Unsupported("no ptx_kernel function")
        self.params = re.findall(r"(%arg\d+)", m.group(1))
        self.blocks: Dict[str, list] = {}
        cur = "entry"
        for line in m.group(2).splitlines():
            line = re.sub(r", !\w+ !\d+", "", line).strip()
            if not line:
                continue
            if re.fullmatch(r"[\w.]+:", line):
                cur = line[:-1]
                continue
            self.blocks.setdefault(cur, []).append(self._compile(line))

    def run(self, args: List[np.ndarray], num_warps: int, smem_bytes: int = 1 << 16) -> None:
        """Run one CTA of ``32 * num_warps`` threads; ``args`` are the pointer arguments' arrays
        (written in place)."""
        self.mem = {i: a.view(np.uint8).reshape(-1) for i, a in enumerate(args)}
        self.mem["smem"] = np.zeros(smem_bytes, np.uint8)
        # per shared byte, since the last barrier: the thread that wrote / read it (-1 none, -2 several)
        self._wrote = np.full(smem_bytes, -1, np.int32)
        self._read = np.full(smem_bytes, -1, np.int32)
        threads = [self._thread(t) for t in range(32 * num_warps)]
        live = threads
        while live:
            states = []
            for tid, t in enumerate(live):
                self._tid = tid if len(live) == len(threads) else None
                states.append(next(t, "done"))
            if "done" in states and "barrier" in states:
                raise AssertionError("some threads returned while others wait at a barrier")
            live = [t for t, s in zip(live, states) if s == "barrier"]
            self._wrote[:] = -1
            self._read[:] = -1

    def _thread(self, tid: int):
        env = {p: (i, 0) for i, p in enumerate(self.params)}
        env["@global_smem"] = ("smem", 0)
        env["%tid"] = tid
        block = "entry"
        while True:
            nxt = None
            for kind, a in self.blocks[block]:
                if kind == "op":
                    a(env)
                elif kind == "barrier":
                    yield "barrier"
                elif kind == "br":
                    cond, t, f = a
                    nxt = t if cond is None or cond(env) else f
                    break
                else:  # ret
                    return
            if nxt is None:
                raise Unsupported(f"block {block} falls through")
            block = nxt

    # -- memory -----------------------------------------------------------------------------------
    def _access(self, ptr, ty: str, write: bool, atomic: bool):
        buf, off = ptr
        n = _nbytes(ty)
        b = self.mem[buf]
        if off < 0 or off + n > b.size:
            raise IndexError(f"{'store' if write else 'load'} of {ty} at byte {off} outside buffer {buf} "
                             f"({b.size} bytes)")
        if buf == "smem" and not atomic and self._tid is not None:
            t = self._tid
            w, r = self._wrote[off:off + n], self._read[off:off + n]
            if ((w != -1) & (w != t)).any() or (write and ((r != -1) & (r != t)).any()):
                raise Race(f"thread {t} {'writes' if write else 'reads'} shared bytes {off}..{off + n - 1}, "
                           f"which another thread {'read or ' if write else ''}wrote since the last barrier")
            if write:
                w[:] = t
            else:
                r[:] = np.where((r == -1) | (r == t), t, -2)
        return b[off:off + n]

    def _load(self, ptr, ty: str, atomic: bool = False):
        return _from_bytes(ty, self._access(ptr, ty, False, atomic).copy())

    def _store(self, ptr, ty: str, v, atomic: bool = False) -> None:
        self._access(ptr, ty, True, atomic)[:] = _to_bytes(ty, v)

    # -- instructions -----------------------------------------------------------------------------
    def _compile(self, line: str):
        if line == "call void @llvm.nvvm.barrier0()":
            return "barrier", None
        if line == "ret void":
            return "ret", None
        if line.startswith("br "):
            m = re.fullmatch(r"br label %([\w.]+)", line)
            if m:
                return "br", (None, m.group(1), None)
            m = re.fullmatch(r"br i1 (\S+), label %([\w.]+), label %([\w.]+)", line)
            return "br", (_operand("i1", m.group(1)), m.group(2), m.group(3))
        m = re.fullmatch(r"(%\w+) = (.*)", line)
        dst, rhs = (m.group(1), m.group(2)) if m else (None, line)
        op, _, rest = rhs.partition(" ")
        rest = _FLAGS.sub("", rest)
        if dst is None:
            f = self._effect(op, rest, line)
        else:
            g = self._value(op, rest, line)

            def f(env, g=g):
                env[dst] = g(env)
        return "op", f

    def _effect(self, op: str, rest: str, line: str):
        if op == "store":
            (vty, v), (_, p) = [_typed(a) for a in _split_args(rest)[:2]]
            return lambda env: self._store(p(env), vty, v(env))
        if op == "atomicrmw":
            m = re.fullmatch(r"add ptr addrspace\(3\) (\S+), (i\d+) (\S+) \w+(, align \d+)?", rest)
            if m is None:
                raise Unsupported(line)
            p, ty, inc = _operand("ptr", m.group(1)), m.group(2), _operand(m.group(2), m.group(3))
            mask = (1 << _INT_BITS[ty]) - 1

            def atomic_add(env):
                ptr = p(env)
                self._store(ptr, ty, (self._load(ptr, ty, True) + inc(env)) & mask, True)
            return atomic_add
        m = re.fullmatch(r'call void asm sideeffect "@\$0 st\.global\.b\d+ \[ \$1 \+ 0 \], \$2;", "[^"]*"\((.*)\)',
                         f"{op} {rest}")
        if m:
            (_, pred), (_, p), (vty, v) = [_typed(a) for a in _split_args(m.group(1))]

            def st_global(env):
                if pred(env):
                    self._store(p(env), vty, v(env))
            return st_global
        m = re.fullmatch(r'call void asm sideeffect "@\$0 red(?:\.\w+)*\.global\.add\.v\d\.f32 \[ \$1 \+ 0 \], '
                         r'\{[^}]*\};", "[^"]*"\((.*)\)', f"{op} {rest}")
        if m:  # sm_90's vector reduction: each element added on its own (atomically)
            (_, pred), (_, p), *vals = [_typed(a) for a in _split_args(m.group(1))]

            def red_vector(env):
                if pred(env):
                    buf, off = p(env)
                    for i, (vty, v) in enumerate(vals):
                        q = (buf, off + 4 * i)
                        self._store(q, "float", np.float32(self._load(q, "float", True) + v(env)), True)
            return red_vector
        raise Unsupported(line)

    def _value(self, op: str, rest: str, line: str):
        if op == "call":
            if rest == "i32 @llvm.nvvm.read.ptx.sreg.tid.x()":
                return lambda env: env["%tid"]
            raise Unsupported(line)
        if op in _INT_OPS:
            ty, a, b = re.fullmatch(r"(\w+) (\S+), (\S+)", rest).groups()
            bits, fn = _INT_BITS[ty], _INT_OPS[op]
            x, y, mask = _operand(ty, a), _operand(ty, b), (1 << bits) - 1

            def int_op(env):
                u, v = x(env), y(env)
                return fn(u, v, _signed(u, bits), _signed(v, bits)) & mask
            return int_op
        if op in _FLOAT_OPS:
            ty, a, b = re.fullmatch(r"(\w+) (\S+), (\S+)", rest).groups()
            x, y, fn, cast = _operand(ty, a), _operand(ty, b), _FLOAT_OPS[op], _FLOATS[ty]

            def float_op(env):  # fp64, then one rounding: exact for + - * / of these types
                with np.errstate(all="ignore"):
                    return cast(fn(np.float64(x(env)), np.float64(y(env))))
            return float_op
        if op == "icmp":
            pred, ty, a, b = re.fullmatch(r"(\w+) (\w+) (\S+), (\S+)", rest).groups()
            x, y, fn, bits = _operand(ty, a), _operand(ty, b), _ICMP[pred], _INT_BITS[ty]
            if pred[0] == "s":
                return lambda env: int(fn(_signed(x(env), bits), _signed(y(env), bits)))
            return lambda env: int(fn(x(env), y(env)))
        if op == "fcmp":
            pred, ty, a, b = re.fullmatch(r"(\w+) (\w+) (\S+), (\S+)", rest).groups()
            x, y = _operand(ty, a), _operand(ty, b)
            if pred in ("uno", "ord"):
                want = pred == "uno"
                return lambda env: int((bool(np.isnan(x(env))) or bool(np.isnan(y(env)))) == want)
            fn, unordered = _FCMP[pred[1:]], pred[0] == "u"

            def fcmp(env):
                u, v = np.float64(x(env)), np.float64(y(env))
                return int(unordered) if (np.isnan(u) or np.isnan(v)) else int(bool(fn(u, v)))
            return fcmp
        if op == "select":
            (_, c), (_, a), (_, b) = [_typed(s) for s in _split_args(rest)]
            return lambda env: a(env) if c(env) else b(env)
        if op == "getelementptr":
            parts = _split_args(rest)
            esize = _nbytes(parts[0])
            (_, base), (ity, idx) = _typed(parts[1]), _typed(parts[2])
            bits = _INT_BITS[ity]

            def gep(env):
                buf, off = base(env)
                return buf, off + _signed(idx(env), bits) * esize
            return gep
        if op == "load":
            parts = _split_args(rest)
            ty, (_, p) = parts[0], _typed(parts[1])
            return lambda env: self._load(p(env), ty)
        if op == "extractelement":
            (_, v), (_, i) = [_typed(s) for s in _split_args(rest)]
            return lambda env: v(env)[i(env)]
        if op == "insertelement":
            (vty, v), (_, x), (_, i) = [_typed(s) for s in _split_args(rest)]

            def insert(env):
                vec = list(v(env))
                vec[i(env)] = x(env)
                return tuple(vec)
            return insert
        if op in ("bitcast", "zext", "sext", "trunc"):
            sty, tok, dty = re.fullmatch(r"(.+?) (\S+) to (.+)", rest).groups()
            x = _operand(sty, tok)
            if op == "bitcast":
                return lambda env: _from_bytes(dty, _to_bytes(sty, x(env)))
            mask, sbits = (1 << _INT_BITS[dty]) - 1, _INT_BITS[sty]
            if op == "sext":
                return lambda env: _signed(x(env), sbits) & mask
            return lambda env: x(env) & mask
        raise Unsupported(line)
