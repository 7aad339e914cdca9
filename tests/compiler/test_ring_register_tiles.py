"""TMA tiles no dot reads ride in a loop's TMA ring (passes/schedule.py ``_register_tiles``; FlashAttention-3's LSE and
dPsum): ``schedule_pipelines`` tags them ``pipeline={ring='tma', registers=True}``, the ring expansions give them a
``tma_ring_alloc {operand='none'}`` and a ``ring_read {registers=True}`` that codegen reads into registers (ld.shared)
after the stage's barrier; ``loads_in_use_layout`` reads a 1-D one back in the layout its broadcast converts it to.
The attention backward's ds dK/dV loop with ROWS_TMA (examples/kernels/attention_bwd.py): no LDG left in its loop."""
import re
import sys
import os

import pytest

import kernelc
import kernelc.language as kl
from kernelc.compiler.ir import verify
from kernelc.compiler.ir.verifier import VerificationError
from tests.compiler.filecheck import filecheck
from tests.compiler.test_pass_goldens import _around

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@kernelc.jit
def scaled_rows(A, B, S, C, K, ROWS: kl.constexpr):
    """C = sum over k of (A_k B_k) * s_k[None, :]: a dot ring (A, B) and a 1-D row the loop reads in registers."""
    a_d = kl.make_tensor_descriptor(A, shape=[64, K], strides=[K, 1], block_shape=[64, 64])
    b_d = kl.make_tensor_descriptor(B, shape=[K, 64], strides=[64, 1], block_shape=[64, 64])
    s_d = kl.make_tensor_descriptor(S, shape=[K], strides=[1], block_shape=[64])
    acc = kl.zeros((64, 64), dtype=kl.float32)
    for k in range(0, K, 64):
        a = a_d.load([0, k])
        b = b_d.load([k, 0])
        p = kl.dot(a, b)
        if ROWS:
            s = s_d.load([k])
            p = p * s[None, :]
        acc += p
    r = kl.arange(0, 64)
    kl.store(C + r[:, None] * 64 + r[None, :], acc)


SIG = dict(A="*fp16", B="*fp16", S="*fp32", C="*fp32", K="i32")
DIV = dict(A=16, B=16, S=16, C=16, K=16)


def test_schedule_pipelines_rings_a_row_no_dot_reads():
    before, after, _, _ = _around(scaled_rows, SIG, dict(ROWS=True), "schedule_pipelines", num_warps=4, div=DIV,
                                  num_stages=3)
    filecheck(before, r"""
        CHECK: scf.for
        CHECK: descriptor_load {{.*}}{block_shape=[64, 64], padding='zero', tma=True}
        CHECK: descriptor_load {{.*}}{block_shape=[64, 64], padding='zero', tma=True}
        CHECK: descriptor_load {{.*}}{block_shape=[64], padding='zero', tma=True, layout=
    """)
    assert "pipeline" not in before
    filecheck(after, r"""
        CHECK: scf.for {{.*}}{pipeline={stages=3, lookahead=2}}
        CHECK: descriptor_load {{.*}}pipeline={ring='tma'}} : <64x64xfp16>
        CHECK: descriptor_load {{.*}}pipeline={ring='tma'}} : <64x64xfp16>
        CHECK: descriptor_load {{.*}}pipeline={ring='tma', registers=True}} : <64xfp32>
    """)


def test_expand_tma_rings_reads_the_row_from_its_stage_into_registers():
    before, after, fn, _ = _around(scaled_rows, SIG, dict(ROWS=True), "expand_tma_rings", num_warps=4, div=DIV,
                                   num_stages=3)
    filecheck(after, r"""
        CHECK: tma_ring_alloc {{.*}}{stages=3, operand='a'} : <64x64xfp16>
        CHECK: tma_ring_alloc {{.*}}{stages=3, operand='b'} : <64x64xfp16>
        CHECK: tma_ring_alloc {{.*}}{stages=3, operand='none'} : <64xfp32>
        CHECK: mbarrier_expect_tx {{.*}}{bytes=16640}
        CHECK: tma_copy_to_ring
        CHECK: tma_copy_to_ring
        CHECK: tma_copy_to_ring
        CHECK: scf.for
        CHECK: mbarrier_wait
        CHECK: ring_read
        CHECK: ring_read
        CHECK: ring_read {{.*}}{registers=True} : <64xfp32>
        CHECK: mbarrier_expect_tx {{.*}}{bytes=16640}
    """)
    loop = next(o for o in fn.walk() if o.name == "scf.for")
    assert not any(o.name == "descriptor_load" for o in loop.regions[0].ops)
    verify(fn)


def test_a_register_read_of_a_dot_ring_or_a_dot_read_of_a_register_ring_is_an_error():
    _, _, fn, _ = _around(scaled_rows, SIG, dict(ROWS=True), "expand_tma_rings", num_warps=4, div=DIV, num_stages=3)
    reads = [o for o in fn.walk() if o.name == "ring_read"]
    reads[0].attrs["registers"] = True
    del reads[2].attrs["registers"]
    with pytest.raises(VerificationError) as err:
        verify(fn)
    assert str(err.value).count("registers=True exactly on the reads of a TMA ring of operand 'none'") == 2


def test_the_row_compiles_to_a_1d_copy_and_shared_loads_in_the_loop():
    ck = kernelc.compile(scaled_rows, SIG, dict(ROWS=True), target="sm_90a", num_warps=4, num_stages=3,
                         divisibility=DIV)
    ptx = ck.asm["ptx"]
    assert ptx.count("cp.async.bulk.tensor.1d.") >= 2   # the prologue's stages and the loop's refill
    assert "ld.global" not in ptx
    plain = kernelc.compile(scaled_rows, SIG, dict(ROWS=False), target="sm_90a", num_warps=4, num_stages=3,
                            divisibility=DIV)
    assert plain.shared + 3 * 1024 == ck.shared   # three 1024-byte aligned stages of the row


def _bench_paths():
    for sub in ("attention_bwd_cudnn", "tutorial_gaps"):
        p = os.path.join(ROOT, "bench", "experiments", sub)
        if p not in sys.path:
            sys.path.insert(0, p)


def _ds_dkdv(causal, rows):
    _bench_paths()
    from bwd_sass import compile_kernel
    from examples.kernels import attention_bwd as B
    extra = dict(EVEN_M=True, ROWS_TMA=rows, **({"GROUP": 8} if causal else {"WS": 1}))
    return compile_kernel(128, causal, "dkdv_ds", B.DS_DKDV_CONFIGS[128], extra=extra)


@pytest.mark.parametrize("causal", [False, True])
def test_ds_dkdv_loop_reads_its_rows_from_the_ring(causal):
    # the non-causal default (a producer warpgroup) and the causal one (no producer): the loops' 8 + 8 LDG.64 a trip
    # become LDS.64 from the stage (bench/experiments/att25/rows_sass.py has the counts)
    _bench_paths()
    from bwd06_sass import mma_loops
    for rows in (False, True):
        ck = _ds_dkdv(causal, rows)
        assert ck.n_spills == 0
        loops = mma_loops(ck.asm["sass"])
        assert loops and all(lp.get("LDG", 0) == (0 if rows else 16) for lp in loops)
        if rows:
            assert all(lp.get("LDS", 0) >= 16 for lp in loops)
            tir = ck.asm["tir"]
            assert len(re.findall(r"ring_read .*registers=True.*<64xfp32>", tir)) == (4 if causal else 2)
            assert "UTMALDG.1D" in ck.asm["sass"]
