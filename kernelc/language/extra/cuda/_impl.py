"""The definitions behind ``kl.extra.cuda`` and its submodules ``gdc`` / ``utils`` (Triton's paths)."""
from __future__ import annotations

import time

from ... import dtypes as T
from ... import semantic
from ...core import _unwrap, constexpr, current_builder

def _interpreting() -> bool:
    return getattr(current_builder(), "is_interpreter", False)


def _special(reg, dt, interp_value):
    if _interpreting():
        return semantic.to_tensor(interp_value).to(dt)
    ptx_ty = "u64" if dt == T.uint64 or dt == T.int64 else "u32"
    cons = "=l" if ptx_ty == "u64" else "=r"
    return semantic.inline_asm(f"mov.{ptx_ty} $0, {reg};", cons, [], dt, False, 1)


def globaltimer():
    """The GPU's global nanosecond timer (int64)."""
    return _special("%globaltimer", T.int64, time.time_ns())


def smid():
    """The id of the SM running this program (int32)."""
    return _special("%smid", T.int32, 0)


def _launch_warps():
    return getattr(current_builder(), "num_warps", None)


def num_threads():
    """Threads per program, ``32 * num_warps`` (a constexpr, as in Triton)."""
    n = _launch_warps()
    if n is None:  # IR built without a launch configuration (tools): read it at run time
        return _special("%ntid.x", T.int32, 0)
    return constexpr(32 * int(n))


def num_warps():
    """Warps per program (a constexpr, as in Triton)."""
    n = _launch_warps()
    if n is None:
        return semantic.shr(num_threads(), 5)
    return constexpr(int(n))


def _gdc(ptx):
    if _interpreting():
        return None
    # a dummy result keeps the one-result inline-asm op; the statement has effects, so it stays
    semantic.inline_asm(f"{ptx}\n\tmov.u32 $0, 0;", "=r", [], T.int32, False, 1)
    return None


def gdc_wait():
    """Wait until the grids this launch depends on have finished (programmatic dependent launch, sm_90)."""
    return _gdc("griddepcontrol.wait;")


def gdc_launch_dependents():
    """Let dependent grids start launching (programmatic dependent launch, sm_90)."""
    return _gdc("griddepcontrol.launch_dependents;")


def _unsupported(name):
    def fn(*args, **kwargs):
        raise TypeError(f"tl.extra.cuda.{name} is not supported by kernelc: its custom fp8 formats (fp8e4b15) "
                        f"are not kernelc dtypes; use kl.float8e4nv / kl.float8e5 and .to()")
    fn.__name__ = name
    return fn


convert_custom_float8_sm70 = _unsupported("convert_custom_float8_sm70")
convert_custom_float8_sm80 = _unsupported("convert_custom_float8_sm80")
del _unwrap
