"""fp8 P V without P's shuffle between lanes: a tile in the fp8 wgmma A fragment's register layout
(``codegen/fp8_words.py: a8_operand_layout``) is read as it is (``dot.py: _a8_own``); attention reaches that
layout from the scores' accumulator layout by a reshape and permute of the keys (``attention.fp8_key_order``),
which only renames registers."""
import types

import pytest

import kernelc
from kernelc.compiler.codegen import control
from kernelc.compiler.codegen.dot import _a8_own
from kernelc.compiler.codegen.emitter import Emitter
from kernelc.compiler.codegen.fp8_words import a8_operand_layout, a8_operand_order, word_order
from kernelc.compiler.layouts import mma_v2
from examples.kernels import attention as A
from examples.kernels import attention_fa3
from tests.compiler.test_fp8_attention import _key_loop, _run_lockstep

SHAPES = [(64, 32, 4), (64, 128, 4), (128, 128, 8), (128, 64, 4)]


def _key_order_layout(M, K, wm):
    """The accumulator layout after fp8_key_order's reshape, permute and reshape (layout_assign's relabels)."""
    return mma_v2((M, K), (wm, 1)).reshaped((M, K // 32, 2, 2, 4, 2)).transposed((0, 1, 2, 4, 3, 5)).reshaped((M, K))


@pytest.mark.parametrize("M,K,wm", SHAPES)
def test_a8_operand_layout_is_the_isas_fragment(M, K, wm):
    """Lane l = 4g + q of warp w holds in fragment (i, kk) register j, byte b: row 16w + 16*wm*i + g + 8 (j % 2),
    column 32kk + 16 (j // 2) + 4q + b (PTX ISA, wgmma .m64nNk32 A for 8-bit types)."""
    L = a8_operand_layout(M, K, wm)
    assert L.num_regs * 32 * wm == M * K
    for w in range(wm):
        for lane in range(32):
            base = L.thread_coord(lane, w)
            for r in range(L.num_regs):
                b, j, kk, i = r & 3, (r >> 2) & 3, (r >> 4) % (K // 32), (r >> 4) // (K // 32)
                want = (16 * w + 16 * wm * i + lane // 4 + 8 * (j % 2), 32 * kk + 16 * (j // 2) + 4 * (lane % 4) + b)
                got = tuple(x ^ y for x, y in zip(base, L.reg_coord(r)))
                assert got == want, (w, lane, r, got, want)


@pytest.mark.parametrize("M,K,wm", SHAPES)
def test_the_key_order_renames_the_accumulator_into_it(M, K, wm):
    acc = mma_v2((M, K), (wm, 1))
    assert a8_operand_order(acc, M, K, wm) is None  # the accumulator itself needs the shuffle
    order = a8_operand_order(_key_order_layout(M, K, wm), M, K, wm)
    assert order is not None and sorted(order) == list(range(acc.num_regs))
    # a carried tile in that layout crosses the back edge in the fragments' words
    assert control._word_order(_key_order_layout(M, K, wm)) == order == word_order(_key_order_layout(M, K, wm))


def test_own_fragments_are_words_of_the_registers_in_order():
    M, K, wm = 128, 64, 4
    e = Emitter("t", "t.py", 1)
    n = M * K // (32 * wm)
    regs = [f"%b{r}" for r in range(n)]
    env = {f"%b{r}": [(r * 5 + lane) & 0xFF for lane in range(32)] for r in range(n)}
    frags = _a8_own(types.SimpleNamespace(e=e), regs, M, K, wm)
    _run_lockstep(e.body, env)
    assert sorted(frags) == [(i, kk) for i in range(M // (16 * wm)) for kk in range(K // 32)]
    for (i, kk), words in frags.items():
        base = 16 * (i * (K // 32) + kk)
        for j, w in enumerate(words):
            assert [list(env[w][lane].to_bytes(4, "little")) for lane in range(32)] == \
                [[env[regs[base + 4 * j + b]][lane] for b in range(4)] for lane in range(32)]
    assert not any("shfl" in ln or "prmt" in ln for ln in e.body)


def _pointer_fp8(key_order, D=128, causal=False):
    io = "*fp8e4nv"
    sig = dict(Q=io, K=io, V=io, Out="*fp16", LSE="*fp32", QScale="*fp32", KScale="*fp32", VScale="*fp32",
               sm_scale="fp32")
    for a in "qkvo":
        for b in ("z", "h", "m" if a in "qo" else "n", "k"):
            sig[f"stride_{a}{b}"] = "i32"
    sig.update(H="i32", N_CTX="i32")
    return kernelc.compile(A.attn_fwd_lse_kernel, sig,
                           dict(HEAD_DIM=D, CAUSAL=causal, STORE_LSE=False, FP8=True, BLOCK_M=64, BLOCK_N=128,
                                FOLD_SCALE=True, KEY_ORDER=key_order),
                           target="sm_90a", num_warps=4, num_stages=2, divisibility={n: 16 for n in sig},
                           equal_to_1=("stride_qk", "stride_kk", "stride_ok", "stride_vn"))


def test_pointer_fp8_key_loop_has_no_shuffle_of_p():
    """D=128, 64x128 blocks, 4 warps (FP8_FWD_CONFIGS'): without the key order 16 SHFL.IDX, 16 SEL, 16 PRMT and 526
    instructions a key block (fwd16's count); with it none of the three and 467 (2026-11-28, sm_90a); every
    exponential stays on MUFU (exp2_poly's auto sees the dot through the renaming)."""
    ck = _pointer_fp8(True)
    ops = _key_loop(ck.asm["sass"])
    count = lambda p: sum(o.startswith(p) for o in ops)  # noqa: E731
    assert ck.n_spills == 0 and count("QGMMA") == 8
    assert count("SHFL.IDX") == 0 and count("PRMT") == 0 and count("SEL") == 0
    assert count("MUFU.EX2") == 66 and count("F2FP.SATFINITE.E4M3") == 32
    assert len(ops) <= 480, len(ops)


def test_fa3_fp8_key_loop_has_no_shuffle_of_p():
    """The FA3 order carries P in the key order, in the fragments' words: no SHFL.IDX, SEL or PRMT (16 / 16 / 16
    before; test_fp8_attention.py)."""
    D = 128
    sig = {"sm_scale": "fp32", "desc_q": f"tensordesc<fp8e4nv[128, {D}]>", "desc_k": f"tensordesc<fp8e4nv[128, {D}]>",
           "desc_v": f"tensordesc<fp8e4nv[{D}, 128]>", "desc_o": f"tensordesc<fp16[128, {D}]>", "N_CTX": "i32",
           "QScale": "*fp32", "KScale": "*fp32", "VScale": "*fp32"}
    ck = kernelc.compile(attention_fa3.attn_fwd_fa3_kernel, sig,
                         dict(BLOCK_M=128, BLOCK_N=128, HEAD_DIM=D, CAUSAL=False, FP8=True, KEY_ORDER=True),
                         target="sm_90a", num_warps=8, num_stages=2,
                         divisibility={k: 16 for k in sig if k != "sm_scale"})
    ops = _key_loop(ck.asm["sass"])
    count = lambda p: sum(o.startswith(p) for o in ops)  # noqa: E731
    assert ck.n_spills == 0
    assert count("SHFL.IDX") == 0 and count("PRMT") == 0 and count("SEL") == 0
    assert count("F2FP.SATFINITE.E4M3") == 32
    assert len(ops) <= 515, len(ops)
