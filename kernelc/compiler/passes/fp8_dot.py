"""fp8 dots where the target has no fp8 tensor-core instruction: upcast the operands to fp16.

fp8 (e4m3 / e5m2) operands feed ``mma.sync ... m16n8k32`` from sm_89 on and ``wgmma ... k32`` on sm_90a.
On older targets (sm_80), or when K is not a multiple of those instructions' k (32), the dot's
operands are converted to fp16 first and the dot runs on the fp16 ``mma.sync`` path. The conversion
is exact (every e4m3/e5m2 value is an fp16 value) and fp16 MMAs accumulate in fp32 like the fp8 ones,
so results agree up to accumulation order. Each upcast is noted in the compile log and in the dot's
``reports["dots"]`` entry (``"fp8_upcast"``).

On sm_90 an fp8 dot that does not run on wgmma (fewer than 4 warps, or a shape wgmma does not take) would issue
fp8 ``mma.sync``, which sm_90 has no unit for: ptxas converts the fragments to fp16 and runs each m16n8k32 as two
fp16 HMMAs from zero plus 4 FADDs into the accumulator. Such a dot gets ``fp8_mma="f16"``: codegen converts the
fp8 fragments itself (``cvt.rn.f16x2.e4m3x2/e5m2x2``) and issues fp16 m16n8k16 MMAs that accumulate in place, as
Triton does. The operands stay fp8 in memory and shared memory (unlike an upcast).
"""
from __future__ import annotations

from typing import List, Optional, Tuple

from ...language import dtypes as T
from ...language.dtypes import scalar_of, shape_of, with_scalar
from ..ir.core import Function, Op
from ..target_rules import wgmma_eligible

FP8_MMA_CAPABILITY = (8, 9)  # first architecture with fp8 mma.sync (Ada); Hopper adds fp8 wgmma
FP8_MMA_K = 32  # the k of every fp8 MMA shape (m16n8k32, m64nNk32)


def fp8_upcast_reason(a_ty, b_ty, capability: Tuple[int, int]) -> Optional[str]:
    """Why a dot with fp8 operands must run on fp16 MMAs on this target (None: it need not)."""
    at, bt = scalar_of(a_ty), scalar_of(b_ty)
    if not (at.is_fp8() and bt.is_fp8()):
        return None  # the language already promoted a mixed fp8/other pair
    if tuple(capability) < FP8_MMA_CAPABILITY:
        return f"sm_{capability[0]}{capability[1]} has no fp8 tensor-core instructions (they start at sm_89)"
    k = shape_of(a_ty)[-1]
    if k % FP8_MMA_K:
        return f"K={k} is not a multiple of {FP8_MMA_K}, the k of the fp8 MMA instructions"
    return None


def fp8_mma_via_f16(a_ty, b_ty, c_ty, capability: Tuple[int, int], num_warps: int, arch: str) -> bool:
    """Whether an fp8 dot (one that needs no upcast) runs on mma.sync on sm_90, where fp8 mma.sync is emulated."""
    at, bt = scalar_of(a_ty), scalar_of(b_ty)
    if not (at.is_fp8() and bt.is_fp8()) or tuple(capability)[0] != 9:
        return False
    return not wgmma_eligible(a_ty, b_ty, c_ty, num_warps, arch)


def upcast_fp8_dots(fn: Function, capability: Tuple[int, int], notes: Optional[List[str]] = None,
                    num_warps: Optional[int] = None, arch: str = "") -> Function:
    """Insert fp8 -> fp16 casts in front of every dot the target cannot run on fp8 MMAs (in place); with
    ``num_warps``, mark the sm_90 fp8 dots that run on mma.sync ``fp8_mma="f16"``."""
    for op in [o for o in fn.walk() if o.name == "dot"]:
        a, b = op.operands[0], op.operands[1]
        reason = fp8_upcast_reason(a.type, b.type, capability)
        if reason is None:
            if num_warps is not None and fp8_mma_via_f16(a.type, b.type, op.results[0].type, capability,
                                                         num_warps, arch):
                op.attrs["fp8_mma"] = "f16"
                if notes is not None:
                    notes.append(f"{op.loc.file}:{op.loc.line}: fp8 dot on mma.sync (sm_90 has no fp8 mma.sync): "
                                 "its fragments converted to fp16 in registers, fp16 MMAs accumulating in place")
            continue
        block = op.block
        at, bt = scalar_of(a.type), scalar_of(b.type)
        casts = [Op("cast", [v], [with_scalar(v.type, T.float16)], {"rounding": "rtne"}, loc=op.loc) for v in (a, b)]
        i = block.ops.index(op)
        for c in reversed(casts):
            c.block = block
            block.ops.insert(i, c)
        op.operands[0], op.operands[1] = casts[0].results[0], casts[1].results[0]
        op.attrs["fp8_upcast"] = f"{at} x {bt} -> fp16: {reason}"
        if notes is not None:
            notes.append(f"{op.loc.file}:{op.loc.line}: dot {list(shape_of(a.type))} x {list(shape_of(b.type))}: "
                         f"fp8 operands ({at}, {bt}) upcast to fp16 for the fp16 mma.sync path: {reason}")
    return fn
