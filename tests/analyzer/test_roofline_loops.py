"""The roofline of a kernel whose dot sits in a loop the launch does not size (a loop over the sequence, not over a
dot's K, as attention's key and query blocks): its static FLOP count is one trip a program, a lower bound. On an H200
(2026-11-29, att21's R1) every attention kernel was called latency-bound at 0.6-7% of the tensor-core peak (the dK/dV
kernel does ~54%), and ds's causal dK/dV kernel memory-bound with 11% headroom, which would demote real findings."""
from __future__ import annotations

import kernelc
import kernelc.language as kl
from analyzer.facts import Device, facts_from_compiled
from analyzer.roofline import roofline, uncounted_dot_loop

from .test_gpu_precision import _tensor   # a launch argument's record, as kprof writes it


@kernelc.jit
def rows_loop(Q, K, O, N_CTX, BLOCK: kl.constexpr, D: kl.constexpr):
    offs = kl.arange(0, BLOCK)
    d = kl.arange(0, D)
    q = kl.load(Q + offs[:, None] * D + d[None, :])
    acc = kl.zeros([BLOCK, BLOCK], dtype=kl.float32)
    for start in range(0, N_CTX, BLOCK):  # trips: N_CTX / BLOCK, no dot's K
        k = kl.load(K + (start + offs)[:, None] * D + d[None, :])
        acc += kl.dot(q, kl.trans(k))
    kl.store(O + offs[:, None] * BLOCK + offs[None, :], acc)


def _facts(time_ns, programs=1024):
    ck = kernelc.compile(rows_loop, {"Q": "*fp16", "K": "*fp16", "O": "*fp32", "N_CTX": "i32"},
                         dict(BLOCK=64, D=64), target="sm_90a", num_warps=4)
    dev = Device.for_arch("sm_90a", num_sms=132, clock_khz=1980000, source="profile")
    facts = facts_from_compiled(ck, grid=(programs,), device=dev, time_ns=time_ns, count=1)
    facts.arg_values = {"N_CTX": 1 << 16}
    facts.launch_args = [_tensor("Q", "float16", 64, 64), _tensor("K", "float16", 1 << 16, 64),
                         _tensor("O", "float32", 64, 64), {"name": "N_CTX", "kind": "int", "value": 1 << 16}]
    return facts


def test_a_dot_in_an_unsized_loop_makes_the_flop_count_a_lower_bound():
    facts = _facts(1e6)
    assert uncounted_dot_loop(facts)
    rl = roofline(facts)
    assert rl.flops_lower_bound
    # one trip's FLOPs over a millisecond: far under half the peak, yet not "latency-bound"
    assert rl.flops_fraction < 0.01
    assert rl.bound == "unknown" and rl.headroom is None
    assert rl.to_json()["flops_lower_bound"] is True


def test_a_lower_bound_over_the_line_still_says_compute_bound():
    # 65536 programs' single trips in 50 us: the counted FLOPs alone are over half the peak and over the bytes' share
    rl = roofline(_facts(50e3, programs=1 << 16))
    assert rl.flops_lower_bound and rl.flops_fraction >= 0.5 and rl.bound == "compute"
    # without a time, an intensity under the ridge says nothing either (the FLOPs may be many times more)
    facts = _facts(50e3, programs=4)
    facts.time_ns = 0
    assert roofline(facts).bound == "unknown"


@kernelc.jit
def desc_copy(X, Y, W, N_CTX, BLOCK: kl.constexpr, D: kl.constexpr):
    # a loop of TMA loads from X and TMA stores to Y (descriptors made in the kernel), W never touched
    xd = kl.make_tensor_descriptor(X, shape=[N_CTX, D], strides=[D, 1], block_shape=[BLOCK, D])
    yd = kl.make_tensor_descriptor(Y, shape=[N_CTX, D], strides=[D, 1], block_shape=[BLOCK, D])
    for start in range(kl.program_id(0) * BLOCK, N_CTX, kl.num_programs(0) * BLOCK):
        yd.store([start, 0], xd.load([start, 0]) * 2)


def test_tma_accesses_name_their_tensor_for_the_dram_bytes():
    from analyzer.roofline import dram_bytes
    ck = kernelc.compile(desc_copy, {"X": "*fp16", "Y": "*fp16", "W": "*fp16", "N_CTX": "i32"},
                         dict(BLOCK=64, D=64), target="sm_90a", num_warps=4)
    tma = [a for a in ck.reports["memory_accesses"] if a.get("engine") == "tma"]
    assert sorted((a["kind"].split()[0], a["address"]["base"]) for a in tma) == [("load", "X"), ("store", "Y")]
    facts = facts_from_compiled(ck, grid=(132,))
    n = 1 << 20
    facts.launch_args = [_tensor("X", "float16", n, 64), _tensor("Y", "float16", n, 64),
                         _tensor("W", "float16", 4 * n, 64), {"name": "N_CTX", "kind": "int", "value": n}]
    # X read once and Y written once; before the copies named their tensors, each direction was charged every
    # unnamed tensor (X, Y and the untouched W: 12 spans of X's size)
    assert dram_bytes(facts) == 2 * n * 64 * 2
