"""Lower tensor-descriptor loads and stores to masked pointer loads and stores.

``descriptor_load %d, %o0, .., %on-1`` becomes the tile of pointers ``base + sum (o_d + i_d) * stride_d``
and the in-bounds mask ``0 <= o_d + i_d < shape_d`` (base, shapes and strides are the operands of
the ``make_tensor_descriptor`` that made ``%d``), then a plain ``load`` with ``other`` = the padding;
``descriptor_store`` becomes a masked ``store``. The rewrite is ``generic_descriptor_load``/``_store``
of ``kernelc/language/blocks.py`` run against an IR builder, so compiled code and the interpreter
share one definition. Layout assignment then gives these loads the usual coalesced, vectorised
layouts (and the cp.async pipeline takes those feeding a dot).

Ops that ``tma_eligible(op, arch)`` claims are left in place for the Hopper TMA lowering
(``kernelc/compiler/codegen/tma.py``), which must then handle them from layout assignment on. A
``make_tensor_descriptor`` left without users is removed by the following ``simplify``.

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

from typing import Callable, Optional

from ...errors import CompilationError
from ...language.blocks import generic_descriptor_load, generic_descriptor_store
from ...language.core import builder_scope, tensor
from ..frontend.ir_builder import IRBuilder
from ..ir.core import Block, Function, Op, replace_all_uses

DESCRIPTOR_OPS = ("descriptor_load", "descriptor_store")


def tma_eligible(op: Op, arch: Optional[str], fn: Optional[Function] = None, axis=None) -> bool:
    """Whether the Hopper TMA lowering takes this ``descriptor_load``/``descriptor_store`` (the hook
    for ``codegen/tma.py``). False keeps the generic masked load/store, which is correct everywhere.

    What the TMA lowering can see: ``arch`` ("sm_90a" needs the ``a`` for the async proxy
    instructions), ``op.attrs["block_shape"]``, the descriptor's type ``op.operands[0].type``
    (element type, padding) and its maker ``op.operands[0].op`` -- a ``make_tensor_descriptor`` whose
    ``host_arg`` attribute names the host TensorDescriptor parameter (absent for descriptors made in
    the kernel, whose map the kernel builds at its entry). A host descriptor's operands are the
    machine arguments ``<param>.base/.shapeN/.strideN`` (``kernelc/compiler/abi.py``), whose
    ``Argument.divisibility`` tells whether the base and strides are 16-byte aligned as TMA requires
    (hence ``fn``); a made one's alignment comes from the axis analysis ``axis`` (computed if None).
    """
    from ..codegen.descriptors import tma_eligible as tma_takes
    return tma_takes(op, arch, fn, axis)


def lower_descriptors(fn: Function, arch: Optional[str] = None,
                      claim: Optional[Callable[[Op, Optional[str]], bool]] = None) -> Function:
    """Rewrite every descriptor load/store that ``claim`` (default: ``tma_eligible``) does not take
    into masked load/store.

    Mutates and returns ``fn``; run ``simplify`` afterwards (it removes unused descriptors).
    """
    if claim is None:
        axis = []  # computed once, on the first descriptor made in the kernel (its alignment proof)

        def claim(op, a):
            if not axis and op.operands[0].op is not None and not op.operands[0].op.attrs.get("host_arg"):
                from .axis_info import analyze
                axis.append(analyze(fn))
            return tma_eligible(op, a, fn, axis[0] if axis else None)
    _lower_block(fn, fn.body, arch, claim)
    return fn


def _lower_block(fn: Function, block: Block, arch, claim) -> None:
    for op in list(block.ops):
        for region in op.regions:
            _lower_block(fn, region, arch, claim)
        if op.name in DESCRIPTOR_OPS and not claim(op, arch):
            _rewrite(fn, block, op)


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
