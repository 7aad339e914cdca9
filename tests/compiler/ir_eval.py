"""A small numpy evaluator of tile IR, for checking on the CPU that a pass keeps a kernel's meaning.

It runs one program (given program ids) of a ``Function`` over named numpy buffers: pointers are
(buffer, element index) pairs packed in an int64 (``buffer << 40 + index``); a load or store at an
enabled lane outside its buffer raises, so an out-of-bounds access shows up instead of reading
garbage. Integers are exact (no i32 wrap), floats are float64 (both sides of a comparison round the
same way). Only the ops the pointer-tile tests use are implemented (and cp.async rings, in program order).
"""
from __future__ import annotations

import numpy as np

from kernelc.compiler.ir.core import Function
from kernelc.language.dtypes import pointer_type, scalar_of, shape_of

_SHIFT = 40
_BIN = {"add": np.add, "sub": np.subtract, "mul": np.multiply, "smin": np.minimum, "smax": np.maximum,
        "and": np.logical_and, "or": np.logical_or, "fadd": np.add, "fsub": np.subtract, "fmul": np.multiply}
_CMP = {"slt": np.less, "sle": np.less_equal, "sgt": np.greater, "sge": np.greater_equal, "eq": np.equal,
        "ne": np.not_equal}


#: casts to fp16 round (off: every float is float64, as the pointer-tile tests compare with exact products);
#: a test of a pass that moves where values are rounded turns it on
ROUND_FP16 = False


class OutOfBounds(Exception):
    pass


def run(fn: Function, args: dict, buffers: dict, pid=(0, 0, 0), nprog=(1, 1, 1)):
    """Run ``fn`` for program ``pid``; ``args``: scalar arguments by name (a pointer argument names a
    buffer of ``buffers``, which stores write into, or is (name, element offset) into one)."""
    env = {}
    names = list(buffers)
    for a, v in zip(fn.arguments, fn.body.args):
        x = args[a.name]
        if isinstance(scalar_of(a.type), pointer_type):  # a buffer's name, or (name, element offset)
            name, off = (x, 0) if isinstance(x, str) else x
            x = np.int64((names.index(name) << _SHIFT) + off)
        env[v.id] = x
    _block(fn.body, env, buffers, names, pid, nprog)


def gemm_product(fn: Function, M: int, N: int, K: int, programs: int, seed: int):
    """(C, A @ B): a persistent C = A @ B kernel's IR (A row-major, B given as the transpose of a row-major
    (N, K), C row-major, arguments named as tutorial 09's) run on ``programs`` programs over random inputs."""
    import numpy as np
    rng = np.random.default_rng(seed)
    a, b = rng.standard_normal((M, K)), rng.standard_normal((K, N))
    bufs = {"a": a.reshape(-1).copy(), "b": b.T.reshape(-1).copy(), "c": np.full(M * N, np.nan)}
    for p in range(programs):
        run(fn, dict(a_ptr="a", b_ptr="b", c_ptr="c", M=M, N=N, K=K, stride_am=K, stride_ak=1, stride_bk=1,
                     stride_bn=K, stride_cm=N, stride_cn=1), bufs, pid=(p, 0, 0), nprog=(programs, 1, 1))
    return bufs["c"].reshape(M, N), a @ b


def _block(block, env, buffers, names, pid, nprog):
    for op in block.ops:
        if op.name in ("scf.yield", "return"):
            return [env[o.id] for o in op.operands]
        out = _op(op, env, buffers, names, pid, nprog)
        if op.results and out is not None:
            outs = out if op.name in ("scf.for", "scf.if", "wgmma_wait") else [out]
            for r, v in zip(op.results, outs):
                env[r.id] = v
    return []


def _load_addr(p, buffers, names, mask):
    p = np.asarray(p, dtype=np.int64)
    buf = (p + (1 << (_SHIFT - 1))) >> _SHIFT  # the nearest buffer: offsets may be negative
    idx = p - (buf << _SHIFT)
    ok = np.ones(np.shape(p), bool) if mask is None else np.broadcast_to(mask, np.shape(p))
    for b in np.unique(buf[ok]) if ok.any() else []:
        sel = ok & (buf == b)
        if (idx[sel] < 0).any() or (idx[sel] >= buffers[names[b]].size).any():
            raise OutOfBounds(f"access outside {names[b]}")
    return buf, idx, ok


def _op_load(p, mask, other, buffers, names):
    buf, idx, ok = _load_addr(p, buffers, names, mask)
    out = np.zeros(np.shape(p))
    for b in np.unique(buf[ok]):
        sel = ok & (buf == b)
        out[sel] = buffers[names[b]][idx[sel]]
    if other is not None:
        out = np.where(ok, out, other)
    return out


def _op(op, env, buffers, names, pid, nprog):
    o = [env[v.id] for v in op.operands]
    shape = shape_of(op.results[0].type) if op.results else ()
    n = op.name
    if n == "constant":
        return np.full(shape, op.attrs["value"]) if shape else op.attrs["value"]
    if n == "arange":
        return np.arange(op.attrs["start"], op.attrs["end"], dtype=np.int64)
    if n in ("program_id", "num_programs"):
        return (pid if n == "program_id" else nprog)[op.attrs["axis"]]
    if n in ("splat", "broadcast"):
        return np.broadcast_to(o[0], shape).copy()
    if n == "expand_dims":
        return np.expand_dims(o[0], op.attrs["axis"])
    if n == "trans":
        return np.transpose(o[0], op.attrs["perm"])
    if n in _BIN:
        return _BIN[n](o[0], o[1])
    if n == "fneg":
        return -np.asarray(o[0])
    if n == "addptr":
        return np.asarray(o[0], dtype=np.int64) + np.asarray(o[1], dtype=np.int64)
    if n in ("sdiv", "srem"):
        with np.errstate(all="ignore"):  # x / 0 is garbage on the GPU too; programs that use it are skipped
            q = np.trunc(np.asarray(o[0]) / np.asarray(o[1])).astype(np.int64)
        return q if n == "sdiv" else o[0] - q * o[1]
    if n == "cmpi":
        return _CMP[op.attrs["pred"]](o[0], o[1])
    if n == "select":
        return np.where(o[0], o[1], o[2])
    if n == "cast" and ROUND_FP16 and scalar_of(op.results[0].type).name == "fp16":
        return np.asarray(o[0]).astype(np.float16).astype(np.float64)
    if n in ("cast", "hint", "convert_layout"):
        return o[0]
    if n == "load":
        return _op_load(o[0], o[1] if len(o) > 1 else None, o[2] if len(o) > 2 else None, buffers, names)
    if n == "store":
        buf, idx, ok = _load_addr(o[0], buffers, names, o[2] if len(o) > 2 else None)
        for b in np.unique(buf[ok]):
            sel = ok & (buf == b)
            buffers[names[b]][idx[sel]] = np.broadcast_to(o[1], np.shape(o[0]))[sel]
        return None
    # cp.async rings (passes/cp_async_rings.py) in program order: a copy lands at once, a stage read is a copy of
    # what is there; the waits and barriers order nothing more in one program
    if n == "ring_alloc":
        return [None] * op.attrs["stages"]
    if n == "async_copy":  # ring, stage, pointers[, mask], guard: masked-off elements are zero-filled
        if o[-1]:
            mask = o[3] if op.attrs.get("masked") else None
            o[0][int(o[1])] = _op_load(o[2], mask, 0.0, buffers, names)
        return None
    if n == "ring_read":
        data = o[0][int(o[1])]
        if data is None:
            raise OutOfBounds("ring_read of a stage no copy has filled")
        return data.copy()
    if n in ("async_commit_group", "async_wait_group", "async_wait_all", "barrier"):
        return None
    if n == "dot":  # an i1 4th operand (use_acc, passes/flatten_loops.py) drops the accumulator when false; an i32
        # last one is the warpgroup index (passes/uniform_warpgroups.py)
        use = o[3] if len(o) > 3 and scalar_of(op.operands[3].type).name == "int1" else True
        return o[0] @ o[1] + (o[2] if use else 0)
    if n == "wgmma_wait":  # (passes/wgmma_waits.py) its operands handed back: in program order they are there
        return list(o)
    if n == "warpgroup_index":
        return 0
    if n == "scf.if":
        return _block(op.regions[0 if o[0] else 1], env, buffers, names, pid, nprog)
    if n == "scf.for":
        carried = list(o[3:])
        body = op.regions[0]
        for iv in range(int(o[0]), int(o[1]), int(o[2])):
            for a, v in zip(body.args, [iv] + carried):
                env[a.id] = v
            carried = _block(body, env, buffers, names, pid, nprog)
        return carried
    raise NotImplementedError(f"ir_eval: {n}")
