"""``mark_exp_ftz`` (passes/fp_contract.py): an fp32 ``exp`` of the softmax form (``x - max(x)``) marked ``ftz``
under ``KERNELC_EXP_FTZ=softmax`` and lowered as ``ex2.approx.ftz.f32``; other exps keep ``ex2.approx.f32``
(Triton's tl.exp). Golden IR and the PTX."""
import kernelc
import kernelc.language as kl
from kernelc.compiler import compiler as C
from kernelc.compiler.compiler import _base_function
from kernelc.compiler.frontend import generate_ir
from kernelc.compiler.ir.printer import print_function
from kernelc.compiler.pass_manager import PassContext, run_passes
from tests.compiler.filecheck import filecheck


@kernelc.jit
def exps_kernel(x_ptr, y_ptr, z_ptr, w_ptr, t_ptr):
    r = kl.arange(0, 256)
    x = kl.load(x_ptr + r)
    e = kl.exp(x - kl.max(x, 0))                    # softmax form, a 1-D row: the maximum is splat
    kl.store(y_ptr + r, e / kl.sum(e, 0))
    kl.store(z_ptr + r, kl.exp(x))                  # not: unbounded
    kl.store(w_ptr + r, kl.exp(x - kl.sum(x, 0)))   # not: a sum is no maximum
    x2 = kl.load(t_ptr + r[:, None] * 16 + kl.arange(0, 16)[None, :])
    kl.store(t_ptr + r[:, None] * 16 + kl.arange(0, 16)[None, :],
             kl.exp(x2 - kl.max(x2, 1)[:, None]))   # softmax form, rows of a 2-D tile: expanded, broadcast


SIG = dict(x_ptr="*fp32", y_ptr="*fp32", z_ptr="*fp32", w_ptr="*fp32", t_ptr="*fp32")


def _ir_around(monkeypatch, mode):
    monkeypatch.setenv("KERNELC_EXP_FTZ", mode)
    names = [p.name for p in C.TILE_PASSES]
    i = names.index("mark_exp_ftz")
    fn, _ = generate_ir(_base_function(exps_kernel), SIG, {}, {}, ())
    run_passes(fn, C.TILE_PASSES[:i], PassContext("sm_90a", (9, 0), 4))
    before = print_function(fn, show_loc=False)
    run_passes(fn, C.TILE_PASSES[i:i + 1], PassContext("sm_90a", (9, 0), 4))
    return before, print_function(fn, show_loc=False)


def test_softmax_form_exp_is_marked_ftz_golden(monkeypatch):
    before, after = _ir_around(monkeypatch, "softmax")
    assert "ftz" not in before
    filecheck(after, """
        CHECK: = exp {{%\\d+}} {contract=True, ftz=True} : <256xfp32>
        CHECK: = exp {{%\\d+}} {contract=True} : <256xfp32>
        CHECK: = exp {{%\\d+}} {contract=True} : <256xfp32>
        CHECK: = exp {{%\\d+}} {contract=True, ftz=True} : <256x16xfp32>
    """)
    assert after.replace(", ftz=True", "") == before


def test_off_leaves_the_ir(monkeypatch):
    before, after = _ir_around(monkeypatch, "off")
    assert before == after and "ftz" not in after


@kernelc.jit
def softmax_kernel(x_ptr, y_ptr):
    r = kl.arange(0, 256)
    x = kl.load(x_ptr + r)
    e = kl.exp(x - kl.max(x, 0))
    kl.store(y_ptr + r, e / kl.sum(e, 0))


def test_the_ptx(monkeypatch):
    for mode, want in (("softmax", "ex2.approx.ftz.f32"), ("off", "ex2.approx.f32")):
        monkeypatch.setenv("KERNELC_EXP_FTZ", mode)
        ptx = kernelc.compile(softmax_kernel, dict(x_ptr="*fp32", y_ptr="*fp32"), {}, target="sm_90a", num_warps=4,
                              divisibility={"x_ptr": 16, "y_ptr": 16}).asm["ptx"]
        ex2 = [ln.split()[0] for ln in ptx.splitlines() if "ex2." in ln]
        assert ex2 and set(ex2) == {want}, (mode, ex2)
