"""``KERNELC_PREFETCH_DOT_LOOPS`` (passes/pipeline_loads.py, passes/load_layouts.py): register prefetch in a loop
that the kernel's ``num_stages`` pipelines (a dot, no ``num_stages`` of its own) of a 1-D row that reaches the
dots only through arithmetic -- tutorial 06's log-sum-exp row in its dK/dV loop (docs/triton-tutorials.md, "06
backward at d64", "dot-loop prefetch rule") -- loaded straight into the layout its reader converts it to, before the
loop and in the body alike. Golden IR before -> after under ``on``, ``off`` and the default ``auto`` (the rule: the
loop's register estimate, the warps an SM holds, the spill margin), and the loop's SASS."""
import pytest

import kernelc
import kernelc.language as kl
from kernelc.compiler.compiler import compile as kcompile
from tests.compiler.filecheck import filecheck
from tests.compiler.test_ring_views import _count, _loop_sass
from tests.compiler.test_schedule_passes import _passes


@kernelc.jit
def lse_loop(Q, K, LSE, Out, stride, steps, BM: kl.constexpr, BN: kl.constexpr, D: kl.constexpr):
    keys = kl.arange(0, BN)
    cols = kl.arange(0, D)
    k = kl.load(K + keys[:, None] * D + cols[None, :])
    acc = kl.zeros([BN, D], dtype=kl.float32)
    q_at = Q + kl.arange(0, BM)[:, None] * stride + cols[None, :]
    m = 0
    for _ in range(steps):
        q = kl.load(q_at)
        lse = kl.load(LSE + m + kl.arange(0, BM))
        p_t = kl.math.exp2(kl.dot(k, kl.trans(q)) - lse[None, :])
        acc += kl.dot(p_t.to(kl.float16), q)
        m += BM
        q_at += BM * stride
    kl.store(Out + keys[:, None] * D + cols[None, :], acc)


SIG = {"Q": "*fp16", "K": "*fp16", "LSE": "*fp32", "Out": "*fp32", "stride": "i32", "steps": "i32"}
CX = dict(BM=32, BN=128, D=64)
DIV = {"stride": 16}


def test_the_row_is_prefetched_one_iteration_ahead_in_its_use_layout(monkeypatch):
    monkeypatch.setenv("KERNELC_PREFETCH_DOT_LOOPS", "on")
    ir, _, ctx = _passes(lse_loop, SIG, CX, num_stages=4, div=DIV, upto="loads_in_use_layout")
    filecheck(ir["upcast_fp8_dots"], """
        CHECK: = scf.for
        CHECK: [[L:%\\d+]] = load {{%\\d+}} : <32xfp32>
        CHECK: = dot
    """)
    filecheck(ir["pipeline_loads"], """
        CHECK: [[L0:%\\d+]] = load {{%\\d+}}, {{%\\d+}} : <32xfp32>
        CHECK: = scf.for {{.*}}, [[L0]] {prefetched=1} : <128x64xfp32>, {{.*}}<32xfp32>
        CHECK-NEXT: ^body({{.*}}, [[CUR:%\\d+]]: <32xfp32>):
        CHECK: [[N:%\\d+]] = load {{%\\d+}}, {{%\\d+}} : <32xfp32>
        CHECK: = expand_dims [[CUR]] {axis=0} : <1x32xfp32>
        CHECK: scf.yield {{.*}}, [[N]]
    """)
    assert any("load prefetched one iteration ahead (num_stages=4)" in n for n in ctx.notes)
    # both loads take the layout the row is read in; the conversion in the body is gone
    filecheck(ir["loads_in_use_layout"], """
        CHECK: = load {{%\\d+}}, {{%\\d+}} {layout=#slice<{{.*}}>} : <32xfp32>
        CHECK: = scf.for
        CHECK: = load {{%\\d+}}, {{%\\d+}} {layout=#slice<{{.*}}>} : <32xfp32>
        CHECK-NOT: convert_layout
        CHECK: scf.yield
    """)
    assert "convert_layout" in ir["hoist_conversions"].split("scf.for", 1)[1].split("scf.yield")[0]


def test_off_leaves_the_loop_alone(monkeypatch):
    monkeypatch.setenv("KERNELC_PREFETCH_DOT_LOOPS", "off")
    ir, _, _ = _passes(lse_loop, SIG, CX, num_stages=4, div=DIV, upto="pipeline_loads")
    assert ir["pipeline_loads"] == ir["upcast_fp8_dots"]


def test_auto_prefetches_where_the_sm_holds_8_warps_and_nothing_spills(monkeypatch):
    """D=128: a thread holds about 16 (BASE_REGS) + 128 (the [128, 128] fp32 accumulator over 128 threads) + 32 (the
    [128, 32] logits) + 8 (the row, a quarter of its 32 values) = 184 registers: 2 programs of 4 warps an SM, where
    no register count a thread may have costs a program; 184 + 8 stays under 255 - 8. The loop says why."""
    monkeypatch.delenv("KERNELC_PREFETCH_DOT_LOOPS", raising=False)  # auto, the default
    ir, _, ctx = _passes(lse_loop, SIG, dict(CX, D=128), num_stages=4, div=DIV, upto="pipeline_loads")
    filecheck(ir["pipeline_loads"], """
        CHECK: [[L0:%\\d+]] = load {{%\\d+}}, {{%\\d+}} : <32xfp32>
        CHECK: = scf.for {{.*}}, [[L0]] {prefetched=1, prefetch_rule={regs=184, rows=8, warps=8}}
        CHECK: = load {{%\\d+}}, {{%\\d+}} : <32xfp32>
        CHECK: scf.yield
    """)
    assert any("dot loop: about 184 registers a thread (estimate; the kernel: 184, 8 warps an SM)" in n
               for n in ctx.notes)


def test_auto_leaves_a_loop_whose_sm_holds_16_warps(monkeypatch):
    """D=64: about 16 + 64 + 32 + 8 = 120 registers, 4 programs of 4 warps an SM: the prefetch's registers may cost a
    program (the example backward's D=64 dK/dV loop: 126 -> 152 registers, 4 -> 3 programs) and the other
    programs' warps cover the row's load. The IR stays as it was."""
    monkeypatch.setenv("KERNELC_PREFETCH_DOT_LOOPS", "auto")
    ir, _, ctx = _passes(lse_loop, SIG, CX, num_stages=4, div=DIV, upto="pipeline_loads")
    assert ir["pipeline_loads"] == ir["upcast_fp8_dots"]
    assert any("load not prefetched (KERNELC_PREFETCH_DOT_LOOPS=auto): 16 warps an SM at about 120 registers" in n
               for n in ctx.notes)


def test_the_rule_on_the_kernels_it_was_checked_against():
    """dot_loop_prefetch_pays with the estimates of the kernels of docs/triton-tutorials.md ("dot-loop prefetch
    rule"): (kernel's estimate, loop's estimate, the rows' registers, num_warps)."""
    from kernelc.compiler.passes.pipeline_loads import FREE_WARPS, dot_loop_prefetch_pays as pays
    assert FREE_WARPS == 8
    assert pays(216, 216, 16, 4) is None  # tutorial 06's d64 backward, its unmasked dK/dV loop (H200: 4% faster)
    assert pays(216, 180, 8, 4) is None  # its masked loop
    assert "16 warps an SM" in pays(128, 128, 8, 4)  # the example's D=64 dK/dV kernel
    assert "12 warps an SM" in pays(160, 128, 8, 4)  # the example's D=64 fused kernel (its dQ loop decides)
    assert "would spill" in pays(240, 240, 16, 8)  # the example's D=128 dK/dV kernel, 8 warps, one program
    assert "would spill" in pays(344, 344, 8, 4)  # tutorial 06's d128 backward (spills already)
    assert pays(232, 232, 15, 4) is None and "would spill" in pays(232, 232, 16, 4)  # the margin: 255 - 8
    assert "would spill (at most 168)" in pays(216, 150, 16, 4, cap=168)  # a launch's maxnreg lowers the line


def test_a_launch_maxnreg_lowers_the_line(monkeypatch):
    """The D=128 loop of the golden test above (about 184 + 8) under maxnreg=184: not prefetched."""
    monkeypatch.setenv("KERNELC_PREFETCH_DOT_LOOPS", "auto")
    from kernelc.compiler.passes.pipeline_loads import pipeline_loads
    ir, fn, ctx = _passes(lse_loop, SIG, dict(CX, D=128), num_stages=4, div=DIV, upto="upcast_fp8_dots")
    notes = []
    pipeline_loads(fn, 4, notes, kernel_stages=4, maxnreg=184)
    assert not any(op.attrs.get("prefetched") for op in fn.walk())
    assert any("about 184 + 8 registers a thread would spill (at most 184)" in n for n in notes)


@pytest.mark.parametrize("knob", ["off", "on"])
def test_the_prefetch_adds_no_barrier_to_the_loop(monkeypatch, knob):
    """The loop keeps one barrier an iteration (its TMA ring's) and no shared-memory round trip with the
    prefetch: the row's loads are the next iteration's, in the layout the dot's result is read in."""
    monkeypatch.setenv("KERNELC_PREFETCH_DOT_LOOPS", knob)
    ck = kcompile(lse_loop, SIG, CX, "sm_90a", 4, 4, divisibility=DIV)
    loops = _loop_sass(ck.asm["sass"])
    assert len(loops) == 1
    lp = loops[0]
    assert _count(lp, "LDG") > 0 and _count(lp, "UTMALDG") >= 1
    assert _count(lp, "STS") == 0 and _count(lp, "LDS") == 0 and _count(lp, "BAR.SYNC") == 1
    assert ("load prefetched one iteration ahead" in "\n".join(ck.compile_log)) == (knob == "on")
