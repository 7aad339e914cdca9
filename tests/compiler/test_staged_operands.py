"""``share_staged_operands`` (passes/staged_operands.py): a loop-invariant dot operand read by the dots of
two loops of one block is staged in shared memory once, not once per loop (golden IR before -> after,
and the kernel's shared memory)."""
import pytest

import kernelc
import kernelc.language as kl
from kernelc.compiler.backend import parse_target
from tests.compiler.filecheck import filecheck
from tests.compiler.test_schedule_passes import _passes


@pytest.fixture(autouse=True)
def _pointer_loads(monkeypatch):
    monkeypatch.setenv("KERNELC_AUTO_TMA", "0")  # cp.async rings over pointer loads


@kernelc.jit
def two_loops(q_ptr, k_ptr, o_ptr, N, BM: kl.constexpr, BN: kl.constexpr, D: kl.constexpr):
    rm = kl.arange(0, BM)
    rn = kl.arange(0, BN)
    rd = kl.arange(0, D)
    q = kl.load(q_ptr + rm[:, None] * D + rd[None, :])        # read by the dots of both loops
    acc = kl.zeros((BM, BN), dtype=kl.float32)
    for n in kl.range(0, N, BN):                              # first loop
        kt = kl.load(k_ptr + rd[:, None] + (n + rn)[None, :] * D)
        acc = kl.dot(q, kt, acc)
    for n in kl.range(0, N, BN):                              # second loop: the same q
        kt = kl.load(k_ptr + rd[:, None] + (n + rn)[None, :] * D)
        acc = kl.dot(q, kt, acc)
    kl.store(o_ptr + rm[:, None] * BN + rn[None, :], acc)


SIG = {"q_ptr": "*fp16", "k_ptr": "*fp16", "o_ptr": "*fp32", "N": "i32"}
CX = dict(BM=64, BN=64, D=64)


def test_the_second_loop_reads_the_first_loops_staged_copy():
    ir, _, _ = _passes(two_loops, SIG, CX)
    before, after = ir["expand_warp_specialize"], ir["share_staged_operands"]
    filecheck(before, """
        CHECK: [[Q:%\\d+]] = load
        CHECK: [[S1:%\\d+]] = stage_operand [[Q]] {operand='a'} : <64x64xfp16>
        CHECK: = scf.for
        CHECK: = dot [[S1]],
        CHECK: [[S2:%\\d+]] = stage_operand [[Q]] {operand='a'} : <64x64xfp16>
        CHECK: = scf.for
        CHECK: = dot [[S2]],
    """)
    filecheck(after, """
        CHECK: [[Q:%\\d+]] = load
        CHECK: [[S1:%\\d+]] = stage_operand [[Q]] {operand='a'} : <64x64xfp16>
        CHECK: = scf.for
        CHECK: = dot [[S1]],
        CHECK-NOT: stage_operand
        CHECK: = scf.for
        CHECK: = dot [[S1]],
    """)
    assert before.count("stage_operand") == 2 and after.count("stage_operand") == 1


def test_a_different_role_is_staged_again():
    # q read as the A operand in one loop and as B in the other: two layouts in shared memory, two copies
    @kernelc.jit
    def roles(q_ptr, k_ptr, o_ptr, N, BM: kl.constexpr, BN: kl.constexpr, D: kl.constexpr):
        rm = kl.arange(0, BM)
        rn = kl.arange(0, BN)
        rd = kl.arange(0, D)
        q = kl.load(q_ptr + rm[:, None] * D + rd[None, :])
        acc = kl.zeros((BM, BN), dtype=kl.float32)
        for n in kl.range(0, N, BN):
            kt = kl.load(k_ptr + rd[:, None] + (n + rn)[None, :] * D)
            acc = kl.dot(q, kt, acc)
        for n in kl.range(0, N, BN):
            k = kl.load(k_ptr + rm[:, None] * D + (n + rn)[None, :])
            acc = kl.dot(k, q, acc)
        kl.store(o_ptr + rm[:, None] * BN + rn[None, :], acc)
    ir, _, _ = _passes(roles, SIG, CX)
    staged = [ln.split("{")[1].split("}")[0] for ln in ir["share_staged_operands"].splitlines() if "stage_operand" in ln]
    assert staged == ["operand='a'", "operand='b'"]


def test_one_copy_less_of_shared_memory():
    tgt = parse_target("sm_90a")
    ck = kernelc.compile(two_loops, SIG, CX, tgt, num_warps=4, num_stages=3)
    # two rings of 3 stages x 64x64 fp16 (8 KB a stage) and one staged q (8 KB), not two
    assert ck.dynamic_shared <= 2 * 3 * 8192 + 8192 + 2048, ck.dynamic_shared
