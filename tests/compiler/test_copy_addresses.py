"""``mark_copy_mad_wide`` (passes/copy_addresses.py, ``KERNELC_COPY_MAD_WIDE``): a cp.async copy's address that is
a scalar pointer plus a signed 32-bit offset is tagged ``addptr {mad_wide=True}`` and lowered to one
``mad.wide.s32``. Golden IR before -> after, what is left alone, the lowering, the meaning kept (the IR evaluated on
the CPU), and the SASS of a K step of the persistent pointer GEMM in tutorial 09's form: the copy addresses are
``LEA`` / ``LEA.HI.X.SX32`` pairs with the bases in uniform registers, as in Triton's step, where LLVM's form gave
``IMAD.WIDE`` with the bases reloaded by ``LDC.64`` (docs/triton-tutorials.md, "09 persistent pointer GEMM: the copy
addresses as mad.wide")."""
import re

import numpy as np
import pytest

import kernelc
import kernelc.language as kl
from cubintools.paths import step_path
from cubintools.sass import parse_sass
from examples.kernels.matmul import matmul_kernel
from kernelc.compiler.ir import verify
from tests.compiler import ir_eval
from tests.compiler.persistent_kernels import _grouped_tile
from tests.compiler.filecheck import filecheck
from tests.compiler.test_codegen_sass import MM_SIG, UNIT_STRIDES
from tests.compiler.test_flatten_carry import DIV, SIG, UNIT
from tests.compiler.test_store_conversion import DIV as MM_DIV, _cx as _mm_cx, _passes

BEFORE, AFTER = "mark_uniform_warpgroups", "mark_copy_mad_wide"


@pytest.fixture(autouse=True)
def _knobs(monkeypatch):
    monkeypatch.delenv("KERNELC_COPY_MAD_WIDE", raising=False)
    monkeypatch.setenv("KERNELC_AUTO_TMA", "0")       # keep the pointer loads
    monkeypatch.setenv("KERNELC_FLATTEN_LOOPS", "1")


@kernelc.jit
def gemm_offsets_summed(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
                        BM: kl.constexpr, BN: kl.constexpr, BK: kl.constexpr, GROUP: kl.constexpr,
                        PROGRAMS: kl.constexpr, FLAT: kl.constexpr):
    """Persistent C = A @ B in tutorial 09's form: each load's pointer is the argument plus one summed i32 offset
    tile (``a_ptr + (rows * stride_am + ks * stride_ak)``); rows and columns wrapped and hinted, K masked."""
    pid = kl.program_id(0)
    n_m = kl.cdiv(M, BM)
    n_n = kl.cdiv(N, BN)
    per_group = GROUP * n_n
    kk = kl.arange(0, BK)
    done = pid - PROGRAMS
    for t in kl.range(pid, n_m * n_n, PROGRAMS, flatten=FLAT):
        bm, bn = _grouped_tile(t, per_group, n_m, GROUP)
        rows = bm * BM + kl.arange(0, BM)
        cols = bn * BN + kl.arange(0, BN)
        rows = kl.max_contiguous(kl.multiple_of(kl.where(rows < M, rows, 0), BM), BM)
        cols = kl.max_contiguous(kl.multiple_of(kl.where(cols < N, cols, 0), BN), BN)
        acc = kl.zeros((BM, BN), dtype=kl.float32)
        for k in range(kl.cdiv(K, BK)):
            ks = k * BK + kk
            a = kl.load(a_ptr + (rows[:, None] * stride_am + ks[None, :] * stride_ak),
                        mask=kk[None, :] < K - k * BK, other=0.0)
            b = kl.load(b_ptr + (ks[:, None] * stride_bk + cols[None, :] * stride_bn),
                        mask=kk[:, None] < K - k * BK, other=0.0)
            acc = kl.dot(a, b, acc)
        done += PROGRAMS
        cm, cn = _grouped_tile(done, per_group, n_m, GROUP)
        r = cm * BM + kl.arange(0, BM)
        c = cn * BN + kl.arange(0, BN)
        kl.store(c_ptr + (r[:, None] * stride_cm + c[None, :] * stride_cn), acc.to(kl.float16),
                 mask=(r[:, None] < M) & (c[None, :] < N))


def _cx(bm, bn, bk, group=8, programs=132):
    return dict(BM=bm, BN=bn, BK=bk, GROUP=group, PROGRAMS=programs, FLAT=True)


def _ir(bm=128, bn=128, warps=4, stages=3, group=8, programs=132):
    return _passes(gemm_offsets_summed, SIG, _cx(bm, bn, 64, group, programs), warps, stages, DIV, UNIT)


def test_golden_each_copy_address_is_tagged_and_nothing_else_changes():
    """Before: every ``async_copy`` (the ring's fill before the loop, the copies two steps ahead in it) reads an
    ``addptr`` of the splat argument and an i32 offset tile. After: those ``addptr``s carry ``mad_wide=True``; the
    epilogue's store address does not; the rest of the text is the same."""
    ir, fn, _ = _ir()
    filecheck(ir[BEFORE], """
        CHECK: [[PA:%\\d+]] = splat %a_ptr : <128x64x*fp16>
        CHECK: [[A:%\\d+]] = addptr [[PA]], {{%\\d+}} : <128x64x*fp16>
        CHECK: async_copy {{%\\d+}}, {{%\\d+}}, [[A]], {{%\\d+}}, {{%\\d+}} {vec=8
    """)
    assert "mad_wide" not in ir[BEFORE]
    filecheck(ir[AFTER], """
        CHECK: [[PA:%\\d+]] = splat %a_ptr : <128x64x*fp16>
        CHECK: [[A:%\\d+]] = addptr [[PA]], {{%\\d+}} {mad_wide=True} : <128x64x*fp16>
        CHECK: async_copy {{%\\d+}}, {{%\\d+}}, [[A]], {{%\\d+}}, {{%\\d+}} {vec=8
        CHECK: [[PB:%\\d+]] = splat %b_ptr : <64x128x*fp16>
        CHECK: [[B:%\\d+]] = addptr [[PB]], {{%\\d+}} {mad_wide=True} : <64x128x*fp16>
        CHECK: async_copy {{%\\d+}}, {{%\\d+}}, [[B]], {{%\\d+}}, {{%\\d+}} {vec=8
        CHECK: [[PC:%\\d+]] = splat %c_ptr : <128x128x*fp16>
        CHECK: [[C:%\\d+]] = addptr [[PC]], {{%\\d+}} : <128x128x*fp16>
        CHECK: store [[C]],
    """)
    copies = [o for o in fn.walk() if o.name == "async_copy"]
    marked = [o for o in fn.walk() if o.name == "addptr" and o.attrs.get("mad_wide")]
    assert len(copies) == 6                      # A and B: two fills before the loop, one pair in it
    assert sorted(id(c.operands[2].op) for c in copies) == sorted(id(m) for m in marked)
    strip = lambda text: [" ".join(ln.replace(" {mad_wide=True}", "").split()) for ln in text.splitlines()]  # noqa: E731
    assert strip(ir[AFTER]) == strip(ir[BEFORE])
    verify(fn)


def test_the_knob_off_and_loop_carried_pointers_are_left_alone(monkeypatch):
    """Tutorial 03's GEMM advances its pointer tiles every trip (``a_ptrs += BK * stride_ak``): the copies in the loop
    read a carried tile, not a scalar base; the ring's fill before the loop reads the argument plus the first
    offsets, but that address also starts the carried pointers, so it stays LLVM's (as an asm result it made the
    loop's pointer steps 64-bit adds). Nothing is tagged. ``KERNELC_COPY_MAD_WIDE=0``: nothing is tagged."""
    _, fn, _ = _passes(matmul_kernel, MM_SIG, _mm_cx(128, 256, 64), 8, 3, MM_DIV, UNIT_STRIDES)
    loop = next(o for o in fn.walk() if o.name == "scf.for")
    inside = {id(o) for o in loop.walk()}
    copies = [o for o in fn.walk() if o.name == "async_copy"]
    in_loop = [c for c in copies if id(c) in inside]
    assert len(in_loop) == 2 and len(copies) == 6
    assert all(c.operands[2].op is None for c in in_loop)          # the loop's carried pointers, ahead
    assert not any(o.attrs.get("mad_wide") for o in fn.walk())
    monkeypatch.setenv("KERNELC_COPY_MAD_WIDE", "0")
    _, fn, _ = _ir()
    assert not any(o.attrs.get("mad_wide") for o in fn.walk())


@pytest.mark.parametrize("M,N,K", [(300, 260, 200), (130, 390, 64), (200, 130, 0)])
def test_the_tagged_pipeline_computes_the_product(M, N, K):
    """Through every tile pass at 128x128x64, 3 programs: the IR evaluated on the CPU gives A @ B (ragged M, N, K;
    no K step)."""
    _, fn, _ = _ir(group=2, programs=3)
    assert any(o.attrs.get("mad_wide") for o in fn.walk())
    c, want = ir_eval.gemm_product(fn, M, N, K, programs=3, seed=7)
    np.testing.assert_allclose(c, want, rtol=1e-9, atol=1e-9)


def _build(bn, warps, stages):
    return kernelc.compile(gemm_offsets_summed, SIG, _cx(128, bn, 64), target="sm_90a", num_warps=warps,
                           num_stages=stages, divisibility=DIV, equal_to_1=UNIT)


def test_the_lowering_is_one_mad_wide_per_copy_address(monkeypatch):
    """Each tagged address is one ``mad.wide.s32`` of the offset, the element size (2 bytes) and the base, in the
    PTX; the stores' addresses keep LLVM's ``mul.wide.s32`` + ``add.s64``. Off: no ``mad.wide`` at all."""
    ck = _build(128, 4, 3)
    ptx = ck.asm["ptx"]
    mads = re.findall(r"mad\.wide\.s32 \S+, \S+, (\d+), \S+;", ptx)
    copies = ptx.count("cp.async.cg.shared.global")
    assert mads and set(mads) == {"2"} and len(mads) == copies
    monkeypatch.setenv("KERNELC_COPY_MAD_WIDE", "0")
    assert "mad.wide" not in _build(128, 4, 3).asm["ptx"]


def _step(ck):
    text = ck.asm["sass"]
    return [i.opcode for i in step_path(text, parse_sass(text))]


@pytest.mark.parametrize("bn,warps,stages", [(128, 4, 3), (256, 8, 4)])
def test_a_k_step_forms_its_copy_addresses_with_lea_pairs(monkeypatch, bn, warps, stages):
    """The SASS of a K step that ends no tile at the tuners' two configs: one ``LEA`` and one ``LEA.HI.X.SX32`` a copy
    and no ``IMAD.WIDE`` nor ``LDC`` (Triton's step, tutorial 09); off: one ``IMAD.WIDE`` a copy and the bases
    reloaded by ``LDC.64``. No more registers, no spills."""
    ck = _build(bn, warps, stages)
    step = _step(ck)
    n = sum(o.startswith("LDGSTS") for o in step)
    assert n == (128 * 64 + 64 * bn) * 2 // 16 // (32 * warps)
    assert sum(o == "LEA.HI.X.SX32" for o in step) == n
    assert not any(o.startswith(("IMAD.WIDE", "LDC")) for o in step)
    monkeypatch.setenv("KERNELC_COPY_MAD_WIDE", "0")
    off = _build(bn, warps, stages)
    off_step = _step(off)
    assert sum(o.startswith("IMAD.WIDE") for o in off_step) == n
    assert any(o.startswith("LDC") for o in off_step)
    assert ck.n_regs <= off.n_regs and ck.n_spills == 0 == off.n_spills
