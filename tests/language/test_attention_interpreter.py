"""Issue 27 on CPU: the attention forward with saved LSE, diagonal-only causal masking, head dim 256, fp8,
and the fused backward (dQ separate, atomic, ds and fused) in the interpreter, against torch autograd in fp32."""
import math

import pytest
import torch

from examples.kernels import attention as A
from examples.kernels import attention_bwd as B


@pytest.fixture(autouse=True)
def _interpret(monkeypatch):
    monkeypatch.setenv("KERNELC_INTERPRET", "1")


def _qkv(N, D, dtype, Z=1, H=2, seed=0):
    g = torch.Generator().manual_seed(seed)
    return [torch.randn(Z, H, N, D, generator=g).to(dtype) for _ in range(3)]


def _record_launches(monkeypatch):
    """Replace the backward's kernels by spies that record (name, grid, launch kwargs) instead of launching: a list."""
    seen = []

    class Record:
        def __init__(self, name):
            self.name = name

        def __getitem__(self, grid):
            return lambda *a, **kw: seen.append((self.name, grid, kw))
    for name in ("attn_bwd_preprocess_kernel", "attn_bwd_dkdv_kernel", "attn_bwd_dq_kernel", "attn_bwd_fused_kernel"):
        monkeypatch.setattr(B, name, Record(name))
    return seen


def _ref(q, k, v, causal, sm_scale=None):
    """fp32 attention, its base-2 log-sum-exp."""
    D = q.shape[-1]
    s = q.float() @ k.float().transpose(-1, -2) * (sm_scale if sm_scale is not None else D ** -0.5)
    if causal:
        N = q.shape[-2]
        s = s.masked_fill(torch.ones(N, N, dtype=torch.bool).triu(1), float("-inf"))
    return torch.softmax(s, -1) @ v.float(), torch.logsumexp(s, -1) / math.log(2)


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("N,D,blocks,fold", [(80, 16, dict(BLOCK_M=32, BLOCK_N=16), False), (64, 32, {}, False),
                                             (48, 256, {}, False), (80, 16, dict(BLOCK_M=32, BLOCK_N=16), True),
                                             (64, 32, {}, True), (48, 256, {}, True),
                                             # key blocks wider than row blocks: the causal diagonal block starts
                                             # left of the row block (and N ragged)
                                             (80, 16, dict(BLOCK_M=16, BLOCK_N=32, lpt=True), True),
                                             (96, 16, dict(BLOCK_M=16, BLOCK_N=64), False)])
def test_forward_saves_lse(N, D, blocks, fold, causal):
    q, k, v = _qkv(N, D, torch.float16)
    o, lse = A.attention_fwd(q, k, v, causal=causal, return_lse=True, fold_scale=fold, **blocks)
    ref, ref_lse = _ref(q, k, v, causal)
    torch.testing.assert_close(o.float(), ref, rtol=1e-2, atol=2e-3)
    torch.testing.assert_close(lse, ref_lse, rtol=1e-5, atol=1e-4)


@pytest.mark.parametrize("causal", [False, True])
def test_ds_mode_in_head_groups_and_its_fallback(causal, monkeypatch):
    # dq_mode="ds" with a workspace of one head's dS^T (the heads in 2 groups) gives what one group gives; at
    # N % 8 != 0 (no TMA descriptor over dS^T's rows) the mode is the separate pass, bit for bit
    q, k, v = _qkv(80, 16, torch.float16)
    do = torch.randn(q.shape, generator=torch.Generator().manual_seed(1)).to(torch.float16)
    o, lse = A.attention_fwd(q, k, v, causal, 0.25, return_lse=True)
    one = B.attention_bwd(do, q, k, v, o, lse, causal, 0.25, dq_mode="ds")
    monkeypatch.setattr(B, "DS_WORKSPACE_BYTES", 80 * 80 * 2)
    _, steps = B.attention_bwd_steps(do, q, k, v, o, lse, causal, 0.25, dq_mode="ds")
    assert [n for n, _ in steps] == ["preprocess", "dkdv_dq"]
    grouped = B.attention_bwd(do, q, k, v, o, lse, causal, 0.25, dq_mode="ds")
    for a, b in zip(one, grouped):
        assert torch.equal(a, b)
    q, k, v, do = (t[:, :, :76] for t in (q, k, v, do))
    o, lse = A.attention_fwd(q, k, v, causal, 0.25, return_lse=True)
    ds = B.attention_bwd(do, q, k, v, o, lse, causal, 0.25, dq_mode="ds")
    sep = B.attention_bwd(do, q, k, v, o, lse, causal, 0.25)
    for a, b in zip(ds, sep):
        assert torch.equal(a, b)


@pytest.mark.parametrize("causal", [False, True])
def test_ds_with_its_tiles_stored_contiguously_gives_the_same_grads(causal):
    # DS_TILED: dS^T tile by tile (three key tiles of 32 x two query steps of 16, heads in groups of one), the dQ GEMM
    # reading them back by tile: the same grads bit for bit; N not a multiple of the key block: the [N, N] layout
    q, k, v = _qkv(96, 16, torch.float16)
    do = torch.randn(q.shape, generator=torch.Generator().manual_seed(1)).to(torch.float16)
    o, lse = A.attention_fwd(q, k, v, causal, 0.25, return_lse=True)
    cfg = dict(BLOCK_M=16, BLOCK_N=32)
    flat = B.attention_bwd(do, q, k, v, o, lse, causal, 0.25, dq_mode="ds", dkdv_config=cfg,
                           dq_config=dict(BLOCK_M=32, BLOCK_N=16))  # the same key steps as the tiled GEMM's
    for ws in (None, 96 * 96 * 2):
        tiled = B.attention_bwd(do, q, k, v, o, lse, causal, 0.25, dq_mode="ds", dkdv_config=dict(cfg, DS_TILED=True),
                                dq_config=dict(BLOCK_M=16, BLOCK_N=16), ds_workspace_bytes=ws)
        for a, b in zip(flat, tiled):
            assert torch.equal(a, b)
    _, steps = B.attention_bwd_steps(do[:, :, :80], q[:, :, :80], k[:, :, :80], v[:, :, :80], o[:, :, :80],
                                     lse[:, :, :80].contiguous(), causal, 0.25, dq_mode="ds",
                                     dkdv_config=dict(cfg, DS_TILED=True))
    assert len(steps) == 3  # 80 = 2.5 key blocks: not tiled, and ran (no error about the GEMM's blocks)
    for _, launch in steps:
        launch()
    with pytest.raises(ValueError, match="DS_TILED"):
        B.attention_bwd(do, q, k, v, o, lse, causal, 0.25, dq_mode="ds", dkdv_config=dict(cfg, DS_TILED=True),
                        dq_config=dict(BLOCK_M=32, BLOCK_N=16))


@pytest.mark.parametrize("causal", [False, True])
def test_ds_with_its_rows_by_descriptors_gives_the_same_grads(causal):
    # ROWS_TMA: the LSE and delta rows through 1-D descriptors (zero-padded past N: 88 = 5.5 query steps of 16), in
    # head groups of one too; the flag reaches the launch only where N % 4 == 0 (the rows' 16-byte alignment)
    q, k, v = _qkv(88, 16, torch.float16)
    do = torch.randn(q.shape, generator=torch.Generator().manual_seed(1)).to(torch.float16)
    o, lse = A.attention_fwd(q, k, v, causal, 0.25, return_lse=True)
    cfg = dict(BLOCK_M=16, BLOCK_N=32)
    base = B.attention_bwd(do, q, k, v, o, lse, causal, 0.25, dq_mode="ds", dkdv_config=cfg)
    for ws in (None, 88 * 88 * 2):
        rows = B.attention_bwd(do, q, k, v, o, lse, causal, 0.25, dq_mode="ds", dkdv_config=dict(cfg, ROWS_TMA=True),
                               ds_workspace_bytes=ws)
        for a, b in zip(base, rows):
            assert torch.equal(a, b)
    seen = {}

    class Spy:  # the dK/dV kernel's launch: records its constexprs
        def __getitem__(self, grid):
            return lambda *a, **kw: seen.update(kw)

    for n, want in ((88, True), (86, False)):
        seen.clear()
        _, steps = B.attention_bwd_steps(do[:, :, :n], q[:, :, :n], k[:, :, :n], v[:, :, :n], o[:, :, :n],
                                         lse[:, :, :n].contiguous(), causal, 0.25, dq_mode="ds",
                                         dkdv_config=dict(cfg, ROWS_TMA=True), kernels=dict(dkdv=Spy()))
        for name, launch in steps:
            if name != "preprocess":
                launch()
                break
        assert seen.get("ROWS_TMA") is want


@pytest.mark.parametrize("causal", [False, True])
def test_ds_in_one_loop_gives_the_same_grads(causal):
    # ONE_LOOP (att26): causal's diagonal and the blocks below it in one loop, masked every trip: the same trips in the
    # same order, so the same grads bit for bit (with ROWS_TMA, in head groups of one too; non-causal it changes
    # nothing); ragged N (88 = 5.5 query steps, 2.75 key blocks)
    q, k, v = _qkv(88, 16, torch.float16)
    do = torch.randn(q.shape, generator=torch.Generator().manual_seed(1)).to(torch.float16)
    o, lse = A.attention_fwd(q, k, v, causal, 0.25, return_lse=True)
    cfg = dict(BLOCK_M=16, BLOCK_N=32)
    for extra in ({}, dict(ROWS_TMA=True)):
        base = B.attention_bwd(do, q, k, v, o, lse, causal, 0.25, dq_mode="ds", dkdv_config=dict(cfg, **extra))
        for ws in (None, 88 * 88 * 2):
            one = B.attention_bwd(do, q, k, v, o, lse, causal, 0.25, dq_mode="ds",
                                  dkdv_config=dict(cfg, ONE_LOOP=True, **extra), ds_workspace_bytes=ws)
            for a, b in zip(base, one):
                assert torch.equal(a, b)


@pytest.mark.parametrize("N", [200, 256])
def test_d128_causal_default_gives_the_two_loop_grads(N):
    # (att27) ds's D=128 causal default is one loop with a producer warpgroup and the rows by descriptors
    # (DS_ONE_LOOP, DS_WS, DS_ROWS_TMA): the launch carries all three, and its grads are the two-loop kernel's
    # (ONE_LOOP=False: the default before) bit for bit, in one head group and in groups of one head; ragged N (200)
    import kernelc
    q, k, v = _qkv(N, 128, torch.float16)
    do = torch.randn(q.shape, generator=torch.Generator().manual_seed(1)).to(torch.float16)
    o, lse = A.attention_fwd(q, k, v, True, 0.1, return_lse=True)
    old = B.attention_bwd(do, q, k, v, o, lse, True, 0.1, dkdv_config=dict(ONE_LOOP=False))
    for ws in (None, N * N * 2):
        seen = []
        spy = _Spy(kernelc.jit(B.attn_bwd_dkdv_kernel.fn), seen)
        new = B.attention_bwd(do, q, k, v, o, lse, True, 0.1, kernels={"dkdv": spy}, ds_workspace_bytes=ws)
        assert {(kw["ONE_LOOP"], kw["WS"], kw["ROWS_TMA"], kw["STORE_DS"]) for kw in seen} == {(True, 1, True, True)}
        assert len(seen) == (1 if ws is None else 2)
        for a, b in zip(new, old):
            assert torch.equal(a, b)


@pytest.mark.parametrize("causal", [False, True])
def test_ds_with_a_bounded_workspace_gives_the_same_grads(causal):
    # dq_mode="ds" with ds_workspace_bytes of one head (heads in groups): the same dS^T tiles, so the same grads
    # bit for bit, and close to torch's
    q, k, v = _qkv(80, 16, torch.float16)
    do = torch.randn(q.shape, generator=torch.Generator().manual_seed(1)).to(torch.float16)
    o, lse = A.attention_fwd(q, k, v, causal, 0.25, return_lse=True)
    cfg = dict(BLOCK_M=16, BLOCK_N=32)
    after = B.attention_bwd(do, q, k, v, o, lse, causal, 0.25, dq_mode="ds", dkdv_config=cfg)
    first = B.attention_bwd(do, q, k, v, o, lse, causal, 0.25, dq_mode="ds", dkdv_config=cfg,
                            ds_workspace_bytes=80 * 80 * 2)
    _, steps = B.attention_bwd_steps(do, q, k, v, o, lse, causal, 0.25, dq_mode="ds", ds_workspace_bytes=80 * 80 * 2)
    assert [n for n, _ in steps] == ["preprocess", "dkdv_dq"]
    for a, b in zip(after, first):
        assert torch.equal(a, b)
    qf, kf, vf = (t.detach().float().requires_grad_() for t in (q, k, v))
    torch.nn.functional.scaled_dot_product_attention(qf, kf, vf, is_causal=causal, scale=0.25).backward(do.float())
    for a, b in zip(after, (qf.grad, kf.grad, vf.grad)):
        torch.testing.assert_close(a.float(), b, rtol=2e-2, atol=4e-3)


def test_ds_workspace_bound_by_a_multiple_of_dq(monkeypatch):
    # DS_WORKSPACE_X: the budget is that many times dQ's bytes (here 2 x 2 x 64 x 16 x 2 = 8 KiB: one 64 x 64 head of
    # dS^T, so heads in groups of one), the grads those of one group; ds_workspace_bytes= overrides it
    q, k, v = _qkv(64, 16, torch.float16)
    do = torch.randn(q.shape, generator=torch.Generator().manual_seed(1)).to(torch.float16)
    o, lse = A.attention_fwd(q, k, v, False, 0.25, return_lse=True)
    one = B.attention_bwd(do, q, k, v, o, lse, False, 0.25, dq_mode="ds")
    monkeypatch.setattr(B, "DS_WORKSPACE_X", {16: 2})
    assert B._ds_budget(q) == 2 * q.numel() * 2
    _, steps = B.attention_bwd_steps(do, q, k, v, o, lse, False, 0.25, dq_mode="ds")
    assert [n for n, _ in steps] == ["preprocess", "dkdv_dq"]
    _, steps = B.attention_bwd_steps(do, q, k, v, o, lse, False, 0.25, dq_mode="ds", ds_workspace_bytes=1 << 20)
    assert [n for n, _ in steps] == ["preprocess", "dkdv", "dq"]
    for a, b in zip(one, B.attention_bwd(do, q, k, v, o, lse, False, 0.25, dq_mode="ds")):
        assert torch.equal(a, b)
    # ds as the default mode takes whole heads only: under a bound below one head's dS^T it runs the separate pass
    monkeypatch.setattr(B, "DEFAULT_DQ_MODES", {16: "ds"})
    assert all(torch.equal(a, b) for a, b in zip(one, B.attention_bwd(do, q, k, v, o, lse, False, 0.25)))
    monkeypatch.setattr(B, "DS_WORKSPACE_X", {16: 1})
    sep = B.attention_bwd(do, q, k, v, o, lse, False, 0.25, dq_mode="separate")
    assert not all(torch.equal(a, b) for a, b in zip(one, sep))  # the two modes' sums round apart here
    assert all(torch.equal(a, b) for a, b in zip(sep, B.attention_bwd(do, q, k, v, o, lse, False, 0.25)))


def test_the_default_dq_mode_follows_the_head_dim_table(monkeypatch):
    # dq_mode=None runs DEFAULT_DQ_MODES[head dim] (separate where the table has none)
    q, k, v = _qkv(64, 16, torch.float16)
    do = torch.randn(q.shape, generator=torch.Generator().manual_seed(1)).to(torch.float16)
    o, lse = A.attention_fwd(q, k, v, True, 0.25, return_lse=True)
    monkeypatch.setattr(B, "DEFAULT_DQ_MODES", {})
    assert B.default_dq_mode(16) == "separate"
    sep = B.attention_bwd(do, q, k, v, o, lse, True, 0.25, dq_mode="separate")
    for a, b in zip(B.attention_bwd(do, q, k, v, o, lse, True, 0.25), sep):
        assert torch.equal(a, b)
    monkeypatch.setattr(B, "DEFAULT_DQ_MODES", {(16, False): "fused", 16: "ds"})  # (head dim, causal) first
    assert B.default_dq_mode(16, False) == "fused" and B.default_dq_mode(16, True) == "ds"
    monkeypatch.setattr(B, "DEFAULT_DQ_MODES", {16: "ds"})
    assert B.default_dq_mode(16) == "ds" and B.default_dq_mode(32) == "separate"
    ds = B.attention_bwd(do, q, k, v, o, lse, True, 0.25, dq_mode="ds")
    seen = []
    monkeypatch.setattr(B, "attn_bwd_dkdv_kernel", _Spy(B.attn_bwd_dkdv_kernel, seen))
    got = B.attention_bwd(do, q, k, v, o, lse, True, 0.25)
    for a, b in zip(got, ds):
        assert torch.equal(a, b)
    assert seen and seen[-1]["STORE_DS"] is True  # the dK/dV kernel launched storing dS^T


def test_separate_pass_takes_its_tail_tables(monkeypatch):
    # (d64s27) DKDV_TAIL / DQ_TAIL by (head dim, causal): TAIL=True to the dK/dV / dQ kernel of the separate pass, in
    # the launch plan and the general path alike, not for the other mask; grads bit for bit those of TAIL asked for
    q, k, v = _qkv(64, 16, torch.float16)
    do = torch.randn(q.shape, generator=torch.Generator().manual_seed(1)).to(torch.float16)
    o, lse = A.attention_fwd(q, k, v, False, 0.25, return_lse=True)
    asked = B.attention_bwd(do, q, k, v, o, lse, False, 0.25, dq_mode="separate", dkdv_config=dict(TAIL=True),
                            dq_config=dict(TAIL=True))
    monkeypatch.setattr(B, "DKDV_TAIL", {(16, False): True})
    monkeypatch.setattr(B, "DQ_TAIL", {(16, False): True})
    B.clear_plans()
    for name in ("attn_bwd_dkdv_kernel", "attn_bwd_dq_kernel"):
        seen = []
        monkeypatch.setattr(B, name, _Spy(getattr(B, name), seen))
        for causal in (False, True):
            seen.clear()
            got = B.attention_bwd(do, q, k, v, o, lse, causal, 0.25, dq_mode="separate")  # the plan
            out, steps = B.attention_bwd_steps(do, q, k, v, o, lse, causal, 0.25, dq_mode="separate")
            for _, launch in steps:
                launch()
            assert [kw.get("TAIL") for kw in seen] == ([True, True] if not causal else [None, None]), (name, seen)
            if not causal:
                for a, b, c in zip(got, out(), asked):
                    assert torch.equal(a, c) and torch.equal(b, c)
        monkeypatch.setattr(B, name, getattr(B, name).kernel)  # the real kernel back for the next spy
    B.clear_plans()


@pytest.mark.parametrize("N,causal,mode", [(8192, False, "separate"), (16384, False, "separate"),
                                           (8188, False, "fused"), (4096, False, "fused"), (16384, True, "separate"),
                                           (32768, True, "separate"), (16380, True, "fused"), (8192, True, "fused")])
def test_the_d64_default_and_its_launches(N, causal, mode, monkeypatch):
    # (d64s27) the shipped tables at D=64: from N 8192 on, non-causal, the separate pass with its dK/dV kernel at
    # (64, 128, 8, 3) with a producer warpgroup (WS=1), its rows ringed by TMA and its async tail, and its dQ kernel at
    # (128, 128, 8, 3) with its async tail; shorter, the fused kernel. (d64c28) Causal from N 16384 on the same with the
    # dK/dV kernel's two loops and the producer for the unmasked one (WS=2), its grids longest first across the 2 heads
    # (GROUP 2: CAUSAL_GROUP's 8 cut to the heads); shorter, the fused kernel. The launches are recorded, not run
    # (spies without a launch), so the lengths cost nothing here.
    assert B.default_dq_mode(64, causal, N) == mode
    seen = _record_launches(monkeypatch)
    B.clear_plans()
    q = torch.zeros(1, 2, N, 64, dtype=torch.float16)
    lse = torch.zeros(1, 2, N, dtype=torch.float32)
    B.attention_bwd(q, q, q, q, q, lse, causal, 0.125)  # through the launch plan
    names = [n for n, _, _ in seen]
    if mode == "fused":
        assert names == ["attn_bwd_preprocess_kernel", "attn_bwd_fused_kernel"], names
    else:
        assert names == ["attn_bwd_preprocess_kernel", "attn_bwd_dkdv_kernel", "attn_bwd_dq_kernel"], names
        (_, g1, k1), (_, g2, k2) = seen[1:]
        assert (k1["BLOCK_M"], k1["BLOCK_N"], k1["num_warps"], k1["num_stages"]) == (64, 128, 8, 3)
        ws = 2 if causal else 1
        assert (k1["WS"], k1["ROWS_TMA"], k1["TAIL"], k1["EVEN_M"]) == (ws, True, True, True), k1
        assert k1.get("ONE_LOOP") is None and k1["GROUP"] == (2 if causal else 0), k1  # causal: the two loops
        assert (k2["BLOCK_M"], k2["BLOCK_N"], k2["num_warps"], k2["num_stages"], k2["TAIL"]) == (128, 128, 8, 3, True)
        grid = (2 * N // 128, 1, 1) if causal else (N // 128, 2, 1)
        assert g1 == grid and g2 == grid, (g1, g2)
        # the general path (attention_bwd_steps) launches the same
        _, steps = B.attention_bwd_steps(q, q, q, q, q, lse, causal, 0.125)
        seen.clear()
        for _, launch in steps:
            launch()
        general = [(n, g, {k: v for k, v in kw.items()}) for n, g, kw in seen]
        assert [(n, g) for n, g, _ in general[1:]] == [("attn_bwd_dkdv_kernel", g1), ("attn_bwd_dq_kernel", g2)]
        for (_, _, a), b in zip(general[1:], (k1, k2)):
            assert {k: a.get(k) for k in b} == b
    B.clear_plans()


def test_the_default_dq_mode_from_a_sequence_length_on(monkeypatch):
    # (d64s27) DEFAULT_DQ_MODES_LONG: (head dim, causal) -> (N, mode) over DEFAULT_DQ_MODES from N_CTX = N on, the
    # other mask untouched; read by the launch plan (no configs) and the general path alike
    monkeypatch.setattr(B, "DEFAULT_DQ_MODES", {16: "fused"})
    monkeypatch.setattr(B, "DEFAULT_DQ_MODES_LONG", {(16, False): (64, "separate")})
    assert [B.default_dq_mode(16, False, n) for n in (None, 48, 63, 64, 200)] == ["fused"] * 3 + ["separate"] * 2
    assert B.default_dq_mode(16, True, 200) == "fused" and B.default_dq_mode(32, False, 200) == "separate"
    B.clear_plans()
    for n, mode in ((48, "fused"), (64, "separate")):
        q, k, v = _qkv(n, 16, torch.float16)
        do = torch.randn(q.shape, generator=torch.Generator().manual_seed(1)).to(torch.float16)
        for causal in (False, True):
            want = mode if not causal else "fused"
            o, lse = A.attention_fwd(q, k, v, causal, 0.25, return_lse=True)
            ref = B.attention_bwd(do, q, k, v, o, lse, causal, 0.25, dq_mode=want)
            seen = []
            monkeypatch.setattr(B, "attn_bwd_fused_kernel", _Spy(B.attn_bwd_fused_kernel, seen))
            plan = B.attention_bwd(do, q, k, v, o, lse, causal, 0.25)
            out, steps = B.attention_bwd_steps(do, q, k, v, o, lse, causal, 0.25)
            assert [name for name, _ in steps][1:] == (["dkdv_dq"] if want == "fused" else ["dkdv", "dq"])
            for _, launch in steps:
                launch()
            for a, b, c in zip(plan, out(), ref):
                assert torch.equal(a, c) and torch.equal(b, c), (n, causal)
            # the fused kernel launched by both paths (the plan's and the steps') or by neither
            assert len(seen) == (2 if want == "fused" else 0), (n, causal)
            monkeypatch.undo()
            monkeypatch.setattr(B, "DEFAULT_DQ_MODES", {16: "fused"})
            monkeypatch.setattr(B, "DEFAULT_DQ_MODES_LONG", {(16, False): (64, "separate")})
    B.clear_plans()


class _Spy:
    """A kernel whose launches record their keyword arguments."""

    def __init__(self, kernel, seen):
        self.kernel, self.seen = kernel, seen

    def __getitem__(self, grid):
        def launch(*a, **kw):
            self.seen.append(kw)
            return self.kernel[grid](*a, **kw)
        return launch


def test_causal_dq_programs_in_either_order_give_the_same_dq():
    # the dQ kernel's LPT order (causal: the last, longest query block first) against launch order, at a ragged
    # length with 3 query blocks: every program's dQ is the same, whichever program id computes it
    q, k, v = _qkv(80, 16, torch.float16)
    do = torch.randn(q.shape, generator=torch.Generator().manual_seed(1)).to(torch.float16)
    o, lse = A.attention_fwd(q, k, v, True, 0.25, return_lse=True)
    cfg = dict(BLOCK_M=32, BLOCK_N=16)
    lpt = B.attention_bwd(do, q, k, v, o, lse, True, 0.25, dq_config=cfg)[0]
    ordered = B.attention_bwd(do, q, k, v, o, lse, True, 0.25, dq_config=dict(cfg, LPT=False))[0]
    assert torch.equal(lpt, ordered)
    qf, kf, vf = (t.detach().float().requires_grad_() for t in (q, k, v))
    torch.nn.functional.scaled_dot_product_attention(qf, kf, vf, is_causal=True, scale=0.25).backward(do.float())
    torch.testing.assert_close(lpt.float(), qf.grad, rtol=2e-2, atol=4e-3)


@pytest.mark.parametrize("mode", ["separate", "ds"])
def test_causal_programs_longest_first_across_head_groups_give_the_same_grads(mode):
    # GROUP: the causal dK/dV and dQ grids ordered longest first across groups of heads (4 heads in groups of 2;
    # 3 asked runs 2, the largest divisor of 4 below it) -- every block of every head is still computed once
    q, k, v = _qkv(80, 16, torch.float16, H=4)
    do = torch.randn(q.shape, generator=torch.Generator().manual_seed(1)).to(torch.float16)
    o, lse = A.attention_fwd(q, k, v, True, 0.25, return_lse=True)
    c1, c2 = dict(BLOCK_M=16, BLOCK_N=32), dict(BLOCK_M=32, BLOCK_N=16)
    base = B.attention_bwd(do, q, k, v, o, lse, True, 0.25, dq_mode=mode, dkdv_config=c1, dq_config=c2)
    grouped = B.attention_bwd(do, q, k, v, o, lse, True, 0.25, dq_mode=mode, dkdv_config=dict(c1, GROUP=2),
                              dq_config=dict(c2, GROUP=3))
    for x, y in zip(base, grouped):
        assert torch.equal(x, y)
    qf, kf, vf = (t.detach().float().requires_grad_() for t in (q, k, v))
    torch.nn.functional.scaled_dot_product_attention(qf, kf, vf, is_causal=True, scale=0.25).backward(do.float())
    for x, y in zip(grouped, (qf.grad, kf.grad, vf.grad)):
        torch.testing.assert_close(x.float(), y, rtol=2e-2, atol=4e-3)


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("dq_mode", ["separate", "atomic", "ds", "fused", "flat"])
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("N,D", [(80, 16), (64, 32)])
def test_backward_matches_torch_autograd(N, D, dtype, dq_mode, causal):
    q, k, v = (t.requires_grad_() for t in _qkv(N, D, dtype))
    do = torch.randn(q.shape, generator=torch.Generator().manual_seed(1)).to(dtype)
    o = B.attention(q, k, v, causal, dq_mode=dq_mode)
    o.backward(do)
    qf, kf, vf = (t.detach().float().requires_grad_() for t in (q, k, v))
    ref = torch.nn.functional.scaled_dot_product_attention(qf, kf, vf, is_causal=causal)
    ref.backward(do.float())
    tol = dict(rtol=2e-2, atol=4e-3) if dtype == torch.float16 else dict(rtol=5e-2, atol=3e-2)
    torch.testing.assert_close(o.float(), ref, **tol)
    for name, ours, want in (("dq", q.grad, qf.grad), ("dk", k.grad, kf.grad), ("dv", v.grad, vf.grad)):
        assert ours.dtype == dtype, name
        torch.testing.assert_close(ours.float(), want, **tol, msg=lambda m: f"{name}: {m}")


def test_backward_of_strided_inputs_and_custom_scale():
    # q, k, v as [Z, H, N, D] views of [Z, N, H, D] storage (what a fused QKV projection gives)
    base = [t.transpose(1, 2).contiguous().transpose(1, 2).requires_grad_() for t in _qkv(40, 16, torch.float16)]
    o = B.attention(*base, causal=True, sm_scale=0.3)
    o.float().square().sum().backward()
    ref_in = [t.detach().float().requires_grad_() for t in base]
    ref = torch.nn.functional.scaled_dot_product_attention(*ref_in, is_causal=True, scale=0.3)
    ref.square().sum().backward()
    for t, r in zip(base, ref_in):
        torch.testing.assert_close(t.grad.float(), r.grad, rtol=2e-2, atol=1e-2)


@pytest.mark.parametrize("fold", [False, True])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("bm,bn", [(32, 16), (16, 32)])
def test_fp8_forward_against_the_same_quantised_inputs(causal, fold, bm, bn):
    q, k, v = _qkv(80, 32, torch.float16)
    (q8, qs), (k8, ks), (v8, vs) = (A.quantize_fp8(t) for t in (q, k, v))
    # lpt (causal row blocks last first) with the wide key blocks
    o = A.attention_fp8(q8, k8, v8.transpose(-1, -2).contiguous(), qs, ks, vs, causal=causal, BLOCK_M=bm, BLOCK_N=bn,
                        fold_scale=fold, lpt=bm < bn)
    assert o.dtype == torch.float16
    ref, _ = _ref(q8.float() * qs, k8.float() * ks, v8.float() * vs, causal)
    # P (in [0, 1]) is rounded to e4m3 for P V: a relative error of at most 2^-4 per weight, while the row sum l
    # uses the exact P, so |O - ref| <= 2^-4 * max|V| (plus fp16 output rounding)
    vmax = (v8.float() * vs).abs().max().item()
    err = (o.float() - ref).abs()
    assert err.max().item() <= 2 ** -4 * vmax + 1e-2, err.max().item()
    assert err.mean().item() <= 2 ** -8 * vmax, err.mean().item()  # rounding errors average out across a row


def test_bad_inputs_are_clear_errors():
    q, k, v = _qkv(32, 16, torch.float16)
    with pytest.raises(TypeError, match="float16/bfloat16"):
        A.attention_fwd(q.float(), k.float(), v.float())
    q48 = torch.zeros(1, 1, 32, 48, dtype=torch.float16)
    with pytest.raises(ValueError, match="head dim 48 is not supported"):
        A.attention_fwd(q48, q48, q48)
    with pytest.raises(ValueError, match="BLOCK_M .* and BLOCK_N .* divide one another"):
        A.attention_fwd(q, k, v, causal=True, BLOCK_M=32, BLOCK_N=48)
    with pytest.raises(TypeError, match="float8_e4m3fn"):
        A.attention_fp8(q, k, v, *(torch.ones(1),) * 3)
    with pytest.raises(ValueError, match="dq_mode"):
        B.attention_bwd(q, q, k, v, q, q, False, 1.0, dq_mode="fast")


@pytest.mark.parametrize("causal,N,BLOCK_N", [(False, 96, 32), (True, 96, 32), (False, 128, 64)])
def test_fa3_order_fp8_forward_against_the_same_quantised_inputs(causal, N, BLOCK_N):
    # attention_fa3.attention_fp8: V^T through its own descriptor, the scales from QScale, KScale, VScale; same bound as above.
    # BLOCK_N = 2 * BLOCK_M: the shape of the 256-key-block variant the bench times at head dim 64
    from examples.kernels import attention_fa3 as AF
    q, k, v = _qkv(N, 32, torch.float16)
    (q8, qs), (k8, ks), (v8, vs) = (A.quantize_fp8(t) for t in (q, k, v))
    o = AF.attention_fp8(q8, k8, v8.transpose(-1, -2).contiguous(), qs, ks, vs, causal=causal, BLOCK_M=32,
                         BLOCK_N=BLOCK_N)
    assert o.dtype == torch.float16
    ref, _ = _ref(q8.float() * qs, k8.float() * ks, v8.float() * vs, causal)
    vmax = (v8.float() * vs).abs().max().item()
    err = (o.float() - ref).abs()
    assert err.max().item() <= 2 ** -4 * vmax + 1e-2, err.max().item()
    assert err.mean().item() <= 2 ** -8 * vmax, err.mean().item()
    with pytest.raises(ValueError, match="V transposed"):
        AF.attention_fp8(q8, k8, v8, qs, ks, vs)


def test_launch_plans_take_each_calls_tensors_scales_and_options():
    # the forwards cache per (shapes, strides, dtypes, options) what a launch needs: a second call of the same shapes
    # must read its own tensors and scales (never the first call's), and another option must get its own plan
    q, k, v = _qkv(48, 16, torch.float16)
    (q8, qs), (k8, ks), (v8, vs) = (A.quantize_fp8(t) for t in (q, k, v))
    v8t = v8.transpose(-1, -2).contiguous()
    vmax = (v8.float() * vs).abs().max().item()
    for causal in (False, True, False):
        for scale_q, scale_v in ((qs, vs), (qs * 2, vs * 0.5), (float(qs) * 3, vs.double().reshape(()))):
            o = A.attention_fp8(q8, k8, v8t, scale_q, ks, scale_v, causal=causal, BLOCK_M=16, BLOCK_N=16)
            ref, _ = _ref(q8.float() * float(scale_q), k8.float() * ks, v8.float() * float(scale_v), causal)
            assert (o.float() - ref).abs().max().item() <= 2 ** -4 * vmax * 2 + 1e-2
        o16 = A.attention_fwd(q * 0.5, k, v, causal=causal, BLOCK_M=16, BLOCK_N=16)
        torch.testing.assert_close(o16.float(), _ref(q * 0.5, k, v, causal)[0], rtol=1e-2, atol=2e-3)
    # the output keeps q's layout (torch.empty_like), and a contiguous q of the same shape gets its own plan
    qt = q.transpose(1, 2).contiguous().transpose(1, 2)  # [Z, H, N, D] with the heads innermost but D
    for qq in (qt, q, qt):
        o, lse = A.attention_fwd(qq, k, v, return_lse=True, BLOCK_M=16, BLOCK_N=16)
        assert o.stride() == qq.stride()
        ref, ref_lse = _ref(q, k, v, False)
        torch.testing.assert_close(o.float(), ref, rtol=1e-2, atol=2e-3)
        torch.testing.assert_close(lse, ref_lse, rtol=1e-3, atol=1e-3)
    A.clear_plans()
    assert not A._PLANS
    # the FA3-order forwards' plans: descriptors copied from the plan's templates onto each call's tensors
    from examples.kernels import attention_fa3 as AF
    for causal in (False, True):
        for scale_q, scale_v, mul in ((qs, vs, 1.0), (qs * 2, vs * 0.5, 0.5)):
            o = AF.attention_fp8(q8, k8, v8t, scale_q, ks, scale_v, causal=causal, BLOCK_M=16, BLOCK_N=16)
            ref, _ = _ref(q8.float() * float(scale_q), k8.float() * ks, v8.float() * float(scale_v), causal)
            assert (o.float() - ref).abs().max().item() <= 2 ** -4 * vmax * 2 + 1e-2
            o16 = AF.attention(q * mul, k, v, causal=causal, BLOCK_M=16, BLOCK_N=16)
            torch.testing.assert_close(o16.float(), _ref(q * mul, k, v, causal)[0], rtol=1e-2, atol=2e-3)
    assert all(d.base is None for plan in AF._PLANS.values() for d in plan.descs)  # no tensor kept alive
    AF.clear_plans()


def test_the_fold_default_and_a_negative_scale():
    # FOLD_SCALE is on by default (A.FOLD_SCALE_OFF is empty); with sm_scale <= 0 the host keeps the unfolded
    # form even when asked (the row max of the raw scores times a negative scale is not the scaled row max)
    assert A._fold(None, 128, False, True) and A._fold(None, 64, False, True) and A._fold(None, 64, True, False)
    assert A._fold(None, 64, True, True) and A._fold(True, 64, True, True) and not A._fold(False, 128, False, False)
    assert not A._fold(False, 64, True, True)
    q, k, v = _qkv(80, 16, torch.float16)
    o = A.attention_fwd(q, k, v, causal=False, sm_scale=-0.3, fold_scale=True, BLOCK_M=32, BLOCK_N=16)
    ref, _ = _ref(q, k, v, False, sm_scale=-0.3)
    torch.testing.assert_close(o.float(), ref, rtol=1e-2, atol=2e-3)


def test_causal_grids_group_heads_by_a_divisor_and_only_when_causal():
    assert B._grid(32, 128, True, dict(GROUP=8)) == ((256, 16, 1), dict(GROUP=8))
    assert B._grid(32, 12, True, dict(GROUP=8)) == ((192, 2, 1), dict(GROUP=6))
    assert B._grid(32, 7, True, dict(GROUP=8)) == ((224, 1, 1), dict(GROUP=7))
    assert B._grid(32, 128, False, dict(GROUP=8)) == ((32, 128, 1), dict(GROUP=0))
    assert B._grid(32, 128, True, dict(GROUP=8, LPT=False)) == ((32, 128, 1), dict(GROUP=0, LPT=False))
    assert B._grid(32, 128, True, {}) == ((32, 128, 1), dict(GROUP=0))


def test_the_causal_group_table_sets_the_launches_group(monkeypatch):
    # CAUSAL_GROUP[(head dim, dq mode)] = (dK/dV's, dQ's GROUP): the causal launches get it, non-causal ones 0;
    # an explicit config's GROUP wins
    q, k, v = _qkv(64, 16, torch.float16, H=4)
    do = torch.randn(q.shape, generator=torch.Generator().manual_seed(1)).to(torch.float16)
    o, lse = A.attention_fwd(q, k, v, True, 0.25, return_lse=True)
    base = B.attention_bwd(do, q, k, v, o, lse, True, 0.25)
    monkeypatch.setattr(B, "CAUSAL_GROUP", {(16, "separate"): (2, 4)})
    seen1, seen2 = [], []
    monkeypatch.setattr(B, "attn_bwd_dkdv_kernel", _Spy(B.attn_bwd_dkdv_kernel, seen1))
    monkeypatch.setattr(B, "attn_bwd_dq_kernel", _Spy(B.attn_bwd_dq_kernel, seen2))
    for a, b in zip(B.attention_bwd(do, q, k, v, o, lse, True, 0.25), base):
        assert torch.equal(a, b)
    assert (seen1[-1]["GROUP"], seen2[-1]["GROUP"]) == (2, 4)
    B.attention_bwd(do, q, k, v, o, lse, True, 0.25, dkdv_config=dict(GROUP=1))
    assert (seen1[-1]["GROUP"], seen2[-1]["GROUP"]) == (1, 4)
    B.attention_bwd(do, q, k, v, o, lse, False, 0.25)
    assert (seen1[-1]["GROUP"], seen2[-1]["GROUP"]) == (0, 0)
    B.attention_bwd(do, q, k, v, o, lse, True, 0.25, dq_mode="ds")
    assert (seen1[-1]["GROUP"], seen2[-1]["GROUP"]) == (0, 0)


@pytest.mark.parametrize("causal", [False, True])
def test_fused_mode_with_descriptor_loads_in_its_dq_loop(causal):
    # dq_mode="fused" with the dQ loop's K and V through descriptors (DESC) at a ragged length: the separate
    # pass's grads at the same blocks, bit for bit
    q, k, v = _qkv(80, 16, torch.float16)
    do = torch.randn(q.shape, generator=torch.Generator().manual_seed(1)).to(torch.float16)
    o, lse = A.attention_fwd(q, k, v, causal, 0.25, return_lse=True)
    (bm1, bn1), (bm2, bn2), _, _ = B.FUSED_CONFIGS[16]
    sep = B.attention_bwd(do, q, k, v, o, lse, causal, 0.25, dkdv_config=dict(BLOCK_M=bm1, BLOCK_N=bn1),
                          dq_config=dict(BLOCK_M=bm2, BLOCK_N=bn2))
    for desc in (False, True):
        got = B.attention_bwd(do, q, k, v, o, lse, causal, 0.25, dq_mode="fused", dq_config=dict(DESC=desc))
        for a, b in zip(got, sep):
            assert torch.equal(a, b)


def test_fused_mode_launches_the_kernel_it_is_given():
    # attention_bwd(kernels={"fused": ...}): the bench's compile-knob A/B (fused_tail) launches its own copy of the
    # fused kernel, with the default's grads
    import kernelc

    class Spy:
        def __init__(self, kern):
            self.kern, self.grids = kern, []

        def __getitem__(self, grid):
            self.grids.append(grid)
            return self.kern[grid]

    q, k, v = _qkv(80, 16, torch.float16)
    do = torch.randn(q.shape, generator=torch.Generator().manual_seed(1)).to(torch.float16)
    o, lse = A.attention_fwd(q, k, v, True, 0.25, return_lse=True)
    ref = B.attention_bwd(do, q, k, v, o, lse, True, 0.25, dq_mode="fused")
    spy = Spy(kernelc.jit(B.attn_bwd_fused_kernel.fn))
    got = B.attention_bwd(do, q, k, v, o, lse, True, 0.25, dq_mode="fused", kernels={"fused": spy})
    assert len(spy.grids) == 1
    for a, b in zip(got, ref):
        assert torch.equal(a, b)


@pytest.mark.parametrize("N", [96, 80])
@pytest.mark.parametrize("mode", ["fused", "separate"])
def test_even_m_loads_give_the_same_grads(mode, N):
    # dkdv_config EVEN_M: the dK/dV loop's LSE/delta rows unmasked where N is a multiple of its step (96 at a step
    # of 16 and 32); at N=80 and a step of 32 the wrapper keeps the masks
    q, k, v = _qkv(N, 16, torch.float16)
    do = torch.randn(q.shape, generator=torch.Generator().manual_seed(1)).to(torch.float16)
    for causal in (False, True):
        o, lse = A.attention_fwd(q, k, v, causal, 0.25, return_lse=True)
        ref = B.attention_bwd(do, q, k, v, o, lse, causal, 0.25, dq_mode=mode, dkdv_config=dict(BLOCK_M=32, BLOCK_N=32))
        got = B.attention_bwd(do, q, k, v, o, lse, causal, 0.25, dq_mode=mode,
                              dkdv_config=dict(BLOCK_M=32, BLOCK_N=32, EVEN_M=True))
        for a, b in zip(got, ref):
            assert torch.equal(a, b)


def test_fused_mode_passes_its_register_ceiling_only_where_asked(monkeypatch):
    # FUSED_MAXNREG / dkdv_config's maxnreg reach the fused kernel's launch as maxnreg=; unset, no maxnreg keyword at
    # all (any launch option besides num_warps / num_stages sends a launch down the launcher's general path)
    import kernelc
    seen = []

    class Spy:
        def __init__(self, kern):
            self.kern = kern

        def __getitem__(self, grid):
            def launch(*a, **kw):
                seen.append({k: kw[k] for k in ("maxnreg",) if k in kw})
                return self.kern[grid](*a, **kw)
            return launch

    q, k, v = _qkv(64, 16, torch.float16)
    do = torch.randn(q.shape, generator=torch.Generator().manual_seed(1)).to(torch.float16)
    o, lse = A.attention_fwd(q, k, v, False, 0.25, return_lse=True)
    spy = Spy(kernelc.jit(B.attn_bwd_fused_kernel.fn))
    ref = B.attention_bwd(do, q, k, v, o, lse, False, 0.25, dq_mode="fused", kernels={"fused": spy})
    got = B.attention_bwd(do, q, k, v, o, lse, False, 0.25, dq_mode="fused", kernels={"fused": spy},
                          dkdv_config=dict(maxnreg=128))
    monkeypatch.setattr(B, "FUSED_MAXNREG", {(16, False): 96})
    B.attention_bwd(do, q, k, v, o, lse, False, 0.25, dq_mode="fused", kernels={"fused": spy})
    assert seen == [{}, {"maxnreg": 128}, {"maxnreg": 96}]
    for a, b in zip(got, ref):
        assert torch.equal(a, b)


def test_the_backwards_launch_plans_take_each_calls_tensors():
    # attention_bwd's fused and separate modes at their defaults keep a plan per (shapes, strides, dtypes, mask, scale,
    # mode) with their launches prepared: a second call must read its own tensors (grads bit for bit those of the
    # general path), and inputs a plan does not cover take the general path
    B.clear_plans()
    for seed, causal in ((0, False), (1, False), (2, True)):
        q, k, v = _qkv(64, 16, torch.float16, seed=seed)
        do = torch.randn(q.shape, generator=torch.Generator().manual_seed(seed + 7)).to(torch.float16)
        o, lse = A.attention_fwd(q, k, v, causal, 0.25, return_lse=True)
        for mode in ("fused", None):  # None: D=16's default, the separate pass
            got = B.attention_bwd(do, q, k, v, o, lse, causal, 0.25, dq_mode=mode)
            ref = B.attention_bwd(do, q, k, v, o, lse, causal, 0.25, dq_mode=mode, dq_config={})  # no plan
            for a, b in zip(got, ref):
                assert torch.equal(a, b)
    assert sum(1 for p in B._PLANS.values() if p) == 4  # a plan a mode and mask
    dot = do.transpose(-1, -2).contiguous().transpose(-1, -2)  # dO in another layout: the general path
    got = B.attention_bwd(dot, q, k, v, o, lse, causal, 0.25, dq_mode="fused")
    for a, b in zip(got, B.attention_bwd(do, q, k, v, o, lse, causal, 0.25, dq_mode="fused", dq_config={})):
        assert torch.equal(a, b)
    assert not B._PLANS[next(key for key in B._PLANS if key[9] == dot.stride())]
    B.clear_plans()
    assert not B._PLANS


@pytest.mark.parametrize("causal", [False, True])
def test_host_descriptor_forwards_give_the_pointer_forwards_output(causal):
    # DESC: Q, K, V (and the split diagonal's K2, V2; DESC 2 O too) through host tensor descriptors, the same kernel
    # otherwise: the outputs agree with the pointer loads' to rounding (fp16 with the LSE and O by descriptor; fp8
    # with the split diagonal, key order)
    q, k, v = _qkv(64, 32, torch.float16, Z=1, H=2)
    o1, l1 = A.attention_fwd(q, k, v, causal=causal, return_lse=True, BLOCK_M=16, BLOCK_N=32, diag_split=True,
                             even_n=True, desc=False)
    o2, l2 = A.attention_fwd(q, k, v, causal=causal, return_lse=True, BLOCK_M=16, BLOCK_N=32, diag_split=True,
                             even_n=True, desc=2)
    torch.testing.assert_close(o2, o1, atol=1e-3, rtol=0)
    torch.testing.assert_close(l2, l1, atol=1e-5, rtol=0)
    # key order wants blocks of 32 keys: the narrow blocks are BLOCK_M keys
    (q8, qs), (k8, ks), (v8, vs) = (A.quantize_fp8(t) for t in _qkv(128, 32, torch.float16, Z=1, H=1))
    vt = A.fp8_v_key_order(v8.transpose(-1, -2).contiguous())
    f1, f2 = (A.attention_fp8(q8, k8, vt, qs, ks, vs, causal=causal, BLOCK_M=32, BLOCK_N=64, key_order=True,
                              diag_split=True, even_n=True, mask_fold=True, desc=d) for d in (0, 1))
    torch.testing.assert_close(f2, f1, atol=1e-3, rtol=0)


def test_ds_rows_tma_table_reaches_the_launch(monkeypatch):
    # DS_ROWS_TMA by (head dim, causal): ROWS_TMA on ds's dK/dV launch where the table sets it, no keyword elsewhere
    # (the other kernels' compile keys stay as they were); grads bit for bit the same in the interpreter
    import kernelc
    assert B.DS_ROWS_TMA == {(128, False): True, (128, True): True}
    seen = []
    spy = _Spy(kernelc.jit(B.attn_bwd_dkdv_kernel.fn), seen)
    monkeypatch.setattr(B, "DS_ROWS_TMA", {(16, False): True})
    q, k, v = _qkv(64, 16, torch.float16)
    do = torch.randn(q.shape, generator=torch.Generator().manual_seed(1)).to(torch.float16)
    for causal in (False, True):
        o, lse = A.attention_fwd(q, k, v, causal, 0.25, return_lse=True)
        got = B.attention_bwd(do, q, k, v, o, lse, causal, 0.25, dq_mode="ds", kernels={"dkdv": spy})
        ref = B.attention_bwd(do, q, k, v, o, lse, causal, 0.25, dq_mode="ds", dkdv_config=dict(ROWS_TMA=False))
        for a, b in zip(got, ref):
            assert torch.equal(a, b)
    assert [kw.get("ROWS_TMA") for kw in seen] == [True, None]


@pytest.mark.parametrize("mode", ["separate", "ds"])
def test_dkdv_producer_warpgroup_tables_reach_the_launch(mode, monkeypatch):
    # DKDV_WS (separate, also through its launch plan) / DS_WS by (head dim, causal): WS on the dK/dV launch where
    # the table sets it, no WS keyword elsewhere (the other kernels' compile keys stay as they were); the
    # interpreter ignores the producer warp, so the grads are bit for bit the same
    import kernelc
    seen = []
    spy = _Spy(kernelc.jit(B.attn_bwd_dkdv_kernel.fn), seen)
    monkeypatch.setattr(B, "DKDV_WS" if mode == "separate" else "DS_WS", {(16, False): 1})
    q, k, v = _qkv(64, 16, torch.float16)
    do = torch.randn(q.shape, generator=torch.Generator().manual_seed(1)).to(torch.float16)
    for causal in (False, True):
        o, lse = A.attention_fwd(q, k, v, causal, 0.25, return_lse=True)
        got = B.attention_bwd(do, q, k, v, o, lse, causal, 0.25, dq_mode=mode, kernels={"dkdv": spy})
        ref = B.attention_bwd(do, q, k, v, o, lse, causal, 0.25, dq_mode=mode, dkdv_config=dict(WS=0))
        for a, b in zip(got, ref):
            assert torch.equal(a, b)
    assert [kw.get("WS") for kw in seen] == [1, None]
    if mode == "separate":  # the launch plan (no configs, no kernels) reads the table too
        seen.clear()
        monkeypatch.setattr(B, "attn_bwd_dkdv_kernel", _Spy(B.attn_bwd_dkdv_kernel, seen))
        o, lse = A.attention_fwd(q, k, v, False, 0.25, return_lse=True)
        B.attention_bwd(do, q, k, v, o, lse, False, 0.25, dq_mode=mode)
        assert [kw.get("WS") for kw in seen] == [1]


def test_separate_pass_takes_the_masks_configs_its_producer_and_rows(monkeypatch):
    # (d64b27) the separate pass's tables by (head dim, causal): DKDV_MASK_CONFIGS / DQ_MASK_CONFIGS over the head dim's
    # configs, DKDV_WS and DKDV_ROWS_TMA (the rows only where N % 4 == 0), the same in the launch plan (no configs
    # given) and in the general path; the other mask keeps the head dim's. Grads bit for bit those of the same configs
    # asked for by dkdv_config / dq_config.
    q, k, v = _qkv(88, 16, torch.float16)
    do = torch.randn(q.shape, generator=torch.Generator().manual_seed(1)).to(torch.float16)
    o, lse = A.attention_fwd(q, k, v, False, 0.25, return_lse=True)
    want1 = dict(BLOCK_M=16, BLOCK_N=64, num_warps=4, num_stages=2, WS=1, ROWS_TMA=True)
    want2 = dict(BLOCK_M=32, BLOCK_N=32, num_warps=4, num_stages=2)
    asked = B.attention_bwd(do, q, k, v, o, lse, False, 0.25, dq_mode="separate", dkdv_config=want1,
                            dq_config=want2)
    monkeypatch.setattr(B, "DKDV_MASK_CONFIGS", {(16, False): (16, 64, 4, 2)})
    monkeypatch.setattr(B, "DQ_MASK_CONFIGS", {(16, False): (32, 32, 4, 2)})
    monkeypatch.setattr(B, "DKDV_WS", {**B.DKDV_WS, (16, False): 1})
    monkeypatch.setattr(B, "DKDV_ROWS_TMA", {(16, False): True})
    monkeypatch.setattr(B, "DEFAULT_DQ_MODES", {**B.DEFAULT_DQ_MODES, (16, False): "separate"})
    B.clear_plans()
    seen = []
    for name in ("attn_bwd_dkdv_kernel", "attn_bwd_dq_kernel"):
        real = getattr(B, name)

        class Spy:  # records each launch's keyword arguments, then launches
            def __init__(self, real, name):
                self.real, self.name = real, name

            def __getitem__(self, grid):
                def launch(*a, **kw):
                    seen.append((self.name, kw))
                    return self.real[grid](*a, **kw)
                return launch
        monkeypatch.setattr(B, name, Spy(real, name))
    for general in (False, True):  # the plan (attention_bwd without configs), then the general path
        seen.clear()
        grads = (B.attention_bwd_steps(do, q, k, v, o, lse, False, 0.25) if general else
                 (None, None))
        if general:
            out, steps = grads
            for _, launch in steps:
                launch()
            grads = out()
        else:
            grads = B.attention_bwd(do, q, k, v, o, lse, False, 0.25)
        (n1, kw1), (n2, kw2) = seen
        assert n1 == "attn_bwd_dkdv_kernel" and n2 == "attn_bwd_dq_kernel", general
        assert {key: kw1.get(key) for key in want1} == want1, (general, kw1)
        assert {key: kw2.get(key) for key in want2} == want2, (general, kw2)
        for a, b in zip(asked, grads):
            assert torch.equal(a, b), general
    # N % 4 != 0: no rows by descriptors; causal: the head dim's configs (the default mode there, not separate)
    seen.clear()
    B.attention_bwd(do[:, :, :86], q[:, :, :86], k[:, :, :86], v[:, :, :86], o[:, :, :86],
                    lse[:, :, :86].contiguous(), False, 0.25)
    assert not seen[0][1].get("ROWS_TMA"), seen[0][1]
    seen.clear()
    B.attention_bwd(do, q, k, v, o, lse, True, 0.25, dq_mode="separate")
    assert (seen[0][1]["BLOCK_N"], seen[0][1].get("WS"), seen[0][1].get("ROWS_TMA")) == \
        (B.DKDV_CONFIGS[16][1], None, None), seen[0][1]
    B.clear_plans()


@pytest.mark.parametrize("N", [200, 256])
def test_d64_causal_default_gives_the_fused_grads(N, monkeypatch):
    # (d64c28) D=64 causal's default from its long length on (DEFAULT_DQ_MODES_LONG, moved down to N here): the separate
    # pass with its dK/dV kernel's two loops at (64, 128, 8, 3), the producer for the unmasked one (WS=2), the rows by
    # descriptors where N % 4 == 0, its async tail and GROUP 8 (2 here: the heads), and its dQ kernel at (128, 128, 8, 3)
    # with its tail, in the launch plan and the general path alike; grads bit for bit the separate pass's at the same
    # blocks without the knobs (the same trips in the same order) and close to the fused kernel's (the default below
    # the length); ragged N (200: 3.125 query steps of the dK/dV kernel's last block)
    q, k, v = _qkv(N, 64, torch.float16)
    do = torch.randn(q.shape, generator=torch.Generator().manual_seed(1)).to(torch.float16)
    o, lse = A.attention_fwd(q, k, v, True, 0.125, return_lse=True)
    assert B.default_dq_mode(64, True, 16384) == "separate" and B.default_dq_mode(64, True, 16383) == "fused"
    fused = B.attention_bwd(do, q, k, v, o, lse, True, 0.125)  # below the long length: the fused kernel
    assert torch.equal(fused[0], B.attention_bwd(do, q, k, v, o, lse, True, 0.125, dq_mode="fused")[0])
    plain = B.attention_bwd(do, q, k, v, o, lse, True, 0.125, dq_mode="separate",
                            dkdv_config=dict(BLOCK_M=64, BLOCK_N=128, num_warps=8, num_stages=3, WS=0, TAIL=False,
                                             ROWS_TMA=False),
                            dq_config=dict(BLOCK_M=128, BLOCK_N=128, num_warps=8, num_stages=3, TAIL=False))
    monkeypatch.setattr(B, "DEFAULT_DQ_MODES_LONG", {**B.DEFAULT_DQ_MODES_LONG, (64, True): (N, "separate")})
    B.clear_plans()
    seen1, seen2 = [], []
    monkeypatch.setattr(B, "attn_bwd_dkdv_kernel", _Spy(B.attn_bwd_dkdv_kernel, seen1))
    monkeypatch.setattr(B, "attn_bwd_dq_kernel", _Spy(B.attn_bwd_dq_kernel, seen2))
    plan = B.attention_bwd(do, q, k, v, o, lse, True, 0.125)
    out, steps = B.attention_bwd_steps(do, q, k, v, o, lse, True, 0.125)
    for _, launch in steps:
        launch()
    general = out()
    assert len(seen1) == 2 and len(seen2) == 2
    for kw in seen1:
        assert (kw["BLOCK_M"], kw["BLOCK_N"], kw["num_warps"], kw["num_stages"]) == (64, 128, 8, 3)
        assert (kw.get("ONE_LOOP"), kw["WS"], kw["TAIL"], kw["ROWS_TMA"], kw["GROUP"]) == (None, 2, True, True, 2), kw
    for kw in seen2:
        assert (kw["BLOCK_M"], kw["BLOCK_N"], kw["num_warps"], kw["num_stages"], kw["TAIL"]) == (128, 128, 8, 3, True)
    for a, b, t, f in zip(plan, general, plain, fused):
        assert torch.equal(a, t) and torch.equal(b, t)
        torch.testing.assert_close(a.float(), f.float(), atol=2e-2, rtol=2e-2)
    B.clear_plans()


def test_tables_merges_entries_for_a_block_and_rejects_unknown_names():
    before = B.DQ_TAIL
    with B.tables(DQ_TAIL={(16, True): True}):
        assert B.DQ_TAIL == {**before, (16, True): True} and B.DQ_TAIL is not before
    assert B.DQ_TAIL is before
    with pytest.raises(ValueError, match="no table"):
        with B.tables(NOT_A_TABLE={}):
            pass


@pytest.mark.parametrize("blocks", [(32, 64), (32, 32), (64, 32)])
def test_one_loop_causal_fp8_forward_gives_the_three_loops_output(blocks):
    # ONE_LOOP: every key block of a causal program in one loop, the mask from the diagonal's block on (with BLOCK_N
    # = 2 BLOCK_M every other row block's last block scores BLOCK_M keys all rows mask, which add exact zeros): the
    # split diagonal's output and, ONE_LOOP with its mask left out, a wrong one
    bm, bn = blocks
    (q8, qs), (k8, ks), (v8, vs) = (A.quantize_fp8(t) for t in _qkv(128, 32, torch.float16, Z=1, H=2))
    vt = A.fp8_v_key_order(v8.transpose(-1, -2).contiguous())
    kw = dict(causal=True, BLOCK_M=bm, BLOCK_N=bn, key_order=True, even_n=True, mask_fold=True)
    three = A.attention_fp8(q8, k8, vt, qs, ks, vs, diag_split=True, one_loop=False, **kw)
    one = A.attention_fp8(q8, k8, vt, qs, ks, vs, one_loop=True, **kw)
    torch.testing.assert_close(one, three, atol=1e-3, rtol=0)
    ref = torch.nn.functional.scaled_dot_product_attention(q8.float() * qs, k8.float() * ks, v8.float() * vs,
                                                           is_causal=True)
    assert (one.float() - ref).abs().max() < 0.1
    full = torch.nn.functional.scaled_dot_product_attention(q8.float() * qs, k8.float() * ks, v8.float() * vs)
    assert (full - ref).abs().max() > 0.3  # a forward that masked nothing would fail the bound above


def test_one_loop_table_reaches_the_launch(monkeypatch):
    # ONE_LOOP by (head dim, fp8): the launch gets ONE_LOOP=True (and no K2/V2 descriptors) where the table names
    # the call and N_CTX is a multiple of the blocks; not causal, or N_CTX ragged, it does not
    import kernelc
    seen = []
    spy = _Spy(kernelc.jit(A.attn_fwd_lse_kernel.fn), seen)
    monkeypatch.setattr(A, "ONE_LOOP", {(32, True)})
    (q8, qs), (k8, ks), (v8, vs) = (A.quantize_fp8(t) for t in _qkv(128, 32, torch.float16, Z=1, H=1))
    vt = v8.transpose(-1, -2).contiguous()
    for causal in (True, False):
        A.attention_fp8(q8, k8, vt, qs, ks, vs, causal=causal, kernel=spy, BLOCK_M=32, BLOCK_N=64, diag_split=True)
    (q8, qs), (k8, ks), (v8, vs) = (A.quantize_fp8(t) for t in _qkv(96, 32, torch.float16, Z=1, H=1))
    A.attention_fp8(q8, k8, v8.transpose(-1, -2).contiguous(), qs, ks, vs, causal=True, kernel=spy, BLOCK_M=32,
                    BLOCK_N=64)
    assert [kw.get("ONE_LOOP") for kw in seen] == [True, None, None]


def test_refill_top_table_reaches_the_launch(monkeypatch):
    # REFILL_TOP by (head dim, causal, fp8) up to an N_CTX bound: the launch gets REFILL_TOP=True where the table
    # names the call within its bound, nothing past it or where it does not name it (the knob decides), and what a
    # call asks for where it asks; the output is the same either way (the interpreter runs a plain range)
    import kernelc
    seen = []
    spy = _Spy(kernelc.jit(A.attn_fwd_lse_kernel.fn), seen)
    monkeypatch.setattr(A, "REFILL_TOP", {(32, True, True): None, (32, False, True): 64})
    outs = []
    for n, causal, ask in ((128, True, None), (128, False, None), (64, False, None), (128, False, False),
                           (128, False, True)):
        (q8, qs), (k8, ks), (v8, vs) = (A.quantize_fp8(t) for t in _qkv(n, 32, torch.float16, Z=1, H=1))
        vt = v8.transpose(-1, -2).contiguous()
        outs.append(A.attention_fp8(q8, k8, vt, qs, ks, vs, causal=causal, kernel=spy, BLOCK_M=32, BLOCK_N=64,
                                    refill_top=ask))
    assert [kw.get("REFILL_TOP") for kw in seen] == [True, None, True, False, True]
    assert torch.equal(outs[1], outs[3]) and torch.equal(outs[1], outs[4])

