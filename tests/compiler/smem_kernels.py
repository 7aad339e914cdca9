"""Kernels with loops that run one after the other, for passes/smem_offsets.py's tests."""
import kernelc
import kernelc.language as kl


@kernelc.jit
def two_loops(a_ptr, b_ptr, c_ptr, K, BM: kl.constexpr, BN: kl.constexpr, BK: kl.constexpr):
    # loop 1 walks K in steps of BK, loop 2 in steps of 2*BK: rings of different sizes, never live together
    rm = kl.arange(0, BM)
    rn = kl.arange(0, BN)
    rk = kl.arange(0, BK)
    rk2 = kl.arange(0, 2 * BK)
    acc = kl.zeros((BM, BN), dtype=kl.float32)
    for k in kl.range(0, K, BK):
        a = kl.load(a_ptr + rm[:, None] * K + (k + rk)[None, :])
        b = kl.load(b_ptr + (k + rk)[:, None] * BN + rn[None, :])
        acc = kl.dot(a, b, acc)
    for k in kl.range(0, K, 2 * BK):
        a = kl.load(a_ptr + rm[:, None] * K + (k + rk2)[None, :])
        b = kl.load(b_ptr + (k + rk2)[:, None] * BN + rn[None, :])
        acc = kl.dot(a, b, acc)
    kl.store(c_ptr + rm[:, None] * BN + rn[None, :], acc)


@kernelc.jit
def shared_operand(q_ptr, k_ptr, o_ptr, N, BM: kl.constexpr, BN: kl.constexpr, D: kl.constexpr):
    # q is read by the dots of both loops: its staged copy lives across both, the rings of each loop do not
    rm = kl.arange(0, BM)
    rn = kl.arange(0, BN)
    rd = kl.arange(0, D)
    q = kl.load(q_ptr + rm[:, None] * D + rd[None, :])
    acc = kl.zeros((BM, BN), dtype=kl.float32)
    for n in kl.range(0, N, BN):
        kt = kl.load(k_ptr + rd[:, None] + (n + rn)[None, :] * D)
        acc = kl.dot(q, kt, acc)
    for n in kl.range(0, N, BN):
        kt = kl.load(k_ptr + rd[:, None] + (n + rn)[None, :] * D)
        acc = kl.dot(q, kt, acc)
    kl.store(o_ptr + rm[:, None] * BN + rn[None, :], acc)


TWO_SIG = {"a_ptr": "*fp16", "b_ptr": "*fp16", "c_ptr": "*fp32", "K": "i32"}
SHARED_SIG = {"q_ptr": "*fp16", "k_ptr": "*fp16", "o_ptr": "*fp32", "N": "i32"}
