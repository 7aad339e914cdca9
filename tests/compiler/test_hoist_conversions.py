"""passes/hoist_conversions.py: a layout conversion of a value computed before a loop runs once, before
the loop, not through shared memory on every trip (issue 27: the attention backward's dQ kernel)."""
import re

import pytest

import kernelc
import kernelc.language as kl
from kernelc.compiler import compiler as C
from kernelc.compiler.compiler import _base_function
from kernelc.compiler.frontend import generate_ir
from kernelc.compiler.ir.printer import print_function
from kernelc.compiler.pass_manager import PassContext, run_passes
from tests.compiler.filecheck import filecheck
from tests.compiler.test_attention_kernels import compile_dq


@kernelc.jit
def rowsub_kernel(a_ptr, b_ptr, r_ptr, c_ptr, n, m, BLOCK: kl.constexpr, VARIANT: kl.constexpr):
    i = kl.arange(0, BLOCK)
    a = kl.load(a_ptr + i[:, None] * BLOCK + i[None, :])
    r = kl.load(r_ptr + i)
    acc = kl.zeros([BLOCK, BLOCK], dtype=kl.float32)
    if VARIANT == "nested":
        for j in range(0, m):
            for k in range(0, n, BLOCK):
                b = kl.load(b_ptr + (j + k) * BLOCK + i[:, None] * BLOCK + i[None, :])
                acc += kl.dot(a, b) - r[:, None]
    else:
        for k in range(0, n, BLOCK):
            b = kl.load(b_ptr + k * BLOCK + i[:, None] * BLOCK + i[None, :])
            if VARIANT == "varying":  # read in the loop: not invariant, the conversion stays
                acc += kl.dot(a, b) - kl.load(r_ptr + k + i)[:, None]
            else:
                acc += kl.dot(a, b) - r[:, None]
    kl.store(c_ptr + i[:, None] * BLOCK + i[None, :], acc)


SIG = dict(a_ptr="*fp16", b_ptr="*fp16", r_ptr="*fp32", c_ptr="*fp32", n="i32", m="i32")


@pytest.fixture(autouse=True)
def _stores_keep_their_layout(monkeypatch):
    """These count the conversions of loop operands; whether a kernel's final store converts (its
    accumulator to 16-byte stores, passes/coalesce.py) is priced by KERNELC_STORE_SMEM_DISCOUNT and tested in
    test_store_conversion.py: priced byte for byte here, so no store converts."""
    monkeypatch.setenv("KERNELC_STORE_SMEM_DISCOUNT", "1")


def _through(variant, last):
    """(IR after coalesce, IR after ``last``, notes) of rowsub_kernel on sm_90a."""
    fn, _ = generate_ir(_base_function(rowsub_kernel), SIG, dict(BLOCK=64, VARIANT=variant), {}, ())
    ctx = PassContext("sm_90a", (9, 0), 4)
    names = [p.name for p in C.TILE_PASSES]
    cut = names.index("coalesce") + 1
    run_passes(fn, C.TILE_PASSES[:cut], ctx)
    before = print_function(fn, show_loc=False)
    run_passes(fn, C.TILE_PASSES[cut:names.index(last) + 1], ctx)
    return before, print_function(fn, show_loc=False), ctx.notes


def test_invariant_conversion_moves_before_the_loop_golden():
    before, after, notes = _through("flat", "hoist_conversions")
    filecheck(before, """
        CHECK: [[R:%\\d+]] = load {{%\\d+}} : <64xfp32>
        CHECK: scf.for
        CHECK: dot
        CHECK-NEXT: [[E:%\\d+]] = expand_dims [[R]] {axis=1} : <64x1xfp32>
        CHECK-NEXT: [[C:%\\d+]] = convert_layout [[E]] {{.*}} : <64x1xfp32>
        CHECK-NEXT: broadcast [[C]] : <64x64xfp32>
        CHECK: scf.yield
    """)
    filecheck(after, """
        CHECK: [[R:%\\d+]] = load {{%\\d+}} : <64xfp32>
        CHECK: [[E:%\\d+]] = expand_dims [[R]] {axis=1} : <64x1xfp32>
        CHECK-NEXT: [[C:%\\d+]] = convert_layout [[E]] {{.*}} : <64x1xfp32>
        CHECK-NEXT: scf.for
        CHECK-NOT: convert_layout
        CHECK-NOT: expand_dims
        CHECK: dot
        CHECK-NEXT: broadcast [[C]] : <64x64xfp32>
        CHECK: scf.yield
    """)
    assert len(notes) == 1 and "hoisted out of the loop" in notes[0]


def test_a_conversion_leaves_every_loop_it_is_invariant_in():
    _, after, _ = _through("nested", "hoist_conversions")
    head, loops = after.split("scf.for", 1)
    assert "convert_layout" in head and "convert_layout" not in loops


def test_a_value_the_loop_computes_keeps_its_conversion_in_the_loop():
    before, after, notes = _through("varying", "hoist_conversions")
    # (the row loaded in the loop is a dot-loop prefetch candidate: pipeline_loads says why it left it)
    assert after == before and not [n for n in notes if "KERNELC_PREFETCH_DOT_LOOPS" not in n]
    assert "convert_layout" in after.split("scf.for", 1)[1]


def _loop_bodies(sass):
    """Instruction lines of each loop of tensor-core code: a backward branch whose body has a GMMA."""
    lines = sass.splitlines()
    labels = {m.group(1): i for i, ln in enumerate(lines) if (m := re.match(r"\s*(\.L_x_\d+):", ln))}
    out = []
    for i, ln in enumerate(lines):
        m = re.search(r"\bBRA\b.*?(\.L_x_\d+)", ln)
        if m and labels.get(m.group(1), i) < i:
            body = lines[labels[m.group(1)]:i + 1]
            if any("GMMA" in b for b in body):
                out.append(body)
    return out


def _smem_traffic(body):
    return (sum(bool(re.search(r"\bSTS(\.|\s)", b)) for b in body), sum("BAR.SYNC" in b for b in body))


def _before_first_loop(tir: str) -> str:
    """The kernel's IR up to its first top-level loop (the producer warp's loops of a warp-specialised
    kernel are nested in its ``ws_producer`` region, passes/warp_regions.py)."""
    m = re.search(r"^  (%\S+ = |%\S+(, %\S+)+ = )?scf\.for", tir, re.M)
    return tir[:m.start()] if m else tir


def test_dq_kernel_loops_no_longer_convert_lse_and_delta(monkeypatch):
    """The causal dQ kernel (two key loops, the first warp-specialised): lse[:, None] and delta[:, None]
    were converted to the MMA row layout through shared memory on every key step. (By default they are now
    loaded in that layout and nothing converts: the last check; hoisting is measured with the loads left
    coalesced, KERNELC_USE_LAYOUT_LOADS=loops.)"""
    assert compile_dq(128, True).asm["tir"].count("convert_layout") == 0
    monkeypatch.setenv("KERNELC_USE_LAYOUT_LOADS", "loops")
    after = compile_dq(128, True)
    tir = after.asm["tir"]
    head = _before_first_loop(tir)
    # two conversions, once, before the first loop (the second loop reuses them)
    assert tir.count("convert_layout") == 2 and head.count("convert_layout") == 2
    monkeypatch.setattr(C, "TILE_PASSES", tuple(p for p in C.TILE_PASSES if p.name != "hoist_conversions"))
    before = compile_dq(128, True)
    assert before.asm["tir"].count("convert_layout") == 4 and "convert_layout" not in \
        _before_first_loop(before.asm["tir"])
    # the loop bodies: the key loops (backward branches around the HGMMAs, not the mbarrier spin loops)
    b_loops = [_smem_traffic(b) for b in _loop_bodies(before.asm["sass"])]
    a_loops = [_smem_traffic(b) for b in _loop_bodies(after.asm["sass"])]
    assert len(b_loops) == len(a_loops) >= 2
    for (sts_b, bar_b), (sts_a, bar_a) in zip(b_loops, a_loops):
        # each conversion of a [128, 1] fp32 column: one STS (its owner threads), two barriers
        assert sts_a <= sts_b - 2 and bar_a <= bar_b - 4, (b_loops, a_loops)
    assert after.n_spills == 0
