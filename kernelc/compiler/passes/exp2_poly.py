"""exp2 on two pipes: mark the softmax ``exp2`` ops whose elements may be computed partly by a polynomial on
the FMA pipe instead of ``MUFU.EX2`` (FlashAttention-4's idea): ``attrs["poly"] = {num, den, degree}``.

Hopper's MUFU pipe does 16 exponentials per SM and clock; fp8 attention's key block needs as many MUFU cycles
as tensor-core cycles (docs/attention.md). Where an exponential only feeds an fp8 value (3 mantissa bits) and
an fp32 row sum, an approximation with a relative error far below fp8's rounding step does as well:
``2^x = 2^j * 2^f`` with ``j = round(x)``, ``f = x - j`` in [-1/2, 1/2], ``2^f`` a polynomial of degree 2 or 3
(``codegen/elementwise.py: exp2_poly_f32``), ``2^j`` added to the exponent bits as an integer.

An ``exp2`` is marked when
- it is fp32 with ``ftz=True`` (``mark_exp2_ftz``; the polynomial path gives 0 or less than 2^-126 there too),
- every reader of its result is a cast to an fp8 type or a ``reduce {kind='add'}`` (a loop carry nobody reads
  does not count), and at least one is an fp8 cast,
- its argument is ``s - m`` with ``m`` broadcast from a row maximum (a ``reduce {kind='max'}`` or an ``fmax``):
  the softmax form, whose arguments are <= 0 up to rounding. The polynomial path is exact to its bound only
  for arguments below 127.5 (larger ones overflow the exponent field), which this form keeps.

``num``/``den``: the lowering computes the register ``r`` of a thread's ``den`` consecutive registers on the
FMA pipe when ``floor((r + 1) num / den) > floor(r num / den)`` (evenly spread); the rest stay on MUFU.
``KERNELC_EXP2_POLY`` says the fraction (0: the pass marks nothing), ``KERNELC_EXP2_POLY_DEGREE`` the degree.

``auto`` (the default) gives :data:`AUTO_FRACTION` to an ``exp2`` whose fp8 casts no dot reads directly
(FlashAttention-3's order carries P to the next trip's dot; there 1/8 measured 2.9-4.0% faster, the softmax
running under the previous block's P V) and of which a thread computes at least :data:`AUTO_MIN_PER_THREAD` elements (the tile's elements over
``32 * num_warps``, the warps the tile is laid over). Where a dot reads the fp8 P in the same trip (tutorial 06's
forward, the pointer fp8 forward) it marks nothing: there the polynomial measured slower or equal (H100,
2026-11-28, one process, 4 rounds, tutorial 06 fp8: 128x64 d64 2.1% and 1.5% slower, 128x64 d128 6% slower with
P V left in flight, 64x64 equal; docs/triton-tutorials.md, "06's forward below 0.95").

Example (tile IR)::

    %m = reduce %s {axis=1, kind='max'}
    %d = fsub %s, broadcast(expand_dims(%m))
    %p = exp2 %d {ftz=True}
    %l = reduce %p {axis=1, kind='add'}
    %p8 = cast %p : <128x128xfp8e4nv>
  ->
    %p = exp2 %d {ftz=True, poly={num=1, den=4, degree=3}}
"""
from __future__ import annotations

from typing import Dict, List, Optional, Tuple

from ...language.dtypes import scalar_of, shape_of
from ..ir.core import Function, Op, Value, defining_op, users


def parse_fraction(text: str) -> Tuple[int, int]:
    """``"3/8"`` -> (3, 8); ``"0"`` -> (0, 1); ``"1"`` -> (1, 1)."""
    if "/" in text:
        a, b = text.split("/")
        return int(a), int(b)
    return int(text), 1


#: ``auto``: the fraction, and the fewest elements of the ``exp2`` a thread must compute to get it
AUTO_FRACTION = "1/8"
AUTO_MIN_PER_THREAD = 64


def mark_exp2_poly(fn: Function, fraction: str = "0", degree: int = 3, num_warps: Optional[int] = None) -> Function:
    """Set ``poly`` on every ``exp2`` of the softmax form whose result only feeds fp8 casts and sums (module
    docstring), with ``fraction`` of its elements on the FMA pipe (``"auto"``: :data:`AUTO_FRACTION` where a
    thread of ``num_warps`` warps computes at least :data:`AUTO_MIN_PER_THREAD` of them). Mutates ``fn``."""
    auto = fraction == "auto"
    if auto and not num_warps:
        raise ValueError("mark_exp2_poly: fraction 'auto' needs num_warps")
    num, den = parse_fraction(AUTO_FRACTION if auto else fraction)
    if num == 0:
        return fn
    if degree not in (2, 3) or not 0 < num <= den:
        raise ValueError(f"mark_exp2_poly: bad fraction {fraction!r} or degree {degree!r}")
    use = users(fn.body)
    for op in fn.walk():
        if (op.name == "exp2" and op.attrs.get("ftz") and shape_of(op.results[0].type)
                and scalar_of(op.results[0].type).name == "fp32"
                and (not auto or (per_thread(op.results[0], num_warps) >= AUTO_MIN_PER_THREAD
                                  and not _fp8_read_by_a_dot(op.results[0], use)))
                and _feeds_fp8_and_sums(op.results[0], use) and _below_row_max(op.operands[0])):
            op.attrs["poly"] = {"num": num, "den": den, "degree": degree}
    return fn


def _fp8_read_by_a_dot(v: Value, use: Dict[int, List[Op]]) -> bool:
    """Whether a dot reads one of ``v``'s fp8 casts directly: P rounded and multiplied in the same trip (tutorial
    06's order), not carried to the next trip's dot (FlashAttention-3's order)."""
    return any(_reaches_dot(r.results[0], use) for r in use.get(v.id, []) if r.name == "cast")


def _reaches_dot(v: Value, use: Dict[int, List[Op]]) -> bool:
    """A dot reads ``v`` directly or through reshapes and permutes (which only rename registers: fp8 attention's
    P in the fp8 A fragments' key order, examples/kernels/attention.py)."""
    return any(d.name == "dot" or (d.name in ("reshape", "trans") and _reaches_dot(d.results[0], use))
               for d in use.get(v.id, []))


def per_thread(v: Value, num_warps: int) -> int:
    """How many of the tile ``v``'s elements each of ``num_warps * 32`` threads holds (a tile smaller than the
    threads is replicated: at least 1)."""
    n = 1
    for d in shape_of(v.type):
        n *= d
    return max(1, n // (32 * num_warps))


def _dead_carry(reader: Op, v: Value, use: Dict[int, List[Op]]) -> bool:
    """``v`` enters or leaves an ``scf.for`` as a carried value that neither the body nor the code after the
    loop reads (the frontend carries every variable a loop assigns)."""
    if reader.name == "scf.for":
        idx = [i - 3 for i, o in enumerate(reader.operands) if o is v and i >= 3]
        loop = reader
    elif reader.name == "scf.yield" and reader.block is not None and reader.block.parent is not None \
            and reader.block.parent.name == "scf.for":
        idx = [i for i, o in enumerate(reader.operands) if o is v]
        loop = reader.block.parent
    else:
        return False
    body = loop.regions[0]
    return bool(idx) and all(not use.get(body.args[1 + j].id) and not use.get(loop.results[j].id) for j in idx)


def _feeds_fp8_and_sums(v: Value, use: Dict[int, List[Op]]) -> bool:
    fp8 = False
    for r in use.get(v.id, []):
        if r.name == "cast" and scalar_of(r.results[0].type).is_fp8():
            fp8 = True
        elif r.name == "reduce" and r.attrs.get("kind") == "add":
            continue
        elif not _dead_carry(r, v, use):
            return False
    return fp8


def _below_row_max(x: Value) -> bool:
    d = defining_op(x)
    if d is None or d.name != "fsub":
        return False
    m: Optional[Value] = d.operands[1]
    while m is not None and defining_op(m) is not None and defining_op(m).name in ("broadcast", "expand_dims"):
        m = defining_op(m).operands[0]
    dm = defining_op(m) if m is not None else None
    return dm is not None and ((dm.name == "reduce" and dm.attrs.get("kind") == "max") or dm.name == "fmax")
