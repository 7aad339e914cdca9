"""``mark_log_approx`` (passes/fp_contract.py): fp32 ``log`` marked ``approx`` (``lg2.approx`` times ln 2;
``KERNELC_LOG_F32=approx``, the default) or left for libdevice's ``__nv_logf`` (Triton's ``tl.log``;
``KERNELC_LOG_F32=libdevice``): golden IR and the PTX."""
import re

import kernelc
import kernelc.language as kl
from kernelc.compiler import compiler as C
from kernelc.compiler.compiler import _base_function
from kernelc.compiler.frontend import generate_ir
from kernelc.compiler.ir.printer import print_function
from kernelc.compiler.pass_manager import PassContext, run_passes
from tests.compiler.filecheck import filecheck


@kernelc.jit
def logs_kernel(x_ptr, d_ptr, y_ptr, e_ptr):
    r = kl.arange(0, 128)
    kl.store(y_ptr + r, kl.log(kl.load(x_ptr + r)))
    kl.store(e_ptr + r, kl.log(kl.load(d_ptr + r)))


SIG = dict(x_ptr="*fp32", d_ptr="*fp64", y_ptr="*fp32", e_ptr="*fp64")


def _ir_around(monkeypatch, mode):
    monkeypatch.setenv("KERNELC_LOG_F32", mode)
    names = [p.name for p in C.TILE_PASSES]
    i = names.index("mark_log_approx")
    fn, _ = generate_ir(_base_function(logs_kernel), SIG, {}, {}, ())
    run_passes(fn, C.TILE_PASSES[:i], PassContext("sm_90a", (9, 0), 4))
    before = print_function(fn, show_loc=False)
    run_passes(fn, C.TILE_PASSES[i:i + 1], PassContext("sm_90a", (9, 0), 4))
    return before, print_function(fn, show_loc=False)


def test_approx_marks_the_fp32_log_only_golden(monkeypatch):
    before, after = _ir_around(monkeypatch, "approx")
    assert "approx" not in before
    filecheck(after, """
        CHECK: = log {{%\\d+}} {contract=True, approx=True} : <128xfp32>
        CHECK: = log {{%\\d+}} {contract=True} : <128xfp64>
    """)
    assert after.replace(", approx=True", "") == before


def test_libdevice_leaves_the_ir(monkeypatch):
    before, after = _ir_around(monkeypatch, "libdevice")
    assert before == after and "approx" not in after


@kernelc.jit
def log_kernel(x_ptr, y_ptr):
    r = kl.arange(0, 128)
    kl.store(y_ptr + r, kl.log(kl.load(x_ptr + r)))


def _ptx(monkeypatch, mode):
    monkeypatch.setenv("KERNELC_LOG_F32", mode)
    return kernelc.compile(log_kernel, dict(x_ptr="*fp32", y_ptr="*fp32"), {}, target="sm_90a", num_warps=4,
                           divisibility={"x_ptr": 16, "y_ptr": 16}).asm["ptx"]


def test_libdevice_log_is_a_polynomial_and_approx_is_lg2(monkeypatch):
    ptx = _ptx(monkeypatch, "libdevice")
    assert "lg2.approx" not in ptx and "call" not in ptx   # __nv_logf inlined
    assert len(re.findall(r"fma\.rn\.f32", ptx)) >= 8      # its polynomial
    ptx = _ptx(monkeypatch, "approx")
    assert len(re.findall(r"lg2\.approx\.f32", ptx)) == 1 and "0f3F317218" in ptx   # lg2, times ln 2
