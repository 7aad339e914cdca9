"""``claim_bulk_adds``: which ``bulk_add`` (``kl.bulk_add``, language/bulk.py) the copy engine takes.

A ``bulk_add`` whose target is legal for a 1-D bulk reduction is tagged ``tma=True`` and left for
``expand_bulk_reductions`` (passes/bulk_reductions.py), which stages it and issues
``cp.reduce.async.bulk`` from one thread; every other one is rewritten here into the relaxed element
atomics it stands for (``generic_bulk_add``: the same addresses, the staging order)::

    bulk_add %p, %t {kind='add'}    ->    bulk_add %p, %t {kind='add', tma=True}        (legal)
                                    ->    %o = <staging offsets>; %q = addptr %p, %o;
                                          atomic_rmw %q, %t {kind='fadd', sem='relaxed'}  (else)

Legal (``bulk_add_legal``): sm_90a with ``KERNELC_TMA`` on, fp32 (PTX ``.add.f32``), a block of a
multiple of 16 bytes and a pointer the axis analysis proves 16-byte aligned (the copy engine faults on
any other address).
"""
from __future__ import annotations

from typing import Optional

from ...language.bulk import generic_bulk_add
from ...language.core import builder_scope, tensor
from ...language.dtypes import shape_of
from ..frontend.ir_builder import IRBuilder
from ..ir.core import Block, Function, Op
from ..target_rules import arch_has_tma, tma_enabled
from .axis_info import analyze


def bulk_add_legal(op: Op, arch: Optional[str], axis) -> bool:
    p, val = op.operands
    if not (arch and arch_has_tma(arch) and tma_enabled()):
        return False
    if p.type.element_ty.name != "fp32":
        return False
    n = 1
    for s in shape_of(val.type):
        n *= s
    if (n * 4) % 16:
        return False
    return axis.get(p).divisibility[0] % 16 == 0


def _rewrite(block: Block, op: Op) -> None:
    builder = IRBuilder(trace_function=None)
    scratch = builder.push(Block())
    builder.loc = op.loc
    p, val = op.operands
    with builder_scope(builder):
        generic_bulk_add(tensor(p, p.type), tensor(val, val.type), op.attrs["kind"])
    at = block.ops.index(op)
    for k, new in enumerate(scratch.ops):
        new.block = block
        block.ops.insert(at + k, new)
    block.ops.remove(op)


def claim_bulk_adds(fn: Function, arch: Optional[str]) -> Function:
    ops = [op for op in fn.walk() if op.name == "bulk_add" and not op.attrs.get("tma")]
    if not ops:
        return fn
    axis = analyze(fn)
    for op in ops:
        if bulk_add_legal(op, arch, axis):
            op.attrs["tma"] = True
        else:
            _rewrite(op.block, op)
    return fn
