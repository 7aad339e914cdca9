"""The forwards' causal program order (LPT: a head's row blocks or groups of heads heaviest first) and the pointer
forward's split diagonal (DIAG_SPLIT) in the interpreter: every row block of every head computed once, against
fp32 attention (docs/attention.md, "Causal forwards: heaviest first across heads")."""
import math

import pytest
import torch

from examples.kernels import attention as A
from examples.kernels import attention_fa3 as AF


@pytest.fixture(autouse=True)
def _interpret(monkeypatch):
    monkeypatch.setenv("KERNELC_INTERPRET", "1")


def _qkv(N, D, H, seed):
    g = torch.Generator().manual_seed(seed)
    return [torch.randn(1, H, N, D, generator=g).to(torch.float16) for _ in range(3)]


def _ref(q, k, v, causal=True):
    N, D = q.shape[-2:]
    s = q.float() @ k.float().transpose(-1, -2) * D ** -0.5
    if causal:
        s = s.masked_fill(torch.ones(N, N, dtype=torch.bool).triu(1), float("-inf"))
    return torch.softmax(s, -1) @ v.float(), torch.logsumexp(s, -1) / math.log(2)


def test_lpt_grid_groups_heads_by_a_divisor_and_keeps_the_plain_orders():
    assert A.lpt_grid(8, 32, 128) == (8, (256, 16, 1))
    assert A.lpt_grid(8, 32, 12) == (6, (192, 2, 1))
    assert A.lpt_grid(8, 32, 7) == (7, (224, 1, 1))
    assert A.lpt_grid(4, 5, 6) == (3, (15, 2, 1))
    assert A.lpt_grid(True, 32, 128) == (1, (32, 128, 1))
    assert A.lpt_grid(0, 32, 128) == (0, (32, 128, 1))


def test_l2_groups_keep_their_k_and_v_within_the_budget():
    mb = 1 << 20
    assert A.lpt_heads(4096, 128, 2, 16 * mb) == 8  # 2 MB of K and V a head (fp16)
    assert A.lpt_heads(4096, 128, 1, 16 * mb) == 16
    assert A.lpt_heads(4096, 64, 2, 16 * mb) == 16
    assert A.lpt_heads(16384, 128, 2, 16 * mb) == 2
    assert A.lpt_heads(16384, 128, 2, 4 * mb) == 1  # one head over the budget still runs
    assert A.lpt_heads(64, 16, 2) >= 16


@pytest.mark.parametrize("lpt", [4, 6])
def test_pointer_forward_in_head_groups_computes_every_row_block_once(lpt):
    # 6 heads: groups of 3 (4 asked) or 6; a ragged length (5 row blocks of 16, the last one partial). The grouped
    # launch runs first on fresh inputs, so an output block no program wrote cannot hold an earlier call's values
    q, k, v = _qkv(72, 16, 6, seed=11 + lpt)
    o, lse = A.attention_fwd(q, k, v, causal=True, return_lse=True, BLOCK_M=16, BLOCK_N=16, lpt=lpt)
    ref, ref_lse = _ref(q, k, v)
    torch.testing.assert_close(o.float(), ref, rtol=1e-2, atol=2e-3)
    torch.testing.assert_close(lse, ref_lse, rtol=1e-5, atol=1e-4)
    # each program computes what the plain order's program of that (row block, head) computes, bit for bit
    o0, lse0 = A.attention_fwd(q, k, v, causal=True, return_lse=True, BLOCK_M=16, BLOCK_N=16, lpt=0)
    assert torch.equal(o, o0) and torch.equal(lse, lse0)


@pytest.mark.parametrize("causal", [True, False])
@pytest.mark.parametrize("N,bm,bn,split", [(64, 16, 32, True), (80, 16, 32, True), (64, 32, 16, False),
                                           (80, 32, 16, False)])
@pytest.mark.parametrize("fold", [False, True])
def test_masked_blocks_split_folded_and_even(N, bm, bn, split, fold, causal):
    # DIAG_SPLIT (BLOCK_N = 2 BLOCK_M): the masked keys BLOCK_M at a time past the last wide block within the row
    # block (every other row block one narrow block, the others one wide block); MASK_FOLD: the masked blocks fold the
    # scale and mask the raw scores with -inf (BLOCK_N < BLOCK_M: a row block's second diagonal block has rows that
    # see none of its keys); EVEN_N where N allows it; a ragged N, heads in groups of 2
    q, k, v = _qkv(N, 16, 2, seed=N + bm + 7 * fold)
    o, lse = A.attention_fwd(q, k, v, causal=causal, return_lse=True, BLOCK_M=bm, BLOCK_N=bn, diag_split=split,
                             lpt=2, fold_scale=True, mask_fold=fold, even_n=True)
    ref, ref_lse = _ref(q, k, v, causal)
    torch.testing.assert_close(o.float(), ref, rtol=1e-2, atol=2e-3)
    torch.testing.assert_close(lse, ref_lse, rtol=1e-5, atol=1e-4)


def test_fp8_split_diagonal_in_key_order():
    # fp8 with V's keys in fp8_key_order's order: the diagonal's 32-key blocks take P in that order too
    q, k, v = _qkv(128, 32, 2, seed=5)
    (q8, qs), (k8, ks), (v8, vs) = (A.quantize_fp8(t) for t in (q, k, v))
    v8t = A.fp8_v_key_order(v8.transpose(-1, -2).contiguous())
    o = A.attention_fp8(q8, k8, v8t, qs, ks, vs, causal=True, BLOCK_M=32, BLOCK_N=64, key_order=True,
                        diag_split=True, lpt=2, mask_fold=True, even_n=True)
    ref, _ = _ref(q8.float() * qs, k8.float() * ks, v8.float() * vs)
    vmax = (v8.float() * vs).abs().max().item()
    err = (o.float() - ref).abs()
    assert err.max().item() <= 2 ** -4 * vmax + 1e-2, err.max().item()
    assert err.mean().item() <= 2 ** -8 * vmax, err.mean().item()


def test_fa3_order_forward_in_head_groups():
    q, k, v = _qkv(64, 16, 4, seed=3)
    o = AF.attention(q, k, v, causal=True, BLOCK_M=16, BLOCK_N=16, num_warps=4, lpt=4)
    torch.testing.assert_close(o.float(), _ref(q, k, v)[0], rtol=1e-2, atol=2e-3)
    assert torch.equal(o, AF.attention(q, k, v, causal=True, BLOCK_M=16, BLOCK_N=16, num_warps=4, lpt=1))
    assert torch.equal(o, AF.attention(q, k, v, causal=True, BLOCK_M=16, BLOCK_N=16, num_warps=4, lpt="l2"))
    o2 = A.attention_fwd(q, k, v, causal=True, BLOCK_M=16, BLOCK_N=16, lpt="l2")
    torch.testing.assert_close(o2.float(), _ref(q, k, v)[0], rtol=1e-2, atol=2e-3)


# the launch arguments LPT .. DESC: after the 8 tensors, sm_scale, 16 strides, H, N_CTX, BLOCK_M, BLOCK_N, HEAD_DIM,
# CAUSAL, STORE_LSE, FP8, FOLD_SCALE
OPTS = slice(34, 40)


class _Recorder:
    """Stands for a jitted kernel: records each launch's grid and arguments."""

    def __init__(self):
        self.calls = []

    def __getitem__(self, grid):
        return lambda *a, **kw: self.calls.append((grid, a, kw))


def test_the_tables_pick_the_causal_defaults():
    # N 4096, 16 heads: the fp8 pointer forward at D=128 causal in groups of lpt_heads = 16 in one key loop (ONE_LOOP,
    # so no split diagonal) with folded, even masked blocks, its ring refilled at the top (REFILL_TOP, at any N
    # since s29); not causal, and fp16's pointer forward at D=128, as before; the FA3 order causal in groups of 8
    # (fp16 D=128) and 16 (D=64). OPTS: the launch's LPT, KEY_ORDER, DIAG_SPLIT, MASK_FOLD, EVEN_N, DESC (fp8 through
    # host descriptors, which needs N a multiple of the blocks and sets EVEN_N).
    rec = _Recorder()
    q8 = torch.zeros(1, 16, 4096, 128, dtype=torch.float8_e4m3fn)
    v8t = torch.zeros(1, 16, 128, 4096, dtype=torch.float8_e4m3fn)
    one = torch.ones(1)
    loops = lambda: {k: rec.calls[-1][2].get(k) for k in ("ONE_LOOP", "REFILL_TOP")}  # noqa: E731
    A.attention_fp8(q8, q8, v8t, one, one, one, causal=True, kernel=rec)
    assert rec.calls[-1][0] == (16 * 64, 1, 1) and rec.calls[-1][1][OPTS] == (16, False, False, True, True, 1)
    assert loops() == {"ONE_LOOP": True, "REFILL_TOP": True}
    A.attention_fp8(q8, q8, v8t, one, one, one, causal=False, kernel=rec)
    assert rec.calls[-1][0] == (64, 16, 1) and rec.calls[-1][1][OPTS] == (0, False, False, False, True, 1)
    assert loops() == {"ONE_LOOP": None, "REFILL_TOP": True}
    q = torch.zeros(1, 16, 4096, 128, dtype=torch.float16)
    A.attention_fwd(q, q, q, causal=True, kernel=rec)
    assert rec.calls[-1][0] == (32, 16, 1) and rec.calls[-1][1][OPTS] == (0, False, False, False, False, 0)
    for D, g in ((128, 8), (64, 16)):
        q = torch.zeros(1, 16, 4096, D, dtype=torch.float16)
        AF.attention(q, q, q, causal=True, kernel=rec)
        bm = AF.config(D, True)[0]
        assert rec.calls[-1][0] == (g * 4096 // bm, 16 // g, 1) and rec.calls[-1][1][-1] == g
        AF.attention(q, q, q, causal=False, kernel=rec)
        assert rec.calls[-1][1][-1] == 0
    # fp16 D=64's pointer forward (64x64) in groups of 16 at N 4096; at N 16384 (256 row blocks a head, over
    # LPT_MAX_ROW_BLOCKS) launch order, and the FA3 order a head's heaviest first
    q = torch.zeros(1, 16, 4096, 64, dtype=torch.float16)
    A.attention_fwd(q, q, q, causal=True, kernel=rec)
    assert rec.calls[-1][0] == (16 * 64, 1, 1) and rec.calls[-1][1][OPTS][0] == 16
    q = torch.zeros(1, 4, 16384, 64, dtype=torch.float16)
    A.attention_fwd(q, q, q, causal=True, kernel=rec)
    assert rec.calls[-1][0] == (256, 4, 1) and rec.calls[-1][1][OPTS][0] == 0
    AF.attention(q, q, q, causal=True, kernel=rec)
    assert rec.calls[-1][0] == (256, 4, 1) and rec.calls[-1][1][-1] == 1
    q8 = torch.zeros(1, 4, 16384, 128, dtype=torch.float8_e4m3fn)
    v8t = torch.zeros(1, 4, 128, 16384, dtype=torch.float8_e4m3fn)
    A.attention_fp8(q8, q8, v8t, one, one, one, causal=True, kernel=rec)
    assert rec.calls[-1][0] == (256, 4, 1) and rec.calls[-1][1][OPTS] == (0, False, False, True, True, 1)
    assert loops() == {"ONE_LOOP": True, "REFILL_TOP": True}
    A.attention_fp8(q8, q8, v8t, one, one, one, causal=False, kernel=rec)
    assert loops() == {"ONE_LOOP": None, "REFILL_TOP": True}  # s29: no N bound (shuffled rounds, R4 and F29)
    # N not a multiple of the blocks: pointer loads (DESC 0), the masks test N_CTX too (EVEN_N off)
    q8 = torch.zeros(1, 4, 4000, 128, dtype=torch.float8_e4m3fn)
    v8t = torch.zeros(1, 4, 128, 4000, dtype=torch.float8_e4m3fn)
    A.attention_fp8(q8, q8, v8t, one, one, one, causal=False, kernel=rec)
    assert rec.calls[-1][1][OPTS] == (0, False, False, False, False, 0) and len(rec.calls[-1][1]) == 40
