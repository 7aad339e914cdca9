"""Structural and type checks on the tile IR. Run after the frontend and after every pass in
debug mode; a failure is a compiler bug, reported with the op and its kernel line."""
from __future__ import annotations

from typing import Callable, Dict, List, Optional, Set

from ...language import dtypes as T
from ...language.dtypes import block_type, pointer_type, scalar_of, shape_of, tensor_descriptor_type
from .core import Block, Function, Op
from .ops import ATOMIC_KINDS, FLOAT_PREDICATES, INT_PREDICATES, OPS, TERMINATORS
from .printer import print_op


class VerificationError(Exception):
    pass


def _same_shape(op: Op) -> List[str]:
    errs = []
    shapes = {shape_of(v.type) for v in op.operands + op.results}
    if len(shapes) > 1:
        errs.append(f"elementwise op mixes shapes {sorted(shapes)}")
    return errs


def _same_elt(op: Op) -> List[str]:
    elts = {scalar_of(v.type) for v in op.operands + op.results}
    return [f"operands/results must share one element type, got {sorted(map(str, elts))}"] if len(elts) > 1 else []


def _float_only(op: Op) -> List[str]:
    t = scalar_of(op.results[0].type)
    return [] if isinstance(t, T.dtype) and t.is_floating() else [f"needs a float type, got {t}"]


def _int_only(op: Op) -> List[str]:
    t = scalar_of(op.results[0].type)
    return [] if isinstance(t, T.dtype) and t.is_int() else [f"needs an integer type, got {t}"]


def _exp2_poly(op: Op) -> List[str]:
    """``poly`` (passes/exp2_poly.py): fp32 and ftz, 0 < num <= den, degree 2 or 3."""
    p = op.attrs.get("poly")
    if p is None:
        return []
    ok = (isinstance(p, dict) and set(p) == {"num", "den", "degree"} and 0 < p["num"] <= p["den"]
          and p["degree"] in (2, 3))
    if not ok:
        return [f"poly must be {{num, den, degree}} with 0 < num <= den and degree 2 or 3, got {p!r}"]
    if scalar_of(op.results[0].type) != T.float32 or not op.attrs.get("ftz"):
        return ["poly needs an fp32 exp2 with ftz=True"]
    return []


def _cast(op: Op) -> List[str]:
    """A second operand only with ``overflow_bound=True`` (passes/fp8_bounds.py): fp32 -> fp8 with infinities
    (e5m2), the bound fp32 of the operand's shape; ``overflow_bound='self'``: the same cast with one operand."""
    errs = _same_shape(op)
    ob = op.attrs.get("overflow_bound")
    if ob not in (None, True, "self"):
        return errs + [f"overflow_bound is True or 'self', got {ob!r}"]
    has = ob is not None
    if (ob is True) != (len(op.operands) == 2) or (ob == "self" and len(op.operands) != 1):
        return errs + ["overflow_bound and a second operand (the bound) go together"]
    if has:
        dst = scalar_of(op.results[0].type)
        if not (dst.is_fp8() and T.FP8_FORMATS[dst.name].overflow == "inf"):
            errs.append(f"overflow_bound needs an fp8 type with infinities, got {dst}")
        if any(scalar_of(v.type) != T.float32 for v in op.operands):
            errs.append("overflow_bound needs an fp32 operand and an fp32 bound")
    return errs


def _arith(check_kind):
    def rule(op):
        return _same_shape(op) + _same_elt(op) + check_kind(op)
    return rule


def _cmp(preds, want_float):
    def rule(op):
        errs = _same_shape(op)
        a, b = (scalar_of(v.type) for v in op.operands)
        if a != b:
            errs.append(f"compares {a} with {b}")
        if scalar_of(op.results[0].type) != T.int1:
            errs.append("comparison result must be i1")
        if op.attrs.get("pred") not in preds:
            errs.append(f"bad predicate {op.attrs.get('pred')!r}")
        if want_float != (isinstance(a, T.dtype) and a.is_floating()):
            errs.append(f"{op.name} on {a}")
        return errs
    return rule


def _select(op):
    errs = _same_shape(op)
    c, a, b = (scalar_of(v.type) for v in op.operands)
    if c != T.int1:
        errs.append(f"select condition must be i1, got {c}")
    if not (a == b == scalar_of(op.results[0].type)):
        errs.append(f"select branches {a}/{b} differ from result {op.results[0].type}")
    return errs


def _addptr(op):
    errs = _same_shape(op)
    p, o = (scalar_of(v.type) for v in op.operands)
    if not isinstance(p, pointer_type):
        errs.append(f"addptr base must be a pointer, got {p}")
    if not (isinstance(o, T.dtype) and o.is_int()):
        errs.append(f"addptr offset must be an integer, got {o}")
    if scalar_of(op.results[0].type) != p:
        errs.append("addptr result type must equal the base pointer type")
    return errs


def _load(op):
    errs = []
    p = op.operands[0].type
    if not isinstance(scalar_of(p), pointer_type):
        return [f"load from a non-pointer {p}"]
    want = scalar_of(p).element_ty
    want = T.int8 if want == T.int1 else want
    if scalar_of(op.results[0].type) != want:
        errs.append(f"load of {scalar_of(p)} yields {op.results[0].type}")
    shapes = {shape_of(v.type) for v in op.operands + op.results}
    if len(shapes) > 1:
        errs.append(f"load operands have shapes {sorted(shapes)}")
    if len(op.operands) > 1 and scalar_of(op.operands[1].type) != T.int1:
        errs.append("load mask must be i1")
    return errs + _l2(op)


def _store(op):
    p = op.operands[0].type
    if not isinstance(scalar_of(p), pointer_type):
        return [f"store to a non-pointer {p}"]
    shapes = {shape_of(v.type) for v in op.operands}
    return [f"store operands have shapes {sorted(shapes)}"] if len(shapes) > 1 else []


def _atomic(op):
    errs = _store(op)
    if op.name == "atomic_rmw" and op.attrs.get("kind") not in ATOMIC_KINDS:
        errs.append(f"bad atomic kind {op.attrs.get('kind')!r}")
    return errs


def _dot(op):
    a, b, c = (v.type for v in op.operands[:3])
    errs = []
    # after the accumulator: use_acc (a scalar i1), then the warpgroup index (passes/uniform_warpgroups.py)
    extra = list(op.operands[3:])
    is_wg = [v.op is not None and v.op.name == "warpgroup_index" for v in extra]
    if any(is_wg[:-1]):
        errs.append("a dot's warpgroup index (a warpgroup_index result) must be its last operand")
    elif is_wg[-1:] == [True]:
        extra.pop()
    if len(extra) > 1:
        errs.append("a dot takes at most a use_acc and a warpgroup index after its accumulator")
    elif extra and (shape_of(extra[0].type) or scalar_of(extra[0].type).name != "int1"):
        errs.append(f"a dot's use_acc operand must be a scalar i1, got {extra[0].type}")
    sa, sb, sc = shape_of(a), shape_of(b), shape_of(c)
    if len(sa) not in (2, 3) or len(sa) != len(sb) or sa[-1] != sb[-2] or sc != sa[:-1] + sb[-1:]:
        errs.append(f"dot shapes {sa} x {sb} -> {sc} do not agree")
    if op.results[0].type != c:
        errs.append("dot result type must equal the accumulator type")
    engine = op.attrs.get("engine")   # passes/layout_assign.py: which unit runs the dot
    if engine is not None and engine not in ("wgmma", "mma", "fma"):
        errs.append(f"a dot's engine must be 'wgmma', 'mma' or 'fma', got {engine!r}")
    elif engine is not None and engine != "wgmma":
        for key in ("wgmma", "wgmma_desc", "wgmma_turns"):
            if op.attrs.get(key) is not None:
                errs.append(f"a dot with {key}={op.attrs[key]!r} (its wgmma schedule) must run on wgmma, "
                            f"not {engine!r}")
    return errs


def _shape_op(op):
    r = op.results[0].type if op.results else None
    src = op.operands[0].type
    n = lambda t: (t.numel if isinstance(t, block_type) else 1)  # noqa: E731
    if op.name == "reshape" and n(r) != n(src):
        return [f"reshape changes the element count {n(src)} -> {n(r)}"]
    if op.name in ("splat", "broadcast", "reshape", "expand_dims", "trans") and scalar_of(r) != scalar_of(src):
        return ["shape op changed the element type"]
    if op.name == "trans":
        perm = op.attrs["perm"]
        if [shape_of(src)[p] for p in perm] != list(shape_of(r)):
            return [f"trans perm {perm} does not map {shape_of(src)} to {shape_of(r)}"]
    return []


def _convert_layout(op):
    from ..layouts import Layout
    src, res = op.operands[0].type, op.results[0].type
    if src != res:
        return [f"convert_layout changes the type {src} -> {res}"]
    lay = op.attrs.get("layout")
    if not isinstance(lay, Layout):
        return [f"layout must be a Layout, got {type(lay).__name__}"]
    if tuple(lay.shape) != tuple(shape_of(res)):
        return [f"layout shape {list(lay.shape)} differs from the tile shape {list(shape_of(res))}"]
    pieces = op.attrs.get("pieces")
    if pieces:
        from ..conversion_pieces import piece_shape
        if not isinstance(pieces, tuple) or any(len(b) != len(lay.shape) or sum(1 for x in b if x) != 1
                                                or any(x & (x - 1) for x in b) for b in pieces) \
                or len(set(pieces)) != len(pieces):
            return [f"pieces must be distinct coordinate bits of the tile (one power of two each), got {pieces!r}"]
        sl = op.attrs.get("smem")
        if sl is None or tuple(sl.shape) != piece_shape(lay.shape, pieces):
            return [f"a conversion in pieces {pieces!r} needs a smem plan of one piece's shape "
                    f"{list(piece_shape(lay.shape, pieces))}"]
    return []


def _desc_type(v):
    return v.type if isinstance(v.type, T.tensor_descriptor_type) else None


def _make_descriptor(op):
    ty = op.results[0].type if op.results else None
    if not isinstance(ty, T.tensor_descriptor_type):
        return [f"result must be a tensor descriptor, got {ty}"]
    n = ty.ndim
    if len(op.operands) != 2 * n:
        return [f"a {n}-D descriptor takes base, {n} shapes and {n - 1} strides, got {len(op.operands)} operands"]
    base = op.operands[0].type
    errs = []
    if not isinstance(base, pointer_type) or base.element_ty != ty.element_ty:
        errs.append(f"base {base} does not point to {ty.element_ty}")
    if any(v.type != T.int32 for v in op.operands[1:1 + n]):
        errs.append(f"shapes must be i32 scalars, got {_types(op.operands[1:1 + n])}")
    if any(v.type != T.int64 for v in op.operands[1 + n:]):
        errs.append(f"strides must be i64 scalars, got {_types(op.operands[1 + n:])}")
    return errs


def _descriptor_access(op):
    desc = _desc_type(op.operands[0])
    if desc is None:
        return [f"operand 0 must be a tensor descriptor, got {op.operands[0].type}"]
    errs = []
    offs = op.operands[1:] if op.name == "descriptor_load" else op.operands[2:]
    if len(offs) != desc.ndim or any(v.type != T.int32 for v in offs):
        errs.append(f"needs {desc.ndim} i32 scalar offsets, got {_types(offs)}")
    if tuple(op.attrs.get("block_shape", ())) != tuple(desc.block_shape):
        errs.append(f"block_shape {op.attrs.get('block_shape')} differs from the descriptor's {list(desc.block_shape)}")
    tile = op.results[0].type if op.name == "descriptor_load" else op.operands[1].type  # store, reduce
    if tile != desc.block_type:
        errs.append(f"tile type {tile} differs from the descriptor's block {desc.block_type}")
    if op.attrs.get("tma") not in (None, True):
        errs.append(f"tma must be True (the TMA lowering takes it) or absent, got {op.attrs.get('tma')!r}")
    return errs


REDUCE_KINDS = ("add",)


def _descriptor_reduce(op):
    errs = _descriptor_access(op)
    if op.attrs.get("kind") not in REDUCE_KINDS:
        errs.append(f"kind must be one of {list(REDUCE_KINDS)}, got {op.attrs.get('kind')!r}")
    desc = _desc_type(op.operands[0])
    if desc is not None and desc.element_ty.name not in ("fp32", "fp16", "bf16", "int32", "uint32"):
        errs.append(f"a bulk reduction adds fp32/fp16/bf16/int32/uint32 elements, not {desc.element_ty}")
    return errs


def _bulk_buffer(v) -> bool:
    return v.op is not None and v.op.name in ("bulk_buffer_alloc", "bulk_add_buffer_alloc")


def _bulk_add(op: Op) -> List[str]:
    p, val = op.operands
    errs = []
    if shape_of(p.type) or not getattr(p.type, "is_ptr", lambda: False)():
        errs.append(f"operand 0 must be a scalar pointer, got {p.type}")
    elif getattr(p.type.element_ty, "name", None) != "fp32":
        errs.append(f"a 1-D bulk reduction adds fp32 elements, not {p.type.element_ty}")
    if len(shape_of(val.type)) != 2:
        errs.append(f"the value must be a 2-D tile, got {val.type}")
    if op.attrs.get("kind") not in REDUCE_KINDS:
        errs.append(f"kind must be one of {list(REDUCE_KINDS)}, got {op.attrs.get('kind')!r}")
    errs += _l2(op)
    return errs


def _l2(op: Op) -> List[str]:
    l2 = op.attrs.get("l2")
    ok = l2 in (None, "evict_last", "evict_first")
    return [] if ok else [f"l2 must be 'evict_last' or 'evict_first', got {l2!r}"]


def _bulk_add_buffer_alloc(op: Op) -> List[str]:
    st = op.attrs.get("stages")
    errs = [] if isinstance(st, int) and st >= 1 else [f"stages must be an int >= 1, got {st!r}"]
    if len(shape_of(op.results[0].type)) != 2:
        errs.append(f"the buffer holds a 2-D tile, got {op.results[0].type}")
    return errs


def _bulk_reduce_1d(op: Op) -> List[str]:
    errs = _bulk_buffer_and_stage(op)
    if errs is None or op.operands[0].op.name != "bulk_add_buffer_alloc":
        return ["operand 0 must be a bulk_add_buffer_alloc"]
    if not _is_i1(op.operands[2]):
        errs.append("the predicate must be an i1 scalar")
    p = op.operands[3].type
    if shape_of(p) or not p.is_ptr():
        errs.append(f"operand 3 must be a scalar pointer, got {p}")
    if op.attrs.get("kind") not in REDUCE_KINDS:
        errs.append(f"kind must be one of {list(REDUCE_KINDS)}, got {op.attrs.get('kind')!r}")
    return errs + _l2(op)


def _bulk_buffer_alloc(op: Op) -> List[str]:
    desc = op.operands[0].type
    if not isinstance(desc, tensor_descriptor_type):
        return ["operand 0 must be a tensor descriptor"]
    st = op.attrs.get("stages")
    errs = [] if isinstance(st, int) and st >= 1 else [f"stages must be an int >= 1, got {st!r}"]
    if op.results[0].type != desc.block_type:
        errs.append(f"the buffer's tile is the descriptor's block {desc.block_type}, got {op.results[0].type}")
    return errs


def _bulk_buffer_and_stage(op: Op) -> Optional[List[str]]:
    """Errors of operands 0 (a bulk_buffer_alloc) and 1 (the stage); None when operand 0 is not a buffer."""
    if not _bulk_buffer(op.operands[0]):
        return None
    return [] if _is_i32(op.operands[1]) else ["the stage must be an i32 scalar"]


def _bulk_stage_store(op: Op) -> List[str]:
    buf = op.operands[0]
    errs = _bulk_buffer_and_stage(op)
    if errs is None:
        return ["operand 0 must be a bulk_buffer_alloc"]
    if op.operands[2].type != buf.type:
        errs.append(f"the tile's type {op.operands[2].type} differs from the buffer's {buf.type}")
    return errs


def _bulk_copy_out(op: Op) -> List[str]:
    """What ``bulk_reduce`` and ``bulk_store`` share: (buffer, stage, predicate, offsets...)."""
    buf = op.operands[0]
    errs = _bulk_buffer_and_stage(op)
    if errs is None:
        return ["operand 0 must be a bulk_buffer_alloc"]
    if not _is_i1(op.operands[2]):
        errs.append("the predicate must be an i1 scalar")
    offs = op.operands[3:]
    if len(offs) != len(shape_of(buf.type)) or not all(_is_i32(v) for v in offs):
        errs.append("one i32 offset per descriptor dimension")
    return errs


def _bulk_reduce(op: Op) -> List[str]:
    errs = _bulk_copy_out(op)
    if op.attrs.get("kind") not in REDUCE_KINDS:
        errs.append(f"kind must be one of {list(REDUCE_KINDS)}, got {op.attrs.get('kind')!r}")
    return errs


def _bulk_store(op: Op) -> List[str]:
    return _bulk_copy_out(op)


def _bulk_wait_group(op: Op) -> List[str]:
    errs = [] if _is_i1(op.operands[0]) else ["the predicate must be an i1 scalar"]
    n = op.attrs.get("pending")
    if not (isinstance(n, int) and not isinstance(n, bool) and 0 <= n <= 7):
        errs.append(f"pending must be an int in 0..7, got {n!r}")
    if not isinstance(op.attrs.get("read"), bool):
        errs.append(f"read must be a bool, got {op.attrs.get('read')!r}")
    return errs


def _types(vals):
    return [str(v.type) for v in vals]


def _for(op):
    """Loop-carried values: inits, body arguments, yielded values and results agree in number and type."""
    if len(op.regions) != 1 or len(op.operands) < 3:
        return []
    body = op.regions[0]
    errs = []
    lb, ub, step = op.operands[:3]
    if len({str(lb.type), str(ub.type), str(step.type)}) > 1 or shape_of(lb.type):
        errs.append(f"bounds must be scalars of one type, got {_types(op.operands[:3])}")
    if not body.args or body.args[0].type != lb.type:
        errs.append("the body's first argument must be the induction variable (the bounds' type)")
    inits = op.operands[3:]
    carried = body.args[1:]
    yld = body.ops[-1] if body.ops else None
    if yld is None or yld.name != "scf.yield":
        return errs + ["the body must end in scf.yield"]
    if not (len(inits) == len(carried) == len(yld.operands) == len(op.results)):
        return errs + [f"{len(inits)} inits, {len(carried)} carried arguments, {len(yld.operands)} yielded "
                       f"values and {len(op.results)} results must agree"]
    for i, (a, b, c, d) in enumerate(zip(inits, carried, yld.operands, op.results)):
        if not (a.type == b.type == c.type == d.type):
            errs.append(f"carried value {i}: init {a.type}, argument {b.type}, yield {c.type}, result {d.type}")
    return errs


def _if(op):
    if len(op.regions) != 2:
        return []
    errs = []
    for r in op.regions:
        term = r.ops[-1] if r.ops else None
        if term is None or term.name != "scf.yield" or _types(term.operands) != _types(op.results):
            errs.append(f"each branch must yield the results' types {_types(op.results)}")
            break
    return errs


def _same_type(op):
    if op.name == "sort" and op.attrs.get("k") is not None:
        src, res = shape_of(op.operands[0].type), shape_of(op.results[0].type)
        ok = src[:-1] == res[:-1] and res[-1] == op.attrs["k"] and scalar_of(op.operands[0].type) == \
            scalar_of(op.results[0].type)
        return [] if ok else [f"topk of {op.operands[0].type} cannot give {op.results[0].type}"]
    return [] if op.operands[0].type == op.results[0].type else \
        [f"result {op.results[0].type} differs from operand {op.operands[0].type}"]


def _gather(op):
    src, idx = (v.type for v in op.operands)
    errs = []
    if shape_of(idx) != shape_of(op.results[0].type) or scalar_of(src) != scalar_of(op.results[0].type):
        errs.append(f"gather of {src} by {idx} cannot give {op.results[0].type}")
    if not (isinstance(scalar_of(idx), T.dtype) and scalar_of(idx).is_int()):
        errs.append(f"gather index must be an integer tile, got {idx}")
    return errs


def _histogram(op):
    r = op.results[0].type
    return [] if shape_of(r) == (op.attrs.get("num_bins"),) and scalar_of(r) == T.int32 else \
        [f"histogram result must be int32[{op.attrs.get('num_bins')}], got {r}"]


def _enclosing_loop(op: Op):
    b = op.block
    return b.parent if b is not None and b.parent is not None and b.parent.name == "scf.for" else None


def _cp_ring_with_async_wgmma(loop: Op) -> bool:
    """A loop with a cp.async ring (tagged loads or ring_reads) and no TMA ring, whose dots stay in flight."""
    ops = loop.regions[0].ops
    rings = {(o.attrs.get("pipeline") or {}).get("ring") for o in ops if o.name in ("load", "descriptor_load")}
    # after the expansions the tags are gone: a TMA ring shows as its copies/waits, a cp.async ring as async_copy
    tma = "tma" in rings or any(o.name in ("tma_copy_to_ring", "mbarrier_wait") for o in ops)
    cp = "cp.async" in rings or any(o.name == "async_copy" for o in ops)
    return cp and not tma and any(o.name == "dot" and o.attrs.get("wgmma") == "async" for o in ops)


def _schedule(op: Op) -> List[str]:
    """The schedule attributes (passes/schedule.py): well-formed, on the ops that may carry them, and on
    loads/dots directly inside a loop that has a ring."""
    from .ops import RING_REFILL, RINGS, WGMMA_ISSUE, WS_RELEASE
    errs = []
    p, loop = op.attrs.get("pipeline"), _enclosing_loop(op)
    if p is not None and op.name == "scf.for":
        st, la = (p.get("stages"), p.get("lookahead")) if isinstance(p, dict) else (None, None)
        refill = p.get("refill") if isinstance(p, dict) else None
        if not (isinstance(st, int) and isinstance(la, int) and st >= 2 and 1 <= la <= st - 1):
            errs.append(f"pipeline must be {{stages >= 2, lookahead in 1..stages-1}}, got {p!r}")
        elif refill is not None and refill not in RING_REFILL:
            errs.append(f"pipeline refill must be one of {RING_REFILL}, got {refill!r}")
        elif refill == "top" and (op.attrs.get("ws") or any(o.name == "dot" and o.attrs.get("wgmma") == "async"
                                                            for o in op.walk())):
            # the top of iteration i refills the stage iteration i-1 read: no wgmma of it may still read it
            errs.append("refill='top' needs a loop without a producer warp whose wgmmas all finish in their "
                        "iteration (none wgmma='async')")
        elif la == st - 1 and refill is None and not op.attrs.get("ws") and _cp_ring_with_async_wgmma(op):
            # the head of iteration i would refill the stage iteration i-1's wgmma may still be reading
            errs.append("a cp.async ring whose wgmma stays in flight needs lookahead <= stages-2 or "
                        "refill='after_dots'")
        elif not any((o.attrs.get("pipeline") and o.name in ("load", "descriptor_load")) or o.name == "ring_read"
                     for o in op.regions[0].ops):
            errs.append("a pipelined loop needs at least one load its ring copies (or a ring_read)")
    elif p is not None:
        ring = p.get("ring") if isinstance(p, dict) else None
        joins = {"cp.async": ("load", "trans"), "tma": ("descriptor_load", "trans")}.get(ring, ())
        if ring not in RINGS or op.name not in joins:
            errs.append(f"{op.name} cannot join a {ring!r} ring (cp.async: load, trans; tma: descriptor_load, trans)")
        elif op.name == "trans" and (op.operands[0].op is None or
                                     ((op.operands[0].op.attrs.get("pipeline") or {}).get("ring") != ring)):
            errs.append(f"a trans joins the {ring!r} ring of the tile it views, which is not ringed so")
        elif op.name == "load" and not (isinstance(p.get("vec"), int) and p["vec"] > 0
                                        and p["vec"] & (p["vec"] - 1) == 0):
            errs.append(f"a cp.async load needs a power-of-two vec, got {p.get('vec')!r}")
        if loop is None or not loop.attrs.get("pipeline"):
            errs.append("a ringed load must sit directly in a pipelined loop")
    ws = op.attrs.get("ws")
    if ws is not None:
        ok = isinstance(ws, dict) and ws.get("producer_warps") in (1, 4) and ws.get("release") in WS_RELEASE \
            and isinstance(ws.get("setmaxnreg"), bool) and isinstance(ws.get("pingpong"), bool) \
            and ws.get("consumer_regs", 232 if ws.get("setmaxnreg") else None) in ((232, 240) if ws.get("setmaxnreg")
                                                                                 else (None,))
        if not ok:
            errs.append(f"ws must be {{producer_warps in (1, 4), setmaxnreg, release in {WS_RELEASE}, pingpong"
                        f"[, consumer_regs in (232, 240) with setmaxnreg]}}, "
                        f"got {ws!r}")
        if not op.attrs.get("pipeline"):
            errs.append("a warp-specialised loop needs a pipeline (its producer fills the ring)")
        elif isinstance(ws, dict) and ws.get("release") == "at_issue" and any(
                o.name == "dot" and o.attrs.get("wgmma") == "async" for o in op.regions[0].ops):
            # the producer refills a stage as soon as it is released: a wgmma still in flight across the
            # back edge would read it ('deferred' ones are waited for before the release, at the yield)
            errs.append("a warp-specialised loop with wgmma dots left in flight must release its stages "
                        "'lagged', not 'at_issue'")
    w = op.attrs.get("wgmma")
    if w is not None and (w not in WGMMA_ISSUE or loop is None or not loop.attrs.get("pipeline")):
        errs.append(f"wgmma must be one of {WGMMA_ISSUE} on a dot in a pipelined loop, got {w!r}")
    if op.attrs.get("pin_wait") is not None and (op.attrs["pin_wait"] is not True or w != "deferred"):
        errs.append(f"pin_wait is True on a dot with wgmma='deferred', got {op.attrs['pin_wait']!r} on {w!r}")
    ip = op.attrs.get("in_place")
    if ip is not None and (ip is not True or op.attrs.get("pipeline")
                           or (op.name == "trans" and not (op.operands[0].op is not None
                                                           and op.operands[0].op.attrs.get("in_place")))):
        errs.append("in_place is True on a TMA tile outside a ring (or the trans of one)")
    if op.attrs.get("wgmma_turns") and not (loop is not None and (loop.attrs.get("ws") or {}).get("pingpong")):
        errs.append("wgmma_turns needs a warp-specialised loop with pingpong")
    if op.attrs.get("wgmma_turns") not in (None, True, "take", "give"):
        errs.append(f"wgmma_turns must be True, 'take' or 'give', got {op.attrs['wgmma_turns']!r}")
    if op.attrs.get("wgmma_desc") not in (None, "stepped") or (op.attrs.get("wgmma_desc") and op.name != "dot"):
        errs.append(f"wgmma_desc is 'stepped' on a dot, got {op.attrs['wgmma_desc']!r} on {op.name}")
    return errs


def _is_ring(v) -> bool:
    return v.op is not None and v.op.name in ("ring_alloc", "tma_ring_alloc")


def _is_i32(v) -> bool:
    return not isinstance(v.type, block_type) and v.type == T.int32


def _is_i1(v) -> bool:
    return not isinstance(v.type, block_type) and v.type == T.int1


def _tma_ring_alloc(op: Op) -> List[str]:
    errs = _ring_alloc(op)
    desc = op.operands[0].type
    if not isinstance(desc, tensor_descriptor_type):
        return errs + ["operand 0 must be a tensor descriptor"]
    if not isinstance(op.attrs.get("transposed"), bool):
        errs.append(f"transposed must be a bool, got {op.attrs.get('transposed')!r}")
    elif isinstance(op.results[0].type, block_type):
        shape = tuple(desc.block_shape)
        want = shape[::-1] if op.attrs["transposed"] else shape
        if tuple(shape_of(op.results[0].type)) != want or scalar_of(op.results[0].type) != desc.element_ty:
            errs.append("the ring's tile is the descriptor's block (transposed when read through a trans)")
    return errs


def _barrier_of(v) -> bool:
    return v.op is not None and v.op.name == "mbarrier_at"


def _mbarrier_alloc(op: Op) -> List[str]:
    n = op.attrs.get("count")
    errs = [] if isinstance(n, int) and n >= 1 else [f"count must be an int >= 1, got {n!r}"]
    if op.results[0].type != T.int64:
        errs.append("mbarrier_alloc yields an i64 (the barrier group)")
    return errs


def _mbarrier_at(op: Op) -> List[str]:
    errs = []
    if op.operands[0].op is None or op.operands[0].op.name != "mbarrier_alloc":
        errs.append("operand 0 must be an mbarrier_alloc")
    if not _is_i32(op.operands[1]) or not _is_i32(op.results[0]):
        errs.append("the index and the address are i32 scalars")
    return errs


def _barrier_and(second: str, check) -> Callable[[Op], List[str]]:
    def rule(op: Op) -> List[str]:
        errs = [] if _barrier_of(op.operands[0]) else ["operand 0 must be a barrier (mbarrier_at)"]
        if not check(op.operands[1]):
            errs.append(f"operand 1 must be {second}")
        return errs
    return rule


def _positive(attr: str, rule):
    def check(op: Op) -> List[str]:
        n = op.attrs.get(attr)
        return rule(op) + ([] if isinstance(n, int) and n >= 1 else [f"{attr} must be an int >= 1, got {n!r}"])
    return check


def _elect_one(op: Op) -> List[str]:
    return [] if _is_i1(op.results[0]) else ["elect_one yields an i1"]


def _prefetch_tensormaps(op: Op) -> List[str]:
    errs = [] if _is_i1(op.operands[-1]) else ["the last operand (the predicate) must be an i1 scalar"]
    if not all(isinstance(v.type, tensor_descriptor_type) for v in op.operands[:-1]):
        errs.append("operands before the predicate must be tensor descriptors")
    return errs


def _ws_producer(op: Op) -> List[str]:
    errs = []
    if op.attrs.get("producer_warps") not in (1, 4):
        errs.append(f"producer_warps must be 1 or 4, got {op.attrs.get('producer_warps')!r}")
    if not isinstance(op.attrs.get("setmaxnreg"), bool) or (op.attrs.get("setmaxnreg") and
                                                            op.attrs.get("producer_warps") != 4):
        errs.append("setmaxnreg must be a bool (True only with a producer warpgroup: producer_warps=4)")
    if "consumer_regs" in op.attrs and not (op.attrs.get("setmaxnreg") and op.attrs["consumer_regs"] in (232, 240)):
        errs.append(f"consumer_regs must be 232 or 240, and only with setmaxnreg, got {op.attrs['consumer_regs']!r}")
    st = op.attrs.get("stages")
    if not (isinstance(st, int) and st >= 2):
        errs.append(f"stages must be an int >= 2, got {st!r}")
    if op.block is None or op.block.parent is not None:
        errs.append("ws_producer sits in the kernel's body, not in a region")
    return errs


def _cursor(store: bool) -> Callable[[Op], List[str]]:
    def rule(op: Op) -> List[str]:
        errs = []
        c = op.operands[0]
        if c.op is None or c.op.name != "ring_cursor":
            errs.append("operand 0 must be a ring_cursor")
        if op.attrs.get("field") not in ("stage", "phase"):
            errs.append(f"field must be 'stage' or 'phase', got {op.attrs.get('field')!r}")
        if not _is_i32(op.operands[1] if store else op.results[0]):
            errs.append("the stage and the phase are i32 scalars")
        return errs
    return rule


def _tma_copy_to_ring(op: Op) -> List[str]:
    ring = op.operands[0]
    if ring.op is None or ring.op.name != "tma_ring_alloc":
        return ["operand 0 must be a tma_ring_alloc"]
    errs = []
    if not _is_i32(op.operands[1]):
        errs.append("the stage must be an i32 scalar")
    if not _barrier_of(op.operands[2]):
        errs.append("operand 2 must be a barrier (mbarrier_at)")
    if not _is_i1(op.operands[3]):
        errs.append("the predicate must be an i1 scalar")
    offs = op.operands[4:]
    if len(offs) != len(ring.op.operands[0].type.block_shape) or not all(_is_i32(v) for v in offs):
        errs.append("one i32 offset per descriptor dimension")
    return errs


def _ring_alloc(op: Op) -> List[str]:
    errs = []
    st, which = op.attrs.get("stages"), op.attrs.get("operand")
    # a TMA copy issued ahead of its first read outside loops is a one-stage ring (passes/tma_prefetch.py)
    least = 1 if op.name == "tma_ring_alloc" else 2
    if not (isinstance(st, int) and st >= least):
        errs.append(f"stages must be an int >= {least}, got {st!r}")
    # 'none': a TMA ring whose tiles the loop reads into registers (no dot reads them), of any rank
    if which not in ("a", "b") and not (which == "none" and op.name == "tma_ring_alloc"):
        errs.append(f"operand must be 'a' or 'b' ('none' for a TMA ring), got {which!r}")
    if not isinstance(op.results[0].type, block_type) or (len(shape_of(op.results[0].type)) != 2 and which != "none"):
        errs.append("a ring holds 2-D tiles")
    return errs


def _stage_operand(op: Op) -> List[str]:
    errs = []
    if not _is_ring(op.operands[0]):
        errs.append("operand 0 must be a ring_alloc")
    if isinstance(op.operands[1].type, block_type) or op.operands[1].type != T.int32:
        errs.append("the stage must be an i32 scalar")
    return errs


def _async_copy(op: Op) -> List[str]:
    errs = _stage_operand(op)
    vec, masked = op.attrs.get("vec"), op.attrs.get("masked")
    if not (isinstance(vec, int) and vec > 0 and vec & (vec - 1) == 0):
        errs.append(f"vec must be a power of two, got {vec!r}")
    if not isinstance(masked, bool) or len(op.operands) != 4 + masked:
        errs.append("operands are ring, stage, ptr [, mask if masked], guard")
        return errs
    ptr = op.operands[2]
    if _is_ring(op.operands[0]) and shape_of(ptr.type) != shape_of(op.operands[0].type):
        errs.append("the pointer tile must have the ring's tile shape")
    if not isinstance(scalar_of(ptr.type), pointer_type):
        errs.append("operand 2 must be a pointer tile")
    if op.operands[-1].type != T.int1:
        errs.append("the guard must be an i1 scalar")
    return errs


def _staged_operand(op: Op) -> List[str]:
    errs = []
    if op.attrs.get("operand") not in ("a", "b"):
        errs.append(f"operand must be 'a' or 'b', got {op.attrs.get('operand')!r}")
    if not isinstance(op.operands[0].type, block_type) or len(shape_of(op.operands[0].type)) != 2 \
            or op.results[0].type != op.operands[0].type:
        errs.append("stages a 2-D tile and yields its type")
    return errs


def _ring_read(op: Op) -> List[str]:
    errs = _stage_operand(op)
    ring = op.operands[0].op
    to_regs = ring is not None and ring.name == "tma_ring_alloc" and ring.attrs.get("operand") == "none"
    if bool(op.attrs.get("registers")) != to_regs:
        errs.append("registers=True exactly on the reads of a TMA ring of operand 'none'")
    if _is_ring(op.operands[0]) and op.results[0].type != op.operands[0].type:
        ring_ty, ty = op.operands[0].type, op.results[0].type
        transposed_view = "operand" in op.attrs and list(shape_of(ty)) == list(reversed(shape_of(ring_ty))) \
            and scalar_of(ty) == scalar_of(ring_ty)
        if not transposed_view:
            errs.append("ring_read yields the ring's tile type (or, with operand/transposed, its transpose)")
    return errs


def _wait_group(op: Op) -> List[str]:
    n = op.attrs.get("pending")
    return [] if isinstance(n, int) and n >= 0 else [f"pending must be an int >= 0, got {n!r}"]


def _wgmma_wait(op: Op) -> List[str]:
    errs = _wait_group(op)
    if op.attrs.get("pin") not in (None, True):
        errs.append(f"pin is True or absent, got {op.attrs['pin']!r}")
    if [r.type for r in op.results] != [v.type for v in op.operands]:
        errs.append("wgmma_wait yields its operands' types, one result per operand")
    elif any(not isinstance(v.type, block_type) or scalar_of(v.type).name != "fp32" for v in op.operands):
        errs.append("wgmma_wait takes fp32 accumulator tiles")
    return errs


RULES: Dict[str, Callable[[Op], List[str]]] = {
    "ring_alloc": _ring_alloc,
    "async_copy": _async_copy,
    "ring_read": _ring_read,
    "tma_ring_alloc": _tma_ring_alloc,
    "mbarrier_alloc": _mbarrier_alloc,
    "mbarrier_at": _mbarrier_at,
    "elect_one": _elect_one,
    "mbarrier_init": _positive("count", _barrier_and("an i1 predicate", _is_i1)),
    "mbarrier_expect_tx": _positive("bytes", _barrier_and("an i1 predicate", _is_i1)),
    "mbarrier_inval": _barrier_and("an i1 predicate", _is_i1),
    "mbarrier_wait": _barrier_and("an i32 parity", _is_i32),
    "prefetch_tensormaps": _prefetch_tensormaps,
    "tma_copy_to_ring": _tma_copy_to_ring,
    "ws_producer": _ws_producer,
    "ring_cursor": lambda op: [] if op.results[0].type == T.int64 else ["ring_cursor yields an i64 (the cursor)"],
    "cursor_load": _cursor(False),
    "cursor_store": _cursor(True),
    "warp_leader": lambda op: [] if _is_i1(op.results[0]) else ["warp_leader yields an i1"],
    "warpgroup_index": lambda op: [] if _is_i32(op.results[0]) and op.attrs.get("uniform", False) in (True, False)
    else ["warpgroup_index yields an i32 (uniform: a bool)"],
    "mbarrier_arrive": _barrier_and("an i1 predicate", _is_i1),
    "ring_free": lambda op: [] if op.operands[0].op is not None and op.operands[0].op.name == "tma_ring_alloc"
    else ["operand 0 must be a tma_ring_alloc"],
    "stage_operand": _staged_operand,
    "async_wait_group": _wait_group,
    "wgmma_wait": _wgmma_wait,
    **{k: _arith(_float_only) for k in ("fadd", "fsub", "fmul", "fdiv", "frem", "fmax", "fmin", "fma",
                                         "fneg", "fabs", "exp", "exp2", "log", "log2", "sqrt", "sqrt_rn",
                                         "rsqrt", "sin", "cos", "erf", "floor", "ceil", "tanh")},
    **{k: _arith(_int_only) for k in ("add", "sub", "mul", "sdiv", "udiv", "srem", "urem", "smax", "smin",
                                       "umax", "umin", "and", "or", "xor", "shl", "ashr", "lshr",
                                       "umulhi", "smulhi", "iabs")},
    "exp2": lambda op: _arith(_float_only)(op) + _exp2_poly(op),
    "cmpi": _cmp(INT_PREDICATES, False),
    "cmpf": _cmp(FLOAT_PREDICATES, True),
    "select": _select,
    "cast": _cast,
    "bitcast": _same_shape,
    "addptr": _addptr,
    "hint": _same_shape,
    "convert_layout": _convert_layout,
    "load": _load,
    "store": _store,
    "atomic_rmw": _atomic,
    "atomic_cas": _atomic,
    "dot": _dot,
    "make_tensor_descriptor": _make_descriptor,
    "descriptor_load": _descriptor_access,
    "descriptor_store": _descriptor_access,
    "descriptor_reduce": _descriptor_reduce,
    "bulk_buffer_alloc": _bulk_buffer_alloc,
    "bulk_stage_store": _bulk_stage_store,
    "bulk_reduce": _bulk_reduce,
    "bulk_add": _bulk_add,
    "bulk_add_buffer_alloc": _bulk_add_buffer_alloc,
    "bulk_reduce_1d": _bulk_reduce_1d,
    "bulk_store": _bulk_store,
    "bulk_commit_group": lambda op: [] if _is_i1(op.operands[0]) else ["the predicate must be an i1 scalar"],
    "bulk_wait_group": _bulk_wait_group,
    "scf.for": _for,
    "scf.if": _if,
    **{k: _shape_op for k in ("splat", "broadcast", "expand_dims", "reshape", "trans")},
    "extern_elementwise": _same_shape,
    "inline_asm": _same_shape,
    **{k: _same_type for k in ("flip", "sort", "bitonic_merge")},
    "gather": _gather,
    "histogram": _histogram,
}

def _smem(op: Op) -> List[str]:
    """``smem_buffer={offset, bytes}`` (passes/smem_offsets.py): on a buffer op or a conversion through
    shared memory, 1024-byte aligned."""
    at = op.attrs["smem_buffer"]
    if op.name not in ("ring_alloc", "tma_ring_alloc", "stage_operand") and not (
            op.name == "descriptor_load" and op.attrs.get("in_place")) and not (
            op.name == "convert_layout" and "smem" in op.attrs):
        return ["smem_buffer is on the ops that hold a shared-memory buffer (ring_alloc, tma_ring_alloc, stage_operand, "
                "an in_place descriptor_load, a convert_layout with a smem plan)"]
    off, n = (at.get("offset"), at.get("bytes")) if isinstance(at, dict) else (None, None)
    if not (isinstance(off, int) and isinstance(n, int) and off >= 0 and n >= 1 and off % 1024 == 0):
        return [f"smem_buffer must be {{offset=a multiple of 1024, bytes >= 1}}, got {at!r}"]
    return []


_SCHEDULE_ATTRS = frozenset({"pipeline", "ws", "wgmma", "wgmma_turns", "pin_wait", "in_place", "wgmma_desc"})


def verify(fn: Function) -> None:
    """Raise ``VerificationError`` listing every broken op (with its kernel line)."""
    errors: List[str] = []
    cw = fn.attrs.get("consumer_warps")
    if cw is not None and not (type(cw) is int and cw >= 4 and cw % 4 == 0):
        errors.append(f"kernel attribute consumer_warps must be whole warpgroups (an int, a multiple of 4), got {cw!r} "
                      f"(written by split_ws_consumers)")
    _verify_block(fn.body, set(fn.body.args[i].id for i in range(len(fn.body.args))), errors, top=True)
    if errors:
        raise VerificationError("tile IR verification failed:\n" + "\n".join(errors[:20]))


class _Where:
    """``"  <the op's first line>  [file:line:col]"``, formatted when an error message is."""
    __slots__ = ("op",)

    def __init__(self, op: Op):
        self.op = op

    def __str__(self) -> str:
        return f"  {print_op(self.op).splitlines()[0].strip()}  [{self.op.loc}]"



def _verify_block(block: Block, defined: Set[int], errors: List[str], top=False):
    # one set for the whole walk, each block taking back what it added when it ends (copying it per block was
    # quadratic in nested loops' sizes)
    added = [a.id for a in block.args if a.id not in defined]
    defined.update(added)
    for i, op in enumerate(block.ops):
        # the op's text only when something is wrong: printing an op prints its regions too, so doing it
        # for every op of nested loops was most of the verifier's time (run after every tile pass)
        where = _Where(op)
        d = OPS.get(op.name)
        if d is None:
            errors.append(f"unknown op {op.name!r}\n{where}")
            continue
        lo, hi = d.operands
        if len(op.operands) < lo or (hi >= 0 and len(op.operands) > hi):
            errors.append(f"{op.name} takes {lo}..{hi if hi >= 0 else 'n'} operands, got {len(op.operands)}\n{where}")
        for a in d.attrs:
            if a not in op.attrs:
                errors.append(f"{op.name} is missing attribute {a!r}\n{where}")
        for o in op.operands:
            if o.id not in defined:
                errors.append(f"{op.name} uses a value that is not defined before it\n{where}")
        if len(op.regions) != d.regions:
            errors.append(f"{op.name} needs {d.regions} regions, has {len(op.regions)}\n{where}")
        if op.name in TERMINATORS and i != len(block.ops) - 1:
            errors.append(f"terminator {op.name} is not last in its block\n{where}")
        for rule in (RULES.get(op.name), _schedule if _SCHEDULE_ATTRS & op.attrs.keys() else None,
                     _smem if "smem_buffer" in op.attrs else None):
            if not rule:
                continue
            try:
                for e in rule(op):
                    errors.append(f"{op.name}: {e}\n{where}")
            except Exception as e:  # a malformed op must not crash the verifier
                errors.append(f"{op.name}: malformed ({e})\n{where}")
        for region in op.regions:
            _verify_block(region, defined, errors)
        for r in op.results:
            if r.id not in defined:
                defined.add(r.id)
                added.append(r.id)
    defined.difference_update(added)
