"""schedule_pipelines rings a TMA tile that several dots read (passes/schedule.py): one copy a stage serves
every reader, each through its own view (the tile itself or one ``trans`` of it). The attention backward
reads Q (dK/dV kernel) and K (dQ kernel) this way; before, such a tile was copied once per trip without a
ring, and a tile read through a trans of a trans went through registers (docs/attention.md, 2026-11-27)."""
import re

import kernelc
import kernelc.language as kl
from tests.compiler.filecheck import filecheck
from tests.compiler.test_schedule_passes import _passes


@kernelc.jit
def dk_like(k_desc, q_desc, out_ptr, N, BN: kl.constexpr, BM: kl.constexpr, D: kl.constexpr):
    # dK += (K Q^T) Q: Q is the B of both dots, transposed for the first
    k = k_desc.load([kl.program_id(0) * BN, 0])
    acc = kl.zeros((BN, D), dtype=kl.float32)
    for m in kl.range(0, N, BM):
        q = q_desc.load([m, 0])
        s = kl.dot(k, q.T)
        acc = kl.dot(s.to(kl.float16), q, acc)
    rn = kl.arange(0, BN)
    rd = kl.arange(0, D)
    kl.store(out_ptr + rn[:, None] * D + rd[None, :], acc)


@kernelc.jit
def q_read_as_a_and_b(q_desc, b_desc, out_ptr, N, BM: kl.constexpr, D: kl.constexpr):
    # Q is the A of Q Q^T and, through its trans view, the B: each value (q, q.T) is read in one orientation
    b = b_desc.load([0, 0])
    acc = kl.zeros((BM, BM), dtype=kl.float32)
    for m in kl.range(0, N, BM):
        q = q_desc.load([m, 0])
        acc = kl.dot(q, q.T, acc)
    acc2 = kl.dot(acc.to(kl.float16), b)
    rm = kl.arange(0, BM)
    rd = kl.arange(0, D)
    kl.store(out_ptr + rm[:, None] * D + rd[None, :], acc2)


SIG = {"k_desc": "tensordesc<fp16[128, 64]>", "q_desc": "tensordesc<fp16[32, 64]>", "out_ptr": "*fp32", "N": "i32"}
DIV = {"k_desc": 16, "q_desc": 16, "out_ptr": 16}


def test_a_tile_two_dots_read_joins_the_ring_once():
    ir, _, _ = _passes(dk_like, SIG, dict(BN=128, BM=32, D=64), num_warps=4, num_stages=3, div=DIV)
    filecheck(ir["assign_layouts"], """
        CHECK: = scf.for {{%\\d+}}, %N, {{%\\d+}}, {{%\\d+}} : <128x64xfp32>
        CHECK-NEXT: ^body
        CHECK: [[Q:%\\d+]] = descriptor_load {{.*}}{block_shape=[32, 64], padding='zero', tma=True} : <32x64xfp16>
        CHECK-NEXT: = trans [[Q]] {perm=[1, 0]} : <64x32xfp16>
    """)
    filecheck(ir["schedule_pipelines"], """
        CHECK: [[K:%\\d+]] = descriptor_load {{.*}}tma=True, in_place=True} : <128x64xfp16>
        CHECK: = scf.for {{.*}}{pipeline={stages=3, lookahead=2}}
        CHECK: [[Q:%\\d+]] = descriptor_load {{.*}}tma=True, pipeline={ring='tma'}} : <32x64xfp16>
        CHECK-NEXT: [[QT:%\\d+]] = trans [[Q]] {perm=[1, 0], pipeline={ring='tma'}} : <64x32xfp16>
        CHECK: = dot [[K]], [[QT]], {{.*}}
        CHECK: = dot {{%\\d+}}, [[Q]], {{.*}}
    """)


def test_the_shared_ring_tile_is_copied_once_a_stage_and_read_in_place():
    ck = kernelc.compile(dk_like, SIG, dict(BN=128, BM=32, D=64), target="sm_90a", num_warps=4, num_stages=3,
                         divisibility=DIV)
    ptx = ck.asm["ptx"]
    # K once before the loop, Q once per stage (prologue: stages - 1 copies, then one per trip)
    assert len(re.findall(r"cp\.async\.bulk\.tensor\.2d", ptx)) == 1 + 2 + 1, ptx.count("cp.async.bulk.tensor")
    assert ck.n_spills == 0
    sass = ck.asm["sass"]
    assert "STS" not in sass.split("HGMMA", 1)[1].rsplit("HGMMA", 1)[0]  # no operand staged between the dots
    assert all(d["engine"] == "wgmma" and d["smem_transpose"] == [] for d in ck.reports["dots"])


def test_a_tile_read_as_a_and_through_its_trans_as_b_joins_the_ring():
    sig = {"q_desc": "tensordesc<fp16[64, 64]>", "b_desc": "tensordesc<fp16[64, 64]>", "out_ptr": "*fp32",
           "N": "i32"}
    ir, _, _ = _passes(q_read_as_a_and_b, sig, dict(BM=64, D=64), num_warps=4, num_stages=3,
                       div={"q_desc": 16, "b_desc": 16, "out_ptr": 16})
    filecheck(ir["schedule_pipelines"], """
        CHECK: = scf.for {{.*}}{pipeline={stages=3, lookahead=2}}
        CHECK: [[Q:%\\d+]] = descriptor_load {{.*}}pipeline={ring='tma'}} : <64x64xfp16>
        CHECK-NEXT: [[QT:%\\d+]] = trans [[Q]] {perm=[1, 0], pipeline={ring='tma'}} : <64x64xfp16>
        CHECK-NEXT: = dot [[Q]], [[QT]], {{.*}}
    """)
