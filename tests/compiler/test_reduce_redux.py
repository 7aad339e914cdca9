"""``mark_reduce_redux`` (passes/reduce_xwarp.py, KERNELC_REDUCE_REDUX / KERNELC_REDUCE_W0): max/min reductions of
one 32-bit value marked ``redux`` (golden IR), lowered as ``redux.sync`` on an order-preserving key (PTX); ``w0``
on broadcast reductions: the combine behind a branch on warp 0."""
import re

from kernelc.compiler import compiler as C
from kernelc.compiler.compiler import _base_function
from kernelc.compiler.frontend import generate_ir
from kernelc.compiler.ir.printer import print_function
from kernelc.compiler.pass_manager import PassContext, run_passes
from tests.compiler.filecheck import filecheck
from tests.compiler.test_reduce_xwarp import SIG, row_stats_kernel


def _ir_around(monkeypatch, redux, w0):
    monkeypatch.setenv("KERNELC_REDUCE_XWARP", "broadcast")
    monkeypatch.setenv("KERNELC_REDUCE_REDUX", redux)
    monkeypatch.setenv("KERNELC_REDUCE_W0", w0)
    names = [p.name for p in C.TILE_PASSES]
    i = names.index("mark_reduce_redux")
    fn, _ = generate_ir(_base_function(row_stats_kernel), SIG, dict(BLOCK=256), {}, ())
    run_passes(fn, C.TILE_PASSES[:i], PassContext("sm_90a", (9, 0), 4))
    before = print_function(fn, show_loc=False)
    run_passes(fn, C.TILE_PASSES[i:i + 1], PassContext("sm_90a", (9, 0), 4))
    return before, print_function(fn, show_loc=False)


def test_max_min_of_32_bit_values_are_marked_redux_golden(monkeypatch):
    before, after = _ir_around(monkeypatch, "1", "1")
    assert "redux" not in before and "w0" not in before
    filecheck(after, """
        CHECK: reduce {{%\\d+}} {axis=0, kind='max', xwarp='broadcast', redux=True, w0=True} : fp32
        CHECK: reduce {{%\\d+}} {axis=0, kind='add', xwarp='broadcast', w0=True} : fp32
        CHECK: reduce {{%\\d+}} {axis=0, kind='add'} : fp16
        CHECK: reduce {{%\\d+}} {axis=0, kind='add', xwarp='broadcast', w0=True} : i32
        CHECK: reduce {{%\\d+}}, {{%\\d+}} {axis=0, kind='argmax'} : fp32, i32
        CHECK: reduce {{%\\d+}} {axis=1, kind='add'} : <256xfp32>
    """)
    assert re.sub(r", (redux|w0)=True", "", after) == before
    _, off = _ir_around(monkeypatch, "0", "0")
    assert off == before


import kernelc  # noqa: E402
import kernelc.language as kl  # noqa: E402


@kernelc.jit
def row_max_kernel(x_ptr, out_ptr, BLOCK: kl.constexpr):
    r = kl.arange(0, BLOCK)
    x = kl.load(x_ptr + r)
    kl.store(out_ptr, kl.max(x, 0) + kl.sum(x, 0))


def _ptx(monkeypatch, xwarp, redux, w0):
    monkeypatch.setenv("KERNELC_REDUCE_XWARP", xwarp)
    monkeypatch.setenv("KERNELC_REDUCE_REDUX", redux)
    monkeypatch.setenv("KERNELC_REDUCE_W0", w0)
    ck = kernelc.compile(row_max_kernel, dict(x_ptr="*fp32", out_ptr="*fp32"), dict(BLOCK=2048), target="sm_90a",
                         num_warps=8, divisibility={"x_ptr": 16, "out_ptr": 16})
    return ck.asm["ptx"]


def test_redux_replaces_the_max_butterflies_not_the_sum_ones(monkeypatch):
    """broadcast: the max's lane butterfly (5 shuffles) and its combine (3) become two redux.sync.max.s32; the
    sum keeps its 5 + 3 shuffles. allreduce: the max's combine over the lanes' partials is one redux as well."""
    for xwarp in ("broadcast", "allreduce"):
        base, red = _ptx(monkeypatch, xwarp, "0", "0"), _ptx(monkeypatch, xwarp, "1", "0")
        assert len(re.findall(r"shfl\.sync", base)) == 16 and "redux.sync" not in base
        assert len(re.findall(r"redux\.sync\.max\.s32", red)) == 2 and len(re.findall(r"shfl\.sync", red)) == 8
        assert len(re.findall(r"setp\.nan\.f32", red)) == 2   # the NaN key, once a redux


def test_w0_branches_the_other_warps_past_the_combine(monkeypatch):
    """Each broadcast combine behind a branch on tid < 32 (warp 0), joined before the barrier after thread 0's
    store; without broadcast (allreduce) nothing to branch around."""
    ptx = _ptx(monkeypatch, "broadcast", "0", "1")
    assert re.findall(r"setp\.(?:gt\.u32\s+%p\d+, %r\d+, 31|lt\.u32\s+%p\d+, %r\d+, 32);", ptx)   # LLVM shares it
    assert len(re.findall(r"@%p\d+ bra", ptx)) == 2
    assert _ptx(monkeypatch, "allreduce", "0", "1") == _ptx(monkeypatch, "allreduce", "0", "0")
