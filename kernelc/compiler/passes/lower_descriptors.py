"""Lower tensor-descriptor loads and stores to masked pointer loads and stores.

``descriptor_load %d, %o0, .., %on-1`` becomes the tile of pointers ``base + sum (o_d + i_d) * stride_d``
and the in-bounds mask ``0 <= o_d + i_d < shape_d`` (base, shapes and strides are the operands of
the ``make_tensor_descriptor`` that made ``%d``), then a plain ``load`` with ``other`` = the padding;
``descriptor_store`` becomes a masked ``store``, ``descriptor_reduce`` masked relaxed ``atomic_rmw``s. The rewrite is ``generic_descriptor_load``/``_store``
of ``kernelc/language/blocks.py`` run against an IR builder, so compiled code and the interpreter
share one definition. Layout assignment then gives these loads the usual coalesced, vectorised
layouts (and the cp.async pipeline takes those feeding a dot).

Ops that ``tma_eligible(op, arch)`` claims are left in place for the Hopper TMA lowering
(``kernelc/compiler/codegen/tma.py``), which must then handle them from layout assignment on. A
``make_tensor_descriptor`` left without users is removed by the following ``simplify``. Descriptors
made in the kernel that TMA copies through get ``tensor_map={slot, build, check_alignment}``
(``_assign_device_maps``; codegen/device_tensor_map.py builds the maps). A store of such a descriptor
whose inner extent is read from memory becomes ``scf.if`` on that extent: TMA or the masked store
(``_split_on_extent``).

Example (tile IR before and after, 2-D descriptor, names shortened)::

    %d = make_tensor_descriptor %base, %M, %N, %ld {padding='zero', host_arg='x_desc'}
    %t = descriptor_load %d, %r, %c {block_shape=[64, 64]} : <64x64xfp16>
  ->
    %rows = add (splat %r), (arange 0..64) ; %cols = add (splat %c), (arange 0..64)
    %p = addptr (addptr (splat %base), (mul (cast %rows), %ld)[:, None]), %cols[None, :]
    %m = and ((%rows >= 0) & (%rows < %M))[:, None], ((%cols >= 0) & (%cols < %N))[None, :]
    %t = load %p, %m, 0.0 : <64x64xfp16>
"""
from __future__ import annotations

from typing import Callable, List, Optional

from ...errors import CompilationError
from ...language.blocks import generic_descriptor_load, generic_descriptor_reduce, generic_descriptor_store
from ...language.core import builder_scope, tensor
from ...language.dtypes import int64, shape_of, tensor_descriptor_type
from ..frontend.ir_builder import IRBuilder
from ..abi import tensor_map_type
from ..ir.core import Argument, Block, Function, Op, Value, replace_all_uses
from ...options import get
from ..target_rules import TMA_PTX_ELEMTYPE, store_extent_ok, tma_type_ok
from .axis_info import analyze
from .layout_assign import REMATERIALIZABLE

DESCRIPTOR_OPS = ("descriptor_load", "descriptor_store", "descriptor_reduce")
WRITES = ("descriptor_store", "descriptor_reduce")  # the TMA store's extent rule holds for both


def host_descriptor_op(desc: Value) -> Optional[Op]:
    """The ``make_tensor_descriptor`` of a host descriptor argument behind ``desc`` (None otherwise)."""
    mk = desc.op
    if mk is None or mk.name != "make_tensor_descriptor" or not mk.attrs.get("host_arg"):
        return None
    return mk


def _argument_of(fn: Function, v: Value) -> Optional[Argument]:
    for a, arg in zip(fn.arguments, fn.body.args):
        if arg is v:
            return a
    return None


def tma_eligible(op: Op, arch: Optional[str], fn: Optional[Function] = None, axis=None) -> bool:
    """Whether the TMA lowering takes this ``descriptor_load``/``descriptor_store`` (else the generic
    lowering rewrites it): sm_90a, KERNELC_TMA not 0, and either

    - a host descriptor whose machine arguments include a CUtensorMap (compiler/abi.py: the type is
      one TMA copies into the swizzled operand layout) and whose base and strides are known 16-byte
      aligned (``fn``'s argument divisibility, as the runtime specialises on it); or
    - a descriptor made in the kernel that ``device_map_build`` accepts (its map built at the entry or
      where it is made, with a base and strides 16-byte aligned).

    In both, the innermost offset must be proven a whole number of 16-byte chunks: the copy engine stops the
    kernel ("illegal instruction") on any other inner coordinate, for loads, stores and reductions alike
    (docs/attention.md, "TMA writes at negative coordinates"); such an op takes the generic lowering.

    Without ``fn`` nothing is known, so no."""
    if op.name not in DESCRIPTOR_OPS or fn is None:
        return False
    if not tma_type_ok(op.operands[0].type, arch or ""):
        return False
    if axis is None:
        axis = analyze(fn)
    if not inner_offset_aligned(op, axis):
        return False
    mk = host_descriptor_op(op.operands[0])
    if mk is None:
        return device_map_eligible(op, fn, axis)
    name = mk.attrs["host_arg"]
    if not any(isinstance(a.type, tensor_map_type) and a.name == f"{name}.tensormap" for a in fn.arguments):
        return False
    ty = op.operands[0].type
    n = ty.ndim
    eb = ty.element_ty.itemsize
    base = _argument_of(fn, mk.operands[0])
    strides = [_argument_of(fn, v) for v in mk.operands[1 + n:]]
    if base is None or base.divisibility < 16:
        return False
    # the runtime reports int divisibility by 16 (elements): then the byte stride is 16-aligned too
    if not all(s is not None and (s.divisibility * eb) % 16 == 0 for s in strides):
        return False
    if op.name in WRITES:
        return store_extent_ok(_argument_of(fn, mk.operands[n]), eb)
    return True


def inner_offset_aligned(op: Op, axis) -> bool:
    """Whether the innermost offset of the descriptor op ``op`` (its last operand) is proven a multiple of 16
    bytes by the axis analysis ``axis``."""
    eb = op.operands[0].type.element_ty.itemsize
    return (axis.get(op.operands[-1]).divisibility[0] * eb) % 16 == 0


_ENTRY_OPS = REMATERIALIZABLE | {"program_id", "num_programs"}


def device_map_eligible(op: Op, fn: Function, axis=None) -> bool:
    """Whether the descriptor op ``op`` (whose descriptor was made in the kernel) can copy through a
    map the kernel builds on the device; ``axis``: the function's axis analysis (computed if None)."""
    return device_map_build(op, fn, axis) is not None


def device_map_build(op: Op, fn: Function, axis=None) -> Optional[dict]:
    """How the map of ``op``'s made descriptor is built, or None (generic lowering):

    - ``{"build": "entry"}``: made at the top level from scalars the entry can compute; the map is
      built once at the kernel's entry (before a warp-specialised split).
    - ``{"build": "here"}``: made anywhere else (inside loops and branches, from loaded values); the
      map is built where the ``make_tensor_descriptor`` is, every time it runs.

    TMA needs a 16-byte aligned base and byte strides. The axis analysis must prove it, except for a
    value computed from memory (a loaded pointer or leading dimension), which nothing can see: there
    the kernel relies on ``make_tensor_descriptor``'s documented contract (Triton's too), and
    ``check_alignment`` makes the build trap on a violation instead of misaddressing."""
    mk = op.operands[0].op
    if mk is None or mk.name != "make_tensor_descriptor" or mk.attrs.get("host_arg"):
        return None
    ty: tensor_descriptor_type = op.operands[0].type
    if ty.element_ty.name not in TMA_PTX_ELEMTYPE:
        return None
    build = "entry" if mk.block is fn.body and entry_computable(mk.operands, fn) else "here"
    if build == "here" and not get("KERNELC_DEVICE_MAPS_ANYWHERE"):
        return None  # opt-in until the in-place build has run on a GPU (docs/triton-tutorials.md, 08)
    if build == "here" and _asks_warp_specialization(fn):
        return None  # the producer warp would copy through a map the consumers rebuild (see lower_descriptors)
    if build == "here" and _may_be_ringed(op) and _made_in_loop_of(mk, op):
        return None  # a ring prefetches later trips' tiles before this trip's map exists
    if axis is None:
        axis = analyze(fn)
    n = ty.ndim
    eb = ty.element_ty.itemsize
    div = lambda v: axis.get(v).divisibility[0]  # noqa: E731  (bytes for the pointer, elements for ints)
    check = False
    for v, scale in _unproven_alignment(mk, axis):
        if build == "entry" or not from_memory(v, fn):
            return None
        # a store split on its extent tests these too (``_split_on_extent``): no trap, the map is only
        # used where the test passed
        check = "guarded" if op.attrs.get("extent_checked") else True
    if op.name in WRITES and not op.attrs.get("extent_checked") and \
            not store_extent_ok(div(mk.operands[n]), eb):
        return None  # a store's inner extent must be whole 16-byte chunks (target_rules): proven, or checked
    return {"build": build, "check_alignment": check}


def _unproven_alignment(mk: Op, axis) -> List[tuple]:
    """(value, bytes per unit) of the base and strides of ``mk`` not proven 16-byte aligned."""
    ty: tensor_descriptor_type = mk.results[0].type
    n, eb = ty.ndim, ty.element_ty.itemsize
    div = lambda v: axis.get(v).divisibility[0]  # noqa: E731  (bytes for the pointer, elements for ints)
    return [(v, scale) for v, scale in [(mk.operands[0], 1)] + [(s, eb) for s in mk.operands[1 + n:]]
            if (div(v) * scale) % 16]


def from_memory(v: Value, fn: Function) -> bool:
    """Whether ``v`` is computed (through scalar ops) from a value loaded from memory."""
    seen = set()
    todo = [v]
    while todo:
        v = todo.pop()
        if v.id in seen or v.op is None:
            continue
        seen.add(v.id)
        if v.op.name == "load":
            return True
        if not shape_of(v.type):
            todo.extend(v.op.operands)
    return False


def _innermost_for(op: Op) -> Optional[Op]:
    b = op.block
    while b is not None and b.parent is not None:
        if b.parent.name == "scf.for":
            return b.parent
        b = b.parent.block
    return None


def _made_in_loop_of(mk: Op, op: Op) -> bool:
    """Whether ``mk`` is inside the innermost ``for`` loop around ``op`` (it runs on every trip of it)."""
    loop = _innermost_for(op)
    b = mk.block
    while loop is not None and b is not None and b.parent is not None:
        if b.parent is loop:
            return True
        b = b.parent.block
    return False


def _may_be_ringed(op: Op) -> bool:
    """Whether ``op`` is a load whose tile a dot reads (directly or transposed): a load the pipeline
    schedule may move into a ring that prefetches it trips ahead (passes/schedule.py)."""
    if op.name != "descriptor_load":
        return False
    readers = [u for u in op.block.ops if op.results[0] in u.operands]
    readers += [u for t in readers if t.name == "trans" for u in op.block.ops if t.results[0] in u.operands]
    return any(u.name == "dot" for u in readers)


def _asks_warp_specialization(fn: Function) -> bool:
    return any(o.name == "scf.for" and o.attrs.get("warp_specialize") for o in fn.walk())


def entry_computable(values: List[Value], fn: Function) -> bool:
    """Whether every value is a scalar computed from arguments by ops the entry can re-emit."""
    args = {a.id for a in fn.body.args}
    seen = set()
    todo = list(values)
    while todo:
        v = todo.pop()
        if v.id in seen or v.id in args:
            continue
        seen.add(v.id)
        d = v.op
        if d is None or shape_of(v.type) or d.name not in _ENTRY_OPS or d.block is not fn.body:
            return False
        todo.extend(d.operands)
    return True


def lower_descriptors(fn: Function, arch: Optional[str] = None,
                      claim: Optional[Callable[[Op, Optional[str]], bool]] = None) -> Function:
    """Rewrite every descriptor load/store that ``claim`` (default: ``tma_eligible``) does not take
    into masked load/store.

    Mutates and returns ``fn``; run ``simplify`` afterwards (it removes unused descriptors).
    """
    if claim is None:
        axis = []  # computed once, on the first descriptor op (the offsets' and made maps' alignment proofs)

        def claim(op, a):
            if not axis:
                axis.append(analyze(fn))
            return tma_eligible(op, a, fn, axis[0])
    _lower_block(fn, fn.body, arch, claim)
    _assign_device_maps(fn)
    return fn


def _assign_device_maps(fn: Function) -> None:
    """Write each made descriptor's map into its ``make_tensor_descriptor`` as ``tensor_map``: its slot
    in the program's global scratch (codegen/device_tensor_map.py), where it is built, and whether the
    build checks the alignment at run time. Codegen follows these attributes."""
    axis = None
    slot = 0
    builds_here = False
    for mk in fn.walk():
        if mk.name != "make_tensor_descriptor" or mk.attrs.get("host_arg"):
            continue
        users = [o for o in fn.walk() if o.name in DESCRIPTOR_OPS and o.attrs.get("tma") and o.operands[0] is
                 mk.results[0]]
        if not users:
            continue
        if axis is None:
            axis = analyze(fn)
        plans = [device_map_build(o, fn, axis) for o in users]
        if any(p is None for p in plans):
            raise CompilationError("internal: a descriptor op tagged for TMA lost its device map", mk.loc.file,
                                   mk.loc.line, mk.loc.col, mk.loc.function)
        checks = [p["check_alignment"] for p in plans]
        # a load's map traps on a violated contract; a map only guarded stores use needs no trap
        check = True if True in checks else "guarded" if "guarded" in checks else False
        mk.attrs["tensor_map"] = {"slot": slot, "build": plans[0]["build"], "check_alignment": check}
        builds_here |= plans[0]["build"] == "here"
        slot += 1
    if builds_here:
        # a producer warp only sees maps built before the split: no loop of this kernel gets one
        for o in fn.walk():
            if o.name == "scf.for" and o.attrs.get("warp_specialize") is None:
                o.attrs["warp_specialize"] = False


def _lower_block(fn: Function, block: Block, arch, claim) -> None:
    for op in list(block.ops):
        for region in op.regions:
            _lower_block(fn, region, arch, claim)
        if op.name in DESCRIPTOR_OPS:
            if claim(op, arch):
                op.attrs["tma"] = True  # codegen/descriptors.py lowers it with TMA, trusting this tag
            elif _claimed_if_extent_checked(fn, op, arch, claim):
                _split_on_extent(fn, block, op)
            else:
                _rewrite(fn, block, op)


def _claimed_if_extent_checked(fn: Function, op: Op, arch, claim) -> bool:
    """Whether TMA would take this store of a made descriptor but for its inner extent, which is read
    from memory (a grouped GEMM's N): then a run-time test picks TMA or the masked store."""
    if op.name != "descriptor_store" or host_descriptor_op(op.operands[0]) is not None:
        return False
    mk = op.operands[0].op
    if mk is None or mk.name != "make_tensor_descriptor" or not from_memory(mk.operands[op.operands[0].type.ndim], fn):
        return False
    op.attrs["extent_checked"] = True
    if claim(op, arch):
        return True
    del op.attrs["extent_checked"]
    return False


def _split_on_extent(fn: Function, block: Block, op: Op) -> None:
    """``descriptor_store`` -> ``scf.if`` on the TMA store's requirements: the inner extent is whole
    16-byte chunks, and so are the base and strides the axis analysis cannot prove aligned (read from
    memory: a grouped GEMM's C and ldc). The TMA store in the then-branch, the masked store
    (``_rewrite``) in the else-branch. The map is then built without a trap (``check_alignment='guarded'``):
    a C whose rows are not 16-byte multiples takes the masked store instead of stopping the kernel.

    Example (tile IR, fp16, C's address and ldc loaded, names shortened)::

        descriptor_store %c, %t, %r, %k
      ->
        %ok = and (and (cmpi eq (rem %N, 8), 0), (cmpi eq (rem %ldc, 8), 0)), (cmpi eq (rem (cast %C), 16), 0)
        scf.if %ok { descriptor_store %c, %t, %r, %k {tma=True, extent_checked=True} }
        else { <masked store of %t> }
    """
    ty = op.operands[0].type
    mk = op.operands[0].op
    inner = mk.operands[ty.ndim]
    per_chunk = 16 // ty.element_ty.itemsize
    builder = IRBuilder(trace_function=None)
    scratch = builder.push(Block())
    builder.loc = op.loc
    with builder_scope(builder):
        ok = (tensor(inner, inner.type) % per_chunk) == 0
        for v, scale in _unproven_alignment(mk, analyze(fn)):
            x = tensor(v, v.type)
            if scale == 1:  # the base address, in bytes
                ok = ok & ((x.to(int64) % 16) == 0)
            else:  # a stride, in elements
                ok = ok & ((x % per_chunk) == 0)
    op.attrs["tma"] = True
    branch_to_generic(fn, op, ok.handle, scratch.ops, ("tma", "extent_checked"))


def branch_to_generic(fn: Function, op: Op, cond: Value, prelude: List[Op], drop_attrs) -> None:
    """Replace ``op`` in its block by ``prelude`` then ``scf.if cond { op } else { <op without drop_attrs, rewritten
    element-wise> }``: the TMA form where ``cond`` holds, the generic lowering elsewhere."""
    block = op.block
    then_b, else_b = Block(), Block()
    at = block.ops.index(op)
    block.ops.remove(op)
    then_b.append(op)
    then_b.append(Op("scf.yield", [], [], loc=op.loc))
    generic = Op(op.name, op.operands, [], {k: v for k, v in op.attrs.items() if k not in drop_attrs}, loc=op.loc)
    else_b.append(generic)
    _rewrite(fn, else_b, generic)
    else_b.append(Op("scf.yield", [], [], loc=op.loc))
    branch = Op("scf.if", [cond], [], regions=[then_b, else_b], loc=op.loc)
    for k, new in enumerate(list(prelude) + [branch]):
        new.block = block
        block.ops.insert(at + k, new)


def _maker(op: Op) -> Op:
    make = op.operands[0].op
    if make is None or make.name != "make_tensor_descriptor":
        # the frontend never threads a descriptor through a loop or an if; a pass must not either
        raise CompilationError("internal: a tensor descriptor whose origin is not a make_tensor_descriptor "
                               "op", op.loc.file, op.loc.line, op.loc.col, op.loc.function)
    return make


def _rewrite(fn: Function, block: Block, op: Op) -> None:
    make = _maker(op)
    ty = make.results[0].type
    n = ty.ndim
    t = lambda v: tensor(v, v.type)  # noqa: E731
    base, shapes, strides = t(make.operands[0]), [t(v) for v in make.operands[1:1 + n]], \
        [t(v) for v in make.operands[1 + n:]]
    builder = IRBuilder(trace_function=None)
    scratch = builder.push(Block())
    builder.loc = op.loc
    with builder_scope(builder):
        if op.name == "descriptor_load":
            offsets = [t(v) for v in op.operands[1:]]
            result = generic_descriptor_load(ty, base, shapes, strides, offsets)
        elif op.name == "descriptor_reduce":
            offsets = [t(v) for v in op.operands[2:]]
            generic_descriptor_reduce(ty, base, shapes, strides, offsets, t(op.operands[1]), op.attrs["kind"])
            result = None
        else:
            offsets = [t(v) for v in op.operands[2:]]
            generic_descriptor_store(ty, base, shapes, strides, offsets, t(op.operands[1]))
            result = None
    at = block.ops.index(op)
    for k, new in enumerate(scratch.ops):
        new.block = block
        block.ops.insert(at + k, new)
    block.ops.remove(op)
    if result is not None:
        replace_all_uses(fn.body, op.results[0], result.handle)
