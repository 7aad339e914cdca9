"""Issue 27, forward: the launch configs of ``examples/kernels/attention_fa3.py`` that the bench times as
variants (``bench/bench_attention.py``: FWD_VARIANTS, FWD_VARIANT_WHEN), compiled for sm_90a on CPU.

The 64-row, 4-warp configs exist so that several programs share an SM (docs/attention.md, "fp8 and head dim
64: what bounds a key block"): each must compile without spills and with registers and shared memory that
leave room for that many programs; the 256-key-block and extra-stage configs must fit and not spill.
"""
import pytest

import kernelc
from analyzer.occupancy import occupancy
from cubintools.target import parse_target
from examples.kernels import attention_fa3


def _compile(D, fp8, causal, BLOCK_M=128, BLOCK_N=128, num_warps=8, num_stages=2):
    dt = "fp8e4nv" if fp8 else "fp16"
    sig = {"sm_scale": "fp32", "desc_q": f"tensordesc<{dt}[{BLOCK_M}, {D}]>",
           "desc_k": f"tensordesc<{dt}[{BLOCK_N}, {D}]>",
           "desc_v": f"tensordesc<{dt}[{D}, {BLOCK_N}]>" if fp8 else f"tensordesc<{dt}[{BLOCK_N}, {D}]>",
           "desc_o": f"tensordesc<fp16[{BLOCK_M}, {D}]>", "N_CTX": "i32",
           "QScale": "*fp32", "KScale": "*fp32", "VScale": "*fp32"}
    return kernelc.compile(attention_fa3.attn_fwd_fa3_kernel, sig,
                           dict(BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N, HEAD_DIM=D, CAUSAL=causal, FP8=fp8,
                                EARLY_V=num_warps >= 8),  # as attention_fa3._launch
                           target="sm_90a", num_warps=num_warps, num_stages=num_stages,
                           divisibility={k: 16 for k in sig if k != "sm_scale"})


def _programs_per_sm(ck):
    return occupancy(ck.launch_warps, ck.n_regs, ck.shared, parse_target("sm_90a").limits).blocks_per_sm


M64 = dict(BLOCK_M=64, BLOCK_N=64, num_warps=4)
M64_N128 = dict(BLOCK_M=64, BLOCK_N=128, num_warps=4)


# (head dim, fp8, causal, config, programs an SM at least); CPU compile 2026-11-27: registers 98-191 a thread
@pytest.mark.parametrize("D,fp8,causal,cfg,programs", [
    (64, False, True, M64, 4),
    (128, False, True, M64, 2),
    (64, False, False, M64_N128, 2),
    (64, True, True, M64, 4),
    (128, True, False, M64, 3),
    (64, True, False, M64_N128, 3),
    (128, True, False, M64_N128, 2),
])
def test_64_row_configs_share_an_sm_without_spilling(D, fp8, causal, cfg, programs):
    ck = _compile(D, fp8, causal, **cfg)
    assert ck.n_spills == 0
    assert ck.launch_warps == 4  # no producer warp: the program's one warpgroup refills its own ring
    assert _programs_per_sm(ck) >= programs, (ck.n_regs, ck.shared)


@pytest.mark.parametrize("D,fp8,causal,cfg", [
    (128, True, False, dict(num_stages=3)),
    (128, True, True, dict(num_stages=4)),
    (128, True, False, dict(num_stages=4)),  # FP8_CONFIGS[(128, False)] since H10
    (64, False, True, dict(num_stages=4)),
    (64, True, False, dict(BLOCK_N=256, num_stages=3)),
])
def test_more_stages_and_256_key_blocks_fit(D, fp8, causal, cfg):
    ck = _compile(D, fp8, causal, **cfg)
    assert ck.n_spills == 0 and ck.launch_warps == 12
    assert ck.shared <= parse_target("sm_90a").limits.max_shared_per_block_optin


def test_256_key_blocks_spill_at_head_dim_128_in_fp8():
    """Why FWD_VARIANT_WHEN keeps fp8_fa3_bn256* to head dim 64: S is 128 fp32 registers a thread there."""
    assert _compile(128, True, False, BLOCK_N=256).n_spills > 0


def test_launch_config_table_and_overrides(monkeypatch):
    monkeypatch.setitem(attention_fa3.CONFIGS, (64, True), (64, 64, 4, 3))
    assert attention_fa3.config(64, True) == (64, 64, 4, 3)
    assert attention_fa3.config(64, True, BLOCK_N=128, num_stages=2) == (64, 128, 4, 2)
    assert attention_fa3.config(64, True, fp8=True) == attention_fa3.FP8_CONFIGS.get((64, True),
                                                                                     attention_fa3.DEFAULT_CONFIG)
    assert attention_fa3.config(128, False) == attention_fa3.CONFIGS.get((128, False), attention_fa3.DEFAULT_CONFIG)


def test_late_v_table_sets_early_v_off_where_it_says():
    """fp16 D=128 non-causal loads the last V block after the loop (LATE_V); causal and an explicit early_v keep
    the 8-warp default / the caller's choice (the launch's EARLY_V, before KEY_ORDER and LPT)."""
    import torch
    calls = []

    class Recorder:  # stands for the jitted kernel: records the launch arguments
        def __getitem__(self, grid):
            return lambda *a, **kw: calls.append(a)
    q = torch.zeros(1, 1, 128, 128, dtype=torch.float16)
    assert (128, False) in attention_fa3.LATE_V
    for causal, early_v, want in ((False, None, False), (True, None, True), (False, True, True)):
        attention_fa3.attention(q, q, q, causal=causal, kernel=Recorder(), early_v=early_v)
        assert calls[-1][-3] is want, (causal, early_v, calls[-1][-7:])
