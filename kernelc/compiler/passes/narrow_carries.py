"""Carry a loop value in the type it is read in: a carried tile that every reader converts with the same
``cast`` (in the body and after the loop) is carried converted instead.

FlashAttention-3's order carries the softmax's P to the next iteration, where ``P.to(fp16)`` feeds the
``P V`` dot. Carried in fp32 it holds twice the registers across the back edge, and ptxas must keep the
new fp32 P in the registers the conversion (and so the in-flight wgmma's A operand) is made from: on
sm_90a, with setmaxnreg's 232 registers, attention's loop in that order spilled 112 bytes; carried in
fp16 it does not spill (docs/attention.md). The conversion moves to the end of the body (and before the
loop for the initial value); each element is rounded once either way, so the values are the same.

Example (tile IR, names shortened)::

    %acc, %p = scf.for %lb, %ub, %step, %acc0, %p0 {
      ^body(%i, %acc_in, %p_in):
        %p16 = cast %p_in {rounding='rtne'} : <128x128xfp16>
        %acc_next = dot %p16, %v, %acc_in
        %p_next = exp2 %s
        scf.yield %acc_next, %p_next
    }
    %p16_out = cast %p {rounding='rtne'} : <128x128xfp16>
  ->
    %p0_16 = cast %p0 {rounding='rtne'} : <128x128xfp16>
    %acc, %p = scf.for %lb, %ub, %step, %acc0, %p0_16 {
      ^body(%i, %acc_in, %p_in: fp16):
        %acc_next = dot %p_in, %v, %acc_in
        %p_next = exp2 %s
        %p_next16 = cast %p_next {rounding='rtne'} : <128x128xfp16>
        scf.yield %acc_next, %p_next16
    }
    (%p16_out's readers read %p)
"""
from __future__ import annotations

from typing import Dict, List, Optional

from ...language.dtypes import scalar_of, shape_of
from ..ir.core import Block, Function, Op, Value, defining_op, users


def narrow_loop_carries(fn: Function) -> Function:
    """Narrow every carried tile of every ``scf.for`` that is only ever read through one ``cast`` to a
    narrower float type. Mutates ``fn``."""
    for op in [o for o in fn.walk() if o.name == "scf.for"]:
        for j in range(len(op.results)):
            use = users(fn.body)
            casts = _narrowing_casts(op, j, use)
            if casts is not None:
                _narrow(op, j, casts)
    return fn


def _same_cast(a: Op, b: Op) -> bool:
    return a.results[0].type == b.results[0].type and a.attrs == b.attrs


def _narrowing_casts(loop: Op, j: int, use: Dict[int, List[Op]]) -> Optional[List[Op]]:
    """The casts reading carried value ``j`` (in the body) and the loop's result ``j`` (after it), if
    those are all its readers, all the same conversion, to a narrower float; else None."""
    body = loop.regions[0]
    arg, res = body.args[1 + j], loop.results[j]
    if not shape_of(arg.type) or not scalar_of(arg.type).is_floating():
        return None
    readers = use.get(arg.id, []) + use.get(res.id, [])
    if not use.get(arg.id) or any(r.name != "cast" for r in readers):
        return None
    first = readers[0]
    to = scalar_of(first.results[0].type)
    if not to.is_floating() or to.primitive_bitwidth >= scalar_of(arg.type).primitive_bitwidth:
        return None
    if not all(_same_cast(r, first) for r in readers):
        return None
    return readers


def _narrow(loop: Op, j: int, casts: List[Op]) -> None:
    body = loop.regions[0]
    arg, res = body.args[1 + j], loop.results[j]
    proto = casts[0]
    ty = proto.results[0].type
    yld = body.ops[-1]
    y = yld.operands[j]

    def cast_before(block: Block, at: Op, v: Value) -> Value:
        c = Op("cast", [v], [ty], dict(proto.attrs), loc=proto.loc)
        c.block = block
        block.ops.insert(block.ops.index(at), c)
        return c.results[0]

    init = loop.operands[3 + j]
    loop.operands[3 + j] = cast_before(loop.block, loop, init)
    if y is not arg:
        yld.operands[j] = cast_before(body, yld, y)
    arg.type = ty
    res.type = ty
    root = _function_block(loop)
    for c in casts:
        c.block.ops.remove(c)
        src = arg if c.operands[0] is arg else res
        out = c.results[0]
        for top in _all_ops(root):
            top.operands = [src if o is out else o for o in top.operands]


def _function_block(op: Op) -> Block:
    b = op.block
    while b.parent is not None:
        b = b.parent.block
    return b


def _all_ops(block: Block):
    for op in block.ops:
        yield from op.walk()


def _is_fp8(ty) -> bool:
    return bool(shape_of(ty)) and scalar_of(ty).is_floating() and scalar_of(ty).primitive_bitwidth == 8


def mark_fp8_carry_words(fn: Function, enabled: bool = True) -> Function:
    """Set (``enabled``, KERNELC_FP8_CARRY_WORDS) ``carry_words='a8'`` on every ``scf.for`` that carries an 8-bit
    float tile (FA3-order fp8 attention's P, narrowed above), and ``a_words='a8'`` on the dots that read such a
    carried tile (in the body or after the loop) as their A operand: codegen (``codegen/control.py:
    _word_order``) then groups the tile's bytes into the words the fp8 wgmma A-fragment shuffle reads
    (``codegen/fp8_words.py: a8_fragment_order``) when it is in an MMA accumulator layout, and the dot builds those
    words from bytes, which fold into the phis -- where register order cost a byte permute per word in the
    next trip (16 a key block). A dot whose A operand is an fp8 cast's result (tutorial 06's ``p.to(fp8)``, not
    carried) gets ``a_words='a8'`` as well: its bytes come from cvt pairs, which the words take whole, so the
    shuffle needs one byte permute per A register instead of three; and the cast ``words='a8'``: where its
    lowering joins branches (``codegen/fp8.py: cast_many_bounded``) it joins these words. Cleared when not
    ``enabled``. Mutates ``fn``."""
    use = users(fn.body)
    for op in fn.walk():
        op.attrs.pop({"dot": "a_words", "scf.for": "carry_words", "cast": "words"}.get(op.name, ""), None)
    for op in fn.walk():
        a = op.operands[0] if op.name == "dot" and enabled else None
        d = defining_op(a) if a is not None else None
        if d is not None and d.name == "cast" and _is_fp8(a.type) and not _is_fp8(d.operands[0].type):
            op.attrs["a_words"] = "a8"
            d.attrs["words"] = "a8"
    for op in list(fn.walk()):
        if op.name != "scf.for":
            continue
        eight = [j for j, a in enumerate(op.regions[0].args[1:]) if _is_fp8(a.type)]
        if not enabled or not eight:
            continue
        op.attrs["carry_words"] = "a8"
        for j in eight:  # the dots that read the carried tile as their A operand take it in those words
            for v in (op.regions[0].args[1 + j], op.results[j]):
                for r in use.get(v.id, []):
                    if r.name == "dot" and r.operands[0] is v:
                        r.attrs["a_words"] = "a8"
    return fn
