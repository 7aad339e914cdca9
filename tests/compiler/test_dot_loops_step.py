"""KERNELC_STEP_DOT_LOOPS (passes/register_budget.py: mark_dot_loops_step): a kernel whose dots sit in two or more
loops one after the other asks the assembler for the occupancy step. Golden IR before/after on CPU."""
import kernelc
import kernelc.language as kl
from kernelc.compiler.compiler import to_tile_ir
from kernelc.compiler.ir.printer import print_function
from kernelc.compiler.passes.register_budget import mark_dot_loops_step
from tests.compiler.filecheck import filecheck


@kernelc.jit
def two_loops(a_ptr, b_ptr, c_ptr, n, BM: kl.constexpr, BK: kl.constexpr):
    # two K loops one after the other, as a causal forward's blocks below the diagonal and then the diagonal
    rm = kl.arange(0, BM)
    rk = kl.arange(0, BK)
    acc = kl.zeros((BM, BM), dtype=kl.float32)
    for k in range(0, n, BK):
        a = kl.load(a_ptr + rm[:, None] * n + (k + rk)[None, :])
        b = kl.load(b_ptr + (k + rk)[:, None] * BM + rm[None, :])
        acc = kl.dot(a, b, acc)
    for k in range(n, 2 * n, BK):
        a = kl.load(a_ptr + rm[:, None] * n + (k + rk)[None, :])
        b = kl.load(b_ptr + (k + rk)[:, None] * BM + rm[None, :])
        acc = kl.dot(a, b, acc) * 0.5
    kl.store(c_ptr + rm[:, None] * BM + rm[None, :], acc)


@kernelc.jit
def one_nest(a_ptr, b_ptr, c_ptr, n, BM: kl.constexpr, BK: kl.constexpr):
    # one loop nest holding two dots: one loop for the rule, not two
    rm = kl.arange(0, BM)
    rk = kl.arange(0, BK)
    acc = kl.zeros((BM, BM), dtype=kl.float32)
    for t in range(0, 2):
        for k in range(0, n, BK):
            a = kl.load(a_ptr + rm[:, None] * n + (k + rk)[None, :])
            b = kl.load(b_ptr + (k + rk)[:, None] * BM + rm[None, :])
            acc = kl.dot(a, b, acc)
        acc = kl.dot(acc.to(kl.float16), kl.load(b_ptr + rm[:, None] * BM + rm[None, :]), acc)
    kl.store(c_ptr + rm[:, None] * BM + rm[None, :], acc)


SIG = dict(a_ptr="*fp16", b_ptr="*fp16", c_ptr="*fp32", n="i32")
CX = dict(BM=64, BK=32)


def _fn(kernel):
    fn, _ = to_tile_ir(kernel, SIG, CX, divisibility={k: 16 for k in SIG})
    return fn


def test_golden_two_dot_loops_one_after_the_other_are_marked():
    fn = _fn(two_loops)
    before = print_function(fn)
    filecheck(before, """
        CHECK-NOT: attributes
        CHECK: kernel two_loops(
    """)
    after = print_function(mark_dot_loops_step(fn))
    filecheck(after, """
        CHECK: kernel two_loops({{.*}}) attributes {registers='occupancy_step'} {
        CHECK: scf.for
        CHECK: = dot
        CHECK: scf.for
        CHECK: = dot
    """)
    assert after.split("\n", 1)[1] == before.split("\n", 1)[1]   # the body is unchanged


def test_one_loop_nest_and_the_knob_off_leave_the_kernel_alone():
    fn = _fn(one_nest)
    before = print_function(fn)
    assert before.count("= dot ") == 2
    assert print_function(mark_dot_loops_step(fn)) == before
    fn = _fn(two_loops)
    before = print_function(fn)
    assert print_function(mark_dot_loops_step(fn, enabled=False)) == before


def test_a_fill_mark_stays():
    fn = _fn(two_loops)
    fn.attrs["registers"] = "fill_step"
    mark_dot_loops_step(fn)
    assert fn.attrs["registers"] == "fill_step"


def test_the_pipeline_marks_and_the_knob_unmarks(monkeypatch):
    ck = kernelc.compile(two_loops, SIG, CX, target="sm_90a", divisibility={k: 16 for k in SIG})
    assert "registers='occupancy_step'" in ck.asm["tir"].splitlines()[0]
    monkeypatch.setenv("KERNELC_STEP_DOT_LOOPS", "0")
    ck = kernelc.compile(two_loops, SIG, CX, target="sm_90a", divisibility={k: 16 for k in SIG})
    assert "registers=" not in ck.asm["tir"].splitlines()[0]


def test_the_step_is_refused_where_the_wgmma_waits_differ():
    # backend/ptxas.py keeps a stepped build only where its WARPGROUP.DEPBAR waits are the free build's
    from kernelc.compiler.backend.ptxas import _same_wgmma_waits
    ck = kernelc.compile(two_loops, SIG, CX, target="sm_90a", divisibility={k: 16 for k in SIG})
    cubin = ck.asm["cubin"]
    assert "WARPGROUP.DEPBAR" in ck.asm["sass"]
    assert _same_wgmma_waits(cubin, cubin)
    assert not _same_wgmma_waits(cubin, b"not a cubin")


def test_the_examples_causal_dkdv_kernel_takes_the_step_with_its_waits(monkeypatch):
    # examples/kernels/attention_bwd.py's causal dK/dV kernel at D=64 (a masked loop, then the unmasked one):
    # 137 registers unbounded, 3 programs an SM; stepped: at most 128, 4 programs, no spills, the same wgmma waits
    import re
    from tests.compiler.test_attention_kernels import compile_dkdv
    ck = compile_dkdv(64, True)
    assert "registers='occupancy_step'" in ck.asm["tir"].splitlines()[0]
    assert ck.n_regs <= 128 and ck.n_spills == 0, ck.n_regs
    assert "runs 4 blocks an SM, not 3" in ck.artifacts.ptxas_log
    waits = re.findall(r"WARPGROUP\.DEPBAR\.LE gsb0, 0x[0-9a-f]", ck.asm["sass"])
    monkeypatch.setenv("KERNELC_STEP_DOT_LOOPS", "0")
    free = compile_dkdv(64, True)
    assert free.n_regs > 128 and "kernelc:" not in free.artifacts.ptxas_log
    assert waits and waits == re.findall(r"WARPGROUP\.DEPBAR\.LE gsb0, 0x[0-9a-f]", free.asm["sass"])
