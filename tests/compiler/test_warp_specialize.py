"""Producer/consumer warp specialisation of TMA -> wgmma loops (codegen/warp_specialize.py), checked on
CPU down to PTX and SASS: one extra producer warp issues the copies, the consumers' barriers are named
barriers over their own threads, full/empty mbarrier pairs per stage, the ring position carried across
the tile loop of a persistent kernel, and the opt-in/opt-out switches."""
import re

import pytest

import kernelc
import kernelc.language as kl

from examples.kernels import matmul_persistent, matmul_tma
from tests.compiler.tma_kernels import attn_fa3_order, qk_sum

ALIGNED = {"a_desc": 16, "b_desc": 16, "c_desc": 16}


def _ops(ck):
    return [re.sub(r"^\s*/\*[0-9a-f]+\*/\s*(@!?U?P\w+\s+)?", "", l).split(" ")[0]
            for l in ck.asm["sass"].splitlines() if re.match(r"\s*/\*[0-9a-f]{4,}\*/", l)]


def _sig(bm=128, bn=128, bk=64, dt="fp16"):
    return {"a_desc": f"tensordesc<{dt}[{bm}, {bk}]>", "b_desc": f"tensordesc<{dt}[{bk}, {bn}]>",
            "c_desc": f"tensordesc<{dt}[{bm}, {bn}]>", "M": "i32", "N": "i32", "K": "i32"}


def _mm(kernel=matmul_tma.matmul_tma_kernel, num_warps=4, num_stages=3, bn=128, target="sm_90a", **extra):
    cx = dict(BLOCK_SIZE_M=128, BLOCK_SIZE_N=bn, BLOCK_SIZE_K=64, GROUP_SIZE_M=8, **extra)
    return kernelc.compile(kernel, _sig(bn=bn), cx, target=target, num_warps=num_warps, num_stages=num_stages,
                           divisibility=ALIGNED)


@pytest.mark.parametrize("num_warps,bn,stages", [(4, 128, 3), (8, 256, 4), (4, 128, 2)])
def test_a_producer_warp_fills_the_ring(num_warps, bn, stages, monkeypatch):
    monkeypatch.setenv("KERNELC_WARP_SPECIALIZE", "1")  # every qualifying loop (auto: loops with 2+ dots)
    ck = _mm(num_warps=num_warps, bn=bn, num_stages=stages)
    consumers = 32 * num_warps
    producer = 1  # one producer warp (KERNELC_WS_SETMAXNREG=1: a warpgroup, see test_dot_results_...)
    assert ck.extra_warps == producer and ck.launch_warps == num_warps + producer
    ptx = ck.asm["ptx"]
    assert f".maxntid {consumers + 32 * producer}" in ptx
    assert ("setmaxnreg" in ptx) == (producer == 4)
    # one CTA barrier before the split (all threads), named barrier 1 over the consumers after it
    assert len(re.findall(r"\bbar\.sync\s+0;", ptx)) == 1
    assert re.search(rf"\bbar\.sync\s+1, {consumers};", ptx)
    # full[s] (1 arrival) and empty[s] (one arrival per consumer warp)
    inits = re.findall(r"mbarrier\.init\.shared::cta\.b64 \[%r\d+\], (\d+);", ptx)
    assert sorted(inits) == sorted(["1"] * stages + [str(num_warps)] * stages)
    assert re.search(r"mbarrier\.arrive\.shared::cta\.b64 _", ptx)           # consumers free a stage
    assert re.search(r"mbarrier\.arrive\.expect_tx", ptx)                   # the producer announces bytes
    ops = _ops(ck)
    assert any(o.startswith(f"HGMMA.64x{bn}x16.F32") for o in ops)
    assert any(o.startswith("UTMALDG.2D") for o in ops)
    assert sum(o.startswith("SYNCS.EXCH.64") for o in ops) == 2 * stages
    assert ops.count("WARPGROUP.ARRIVE") == 1  # wgmma stays asynchronous (one group in flight)
    assert ck.n_spills == 0 and ck.local_bytes == 0
    ws = ck.reports["warp_specialization"]
    assert ws["producer_warps"] == producer and ws["stages"] == stages
    src = open(matmul_tma.__file__).read().splitlines()
    assert src[ws["line"] - 1].strip().startswith("for k in range(")


def test_persistent_kernel_carries_the_ring_across_tiles():
    ck = _mm(matmul_persistent.matmul_persistent_kernel, NUM_SMS=132, WARP_SPECIALIZE=True)
    assert ck.extra_warps == 5  # a second consumer warpgroup (passes/ws_consumers.py) and the producer warp
    ws = ck.reports["warp_specialization"]
    src = open(matmul_persistent.__file__).read().splitlines()
    assert src[ws["line"] - 1].strip().startswith("for ki in tl.range(")  # the K loop, not the tile loop
    ptx = ck.asm["ptx"]
    # the ring position lives in allocas that LLVM promoted: nothing in local memory
    assert ck.local_bytes == 0 and "st.local" not in ptx
    # barriers are initialised once, at the entry, not per tile
    assert len(re.findall(r"mbarrier\.init", ptx)) == 2 * 3
    assert "mbarrier.inval" not in ptx
    ops = _ops(ck)
    assert "UTMASTG.2D" in ops and any(o.startswith("HGMMA.64x128x16.F32") for o in ops)


def test_operand_loaded_before_the_loop_keeps_wgmma_async(monkeypatch):
    monkeypatch.setenv("KERNELC_WARP_SPECIALIZE", "1")
    ck = kernelc.compile(qk_sum, {"q_desc": "tensordesc<fp16[128, 64]>", "k_desc": "tensordesc<fp16[64, 64]>",
                                  "out_ptr": "*fp32", "N_CTX": "i32"}, dict(BM=128, BN=64, D=64), target="sm_90a",
                         num_warps=4, num_stages=3, divisibility={"q_desc": 16, "k_desc": 16})
    assert ck.extra_warps == 1
    ops = _ops(ck)
    assert ops.count("WARPGROUP.ARRIVE") == 1
    assert not any(o.startswith(("STS", "LDSM")) for o in ops)


def _attention(causal=False, target="sm_90a", dt="fp16"):
    from examples.kernels import attention_tma
    d = f"tensordesc<{dt}[128, 128]>"
    sig = {"sm_scale": "fp32", "desc_q": d, "desc_k": d, "desc_v": d, "desc_o": d, "N_CTX": "i32"}
    return kernelc.compile(attention_tma.attn_fwd_tma_kernel, sig,
                           dict(BLOCK_M=128, BLOCK_N=128, HEAD_DIM=128, CAUSAL=causal), target=target, num_warps=8,
                           num_stages=2, divisibility={k: 16 for k in sig if k.startswith("desc")})


@pytest.mark.parametrize("causal,dt", [(False, "fp16"), (True, "fp16"), (False, "bf16")])
def test_attention_loop_is_specialised_by_default(causal, dt):
    ck = _attention(causal, dt=dt)
    assert ck.extra_warps == 1 and ck.n_spills == 0
    ops = _ops(ck)
    assert sum(o.startswith("HGMMA.64x128x16.F32" + (".BF16" if dt == "bf16" else "")) for o in ops) >= 16
    assert any(o.startswith("UTMALDG.2D") for o in ops)
    assert not any(o.startswith(("LDGSTS", "LDG")) for o in ops)
    src = open(ck.reports["warp_specialization"]["file"]).read().splitlines()
    assert "no mask" in src[ck.reports["warp_specialization"]["line"] - 1]  # the main loop
    assert ck.launch_warps == 9 and "setmaxnreg" not in ck.asm["ptx"]  # 8 consumer warps, a producer warp
    if causal:  # the diagonal loop reuses the main loop's ring: Q + 2 stages of K and V fit twice over
        assert ck.shared < 200 * 1024


def test_environment_switch_and_other_targets(monkeypatch):
    assert _mm().extra_warps == 0  # auto: a one-dot loop keeps the plain ring
    monkeypatch.setenv("KERNELC_WARP_SPECIALIZE", "0")
    ck = _attention()
    assert ck.extra_warps == 0 and "warp_specialization" not in ck.reports
    assert not re.search(r"\bbar\.sync\s+1,", ck.asm["ptx"])
    monkeypatch.setenv("KERNELC_WARP_SPECIALIZE", "1")
    assert _mm().extra_warps == 1
    for target in ("sm_90", "sm_80"):
        assert _mm(target=target).extra_warps == 0


@kernelc.jit
def mm_loop(a_desc, b_desc, c_desc, K, BM: kl.constexpr, BN: kl.constexpr, BK: kl.constexpr, WS: kl.constexpr):
    acc = kl.zeros((BM, BN), dtype=kl.float32)
    for k in kl.range(0, kl.cdiv(K, BK), warp_specialize=WS):
        acc = kl.dot(a_desc.load([kl.program_id(0) * BM, k * BK]), b_desc.load([k * BK, 0]), acc)
    c_desc.store([kl.program_id(0) * BM, 0], acc.to(kl.float16))


@kernelc.jit
def mm_pointers(a_ptr, b_ptr, c_ptr, K, BM: kl.constexpr, BN: kl.constexpr, BK: kl.constexpr):
    rm = kl.arange(0, BM)
    rn = kl.arange(0, BN)
    rk = kl.arange(0, BK)
    acc = kl.zeros((BM, BN), dtype=kl.float32)
    for k in kl.range(0, K, BK, warp_specialize=True):
        a = kl.load(a_ptr + rm[:, None] * K + (k + rk)[None, :])
        b = kl.load(b_ptr + (k + rk)[:, None] * BN + rn[None, :])
        acc = kl.dot(a, b, acc)
    kl.store(c_ptr + rm[:, None] * BN + rn[None, :], acc)


def test_per_loop_request_overrides_the_default(monkeypatch):
    sig = {"a_desc": "tensordesc<fp16[128, 64]>", "b_desc": "tensordesc<fp16[64, 128]>",
           "c_desc": "tensordesc<fp16[128, 128]>", "K": "i32"}
    div = {"a_desc": 16, "b_desc": 16, "c_desc": 16}

    def build(ws):
        return kernelc.compile(mm_loop, sig, dict(BM=128, BN=128, BK=64, WS=ws), target="sm_90a", num_warps=4,
                               num_stages=3, divisibility=div)
    assert build(False).extra_warps == 0
    monkeypatch.setenv("KERNELC_WARP_SPECIALIZE", "0")
    assert build(True).extra_warps == 5  # two consumer warpgroups at 4 warps, and the producer warp


def test_a_loop_that_cannot_be_specialised_says_why(monkeypatch):
    monkeypatch.setenv("KERNELC_AUTO_TMA", "0")  # plain pointer loads only (auto-TMA would take b's tile)
    ck = kernelc.compile(mm_pointers, {"a_ptr": "*fp16", "b_ptr": "*fp16", "c_ptr": "*fp32", "K": "i32"},
                         dict(BM=128, BN=128, BK=64), target="sm_90a", num_warps=4, num_stages=3)
    assert ck.extra_warps == 0
    notes = [n for n in ck.compile_log if "not warp-specialised" in n]
    assert notes and "no tensor-descriptor (TMA) loads" in notes[0], ck.compile_log


def test_persistent_example_runs_in_the_interpreter():
    torch = pytest.importorskip("torch")
    a = torch.randn(200, 96, dtype=torch.float16)
    b = torch.randn(96, 150, dtype=torch.float16)
    c = matmul_persistent.matmul_persistent(a, b, BLOCK_SIZE_M=64, BLOCK_SIZE_N=64, BLOCK_SIZE_K=32)
    torch.testing.assert_close(c.float(), a.float() @ b.float(), atol=0.05, rtol=1e-2)


def test_two_consumer_warpgroups_take_turns_on_the_first_dot(monkeypatch):
    monkeypatch.setenv("KERNELC_WS_PINGPONG", "1")
    ptx = _attention().asm["ptx"]
    # warpgroup 1 hands the first turn to warpgroup 0, turns alternate on barriers 2 and 3, warpgroup 0
    # takes the last hand-over after the loop
    assert re.search(r"@%p\d+ bar\.arrive 2, 256;", ptx) and re.search(r"@%p\d+ bar\.sync 2, 256;", ptx)
    assert re.search(r"bar\.sync t, 256;", ptx) and re.search(r"bar\.arrive t, 256;", ptx)
    monkeypatch.setenv("KERNELC_WS_PINGPONG", "0")
    assert "bar.arrive" not in _attention().asm["ptx"]


def _fa3_order(monkeypatch, setmaxnreg):
    monkeypatch.setenv("KERNELC_WS_SETMAXNREG", setmaxnreg)
    sig = {"sm_scale": "fp32", "desc_q": "tensordesc<fp16[128, 128]>", "desc_k": "tensordesc<fp16[128, 128]>",
           "desc_v": "tensordesc<fp16[128, 128]>", "desc_o": "tensordesc<fp16[128, 128]>", "N_CTX": "i32"}
    return kernelc.compile(attn_fa3_order, sig, dict(BLOCK_M=128, BLOCK_N=128, HEAD_DIM=128), target="sm_90a",
                           num_warps=8, num_stages=2, divisibility={k: 16 for k in sig if k.startswith("desc")})


def test_dot_results_are_waited_for_where_first_read(monkeypatch):
    """FlashAttention-3's order issues the next block's QK^T, then this block's PV, then reads the scores:
    the compiler waits with ``wait_group 1`` there (PV stays on the tensor cores during the softmax). With
    KERNELC_WS_SETMAXNREG=1 the producer is a warpgroup that hands registers to the consumers, and ptxas
    (standalone: nvJitLink ignores setmaxnreg) keeps the wgmmas asynchronous."""
    from kernelc.compiler.backend.ptxas import ptxas_binary
    if ptxas_binary() is None:
        pytest.skip("no standalone ptxas: nvJitLink ignores setmaxnreg (C7504) and serialises the wgmmas")
    ck = _fa3_order(monkeypatch, "1")
    ptx = ck.asm["ptx"]
    assert re.findall(r"wgmma\.wait_group\.sync\.aligned (\d)", ptx).count("1") == 1
    assert "setmaxnreg.dec.sync.aligned.u32 40;" in ptx and "setmaxnreg.inc.sync.aligned.u32 232;" in ptx
    assert ck.launch_warps == 12 and ck.n_spills == 0
    assert _ops(ck).count("WARPGROUP.ARRIVE") <= 4
    assert "C7512" not in ck.artifacts.ptxas_log and "C7514" not in ck.artifacts.ptxas_log
    # with the one-warp producer's 168 registers ptxas serialises them (why setmaxnreg exists)
    assert "C7512" in _fa3_order(monkeypatch, "0").artifacts.ptxas_log


def test_fa3_order_matches_the_reference_in_the_interpreter():
    torch = pytest.importorskip("torch")
    from tests.compiler.tma_kernels import run_attention
    q, k, v = (torch.randn(1, 2, 256, 64, dtype=torch.float16) for _ in range(3))
    o, _ = run_attention(attn_fa3_order, q, k, v, BLOCK_M=64, BLOCK_N=32)
    ref = torch.nn.functional.scaled_dot_product_attention(q.float(), k.float(), v.float())
    torch.testing.assert_close(o.float(), ref, atol=2e-3, rtol=2e-3)


def test_consumer_regs_knob_gives_the_consumers_240_and_the_producer_24(monkeypatch):
    """KERNELC_WS_CONSUMER_REGS=240: the schedule pass writes ``consumer_regs=240`` on the loop's ws attribute (only
    where it is not 232) and on its ws_producer; codegen emits setmaxnreg 24 / 240 (168 x 384 registers launched:
    256 x 240 + 128 x 24). auto (the default) gives 240 only to loops carrying 128+ fp32 accumulator registers a
    consumer thread (test_attention_kernels: the D=128 dK/dV loop). The verifier refuses another count or one
    without setmaxnreg."""
    from kernelc.compiler.ir.verifier import _ws_producer
    from kernelc.compiler.ir.core import Op
    monkeypatch.setenv("KERNELC_WS_CONSUMER_REGS", "240")
    ck = _fa3_order(monkeypatch, "1")
    assert "setmaxnreg.dec.sync.aligned.u32 24;" in ck.asm["ptx"] and "setmaxnreg.inc.sync.aligned.u32 240;" in \
        ck.asm["ptx"]
    assert "consumer_regs=240" in ck.asm["tir"]
    for knob in ("232", "auto"):  # auto: FA3's forward order carries one [128, 128] fp32 accumulator, 64 a thread
        monkeypatch.setenv("KERNELC_WS_CONSUMER_REGS", knob)
        fa3 = _fa3_order(monkeypatch, "1")
        assert "consumer_regs" not in fa3.asm["tir"] and "setmaxnreg.inc.sync.aligned.u32 232;" in fa3.asm["ptx"]
    attrs = dict(producer_warps=4, stages=2, setmaxnreg=True)
    ok = Op("ws_producer", [], [], dict(attrs, consumer_regs=240))
    assert not any("consumer_regs" in e for e in _ws_producer(ok))
    assert any("consumer_regs" in e for e in _ws_producer(Op("ws_producer", [], [], dict(attrs, consumer_regs=236))))
    assert any("consumer_regs" in e for e in _ws_producer(Op("ws_producer", [], [],
                                                             dict(attrs, setmaxnreg=False, producer_warps=1,
                                                                  consumer_regs=240))))


@kernelc.jit
def two_ws_loops(q_desc, k_desc, v_desc, o_desc, N, BM: kl.constexpr, BN: kl.constexpr, D: kl.constexpr):
    """Two attention-shaped loops that both ask for a producer warp (a causal backward's diagonal and unmasked loops
    are this shape): the kernel gets one producer."""
    q = q_desc.load([kl.program_id(0) * BM, 0])
    acc = kl.zeros((BM, D), dtype=kl.float32)
    for n in kl.range(0, N, BN, warp_specialize=True):
        s = kl.dot(q, k_desc.load([n, 0]).T)
        acc = kl.dot(s.to(kl.float16), v_desc.load([n, 0]), acc)
    for n in kl.range(N, 2 * N, BN, warp_specialize=True):
        s = kl.dot(q, k_desc.load([n, 0]).T)
        acc = kl.dot(s.to(kl.float16), v_desc.load([n, 0]), acc)
    o_desc.store([kl.program_id(0) * BM, 0], acc.to(kl.float16))


def test_a_second_loop_that_asks_for_a_producer_is_told_it_has_none():
    """One producer warp per kernel: the first loop that asks gets it, and the compile log names each later loop
    that asked and did not get one (session 25: the causal attention backward's unmasked loop went without its
    producer, silently, for four sessions of measurements)."""
    sig = {"q_desc": "tensordesc<fp16[128, 64]>", "k_desc": "tensordesc<fp16[64, 64]>",
           "v_desc": "tensordesc<fp16[64, 64]>", "o_desc": "tensordesc<fp16[128, 64]>", "N": "i32"}
    ck = kernelc.compile(two_ws_loops, sig, dict(BM=128, BN=64, D=64), target="sm_90a", num_warps=8, num_stages=2,
                         divisibility={k: 16 for k in sig if k.endswith("desc")})
    assert "ws_producer" in ck.asm["tir"] or ck.extra_warps > 0
    import inspect
    src, start = inspect.getsourcelines(two_ws_loops.fn)
    first, second = [start + i for i, ln in enumerate(src) if "warp_specialize=True" in ln]
    told = [n for n in ck.compile_log if "loop not warp-specialised: the kernel's producer warp serves" in n]
    assert len(told) == 1 and f":{second}:" in told[0] and f"line {first}" in told[0], ck.compile_log
