"""Mark the float multiplies, adds and subtracts that may contract into fma: ``attrs["contract"] = True``;
and (``mark_exp2_ftz``) the ``exp2`` ops whose subnormal results may flush to zero: ``attrs["ftz"] = True``;
and (``mark_log_approx``) the fp32 ``log`` ops computed as ``lg2.approx * ln 2``: ``attrs["approx"] = True``.

Triton compiles with ``enable_fp_fusion=True`` by default: LLVM may fuse ``a * b + c`` into one
``fma.rn`` (rounded once, not twice) and leaves the rest as ``mul.f32``/``add.f32``, which ptxas
may fuse too. Without the mark codegen emits ``mul.rn``/``add.rn``, which neither LLVM nor ptxas
fuses, so every product is rounded before it is added (the CPU interpreter's semantics).
Codegen (``codegen/elementwise.py``) lowers a marked op with LLVM's ``contract`` fast-math flag.
Ops inside regions (a reduction's combine, a loop body) are marked as well.
"""
from __future__ import annotations

from ..ir.core import Function

#: exp and log lower (fp32) to a multiply by log2(e) / ln(2) around ex2/lg2, which may contract as well;
#: fneg, because LLVM folds it into a multiply with the flags the two share
CONTRACTABLE = ("fadd", "fsub", "fmul", "fneg", "exp", "log")


def mark_fp_contraction(fn: Function, enabled: bool = True) -> Function:
    """Set (``enabled``) or clear ``contract`` on every op of :data:`CONTRACTABLE`. Mutates ``fn``."""
    for op in fn.walk():
        if op.name in CONTRACTABLE:
            if enabled:
                op.attrs["contract"] = True
            else:
                op.attrs.pop("contract", None)
    return fn


def mark_exp2_ftz(fn: Function, enabled: bool = True) -> Function:
    """Set (``enabled``, KERNELC_EXP2_FTZ) or clear ``ftz`` on every ``exp2``. Triton's ``tl.math.exp2``
    is ``ex2.approx.ftz.f32``: without .ftz, sm_90's ex2 keeps subnormal results (2^x for x < -126) and
    ptxas wraps every MUFU.EX2 in a range test and two scaling multiplies -- 3 of the ~8 instructions per
    score in attention's softmax (docs/attention.md). ``exp`` keeps them, as Triton's does."""
    for op in fn.walk():
        if op.name == "exp2":
            if enabled:
                op.attrs["ftz"] = True
            else:
                op.attrs.pop("ftz", None)
    return fn


def mark_log_approx(fn: Function, approx: bool = True) -> Function:
    """Set (``approx``, KERNELC_LOG_F32=approx, the default) or clear ``approx`` on every fp32 ``log``. Marked,
    codegen computes ``lg2.approx.f32`` times ln 2 (two instructions, about 2^-22 absolute error); unmarked, it
    calls libdevice's ``__nv_logf`` as Triton does for ``tl.log`` (a polynomial, about 1 ulp). On an H200
    (docs/performance.md, session 19) Triton's log made log_softmax fwd's PTX 0.3% faster through ptxas 12.8, but
    in kernelc's own build (nvJitLink, with the broadcast reduction step) cross_entropy ran 0.2% and log_softmax
    fwd 0.06% slower with it. Mutates ``fn``."""
    from ...language.dtypes import scalar_of
    for op in fn.walk():
        if op.name == "log":
            if approx and str(scalar_of(op.results[0].type)) == "fp32":
                op.attrs["approx"] = True
            else:
                op.attrs.pop("approx", None)
    return fn


#: ops whose NaN results are the hardware's canonical NaN (positive): ``exp2`` is ``ex2.approx`` and ``exp``
#: a multiply feeding it
POSITIVE_NAN_OPS = ("exp2", "exp")


def mark_positive_nan_casts(fn: Function) -> Function:
    """Set ``nan_positive`` on every float -> fp8 ``cast`` whose operand is computed by an op of
    :data:`POSITIVE_NAN_OPS`. fp8 casts are bit-exact with torch, which gives a NaN the input's sign, and
    ``cvt.rn.satfinite`` gives the positive NaN code: codegen ors the values' signs into each cvt pair (a byte
    permute and a logic op, ``codegen/fp8.py: torch_fixup_pair``; before 2026-11-27 a test and select per
    element, a quarter of fp8 attention's key loop, docs/attention.md). An ``ex2.approx`` result is never a
    negative NaN, so for such a cast the fix-up changes nothing and is left out. Mutates ``fn``."""
    from ...language.dtypes import scalar_of
    from ..ir.core import defining_op
    for op in fn.walk():
        if op.name != "cast" or not scalar_of(op.results[0].type).is_fp8():
            continue
        src = op.operands[0]
        d = defining_op(src)
        if d is not None and d.name in POSITIVE_NAN_OPS and not scalar_of(src.type).is_fp8():
            op.attrs["nan_positive"] = True
    return fn
