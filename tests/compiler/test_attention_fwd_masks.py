"""The pointer forward's masked key blocks on CPU (sm_90a SASS): with EVEN_N and MASK_FOLD a masked block pays one
compare and one select a score beyond an unmasked one (the scale folded as in the unmasked blocks; no test of keys
past N_CTX), and DIAG_SPLIT scores the keys past the last wide block within the row block in a narrow block
(docs/attention.md, "Causal forwards: heaviest first across heads")."""
import pytest

from tests.compiler.test_attention_kernels import compile_fwd
from tests.compiler.test_fold_scale import _loops as _gmma_loops   # the key loops: two wgmma groups a trip

FP8_CAUSAL = dict(BLOCK_M=64, BLOCK_N=128, num_warps=4, num_stages=2, KEY_ORDER=True, FOLD_SCALE=True, EVEN_N=True,
                  MASK_FOLD=True)


def _count(ops, prefix):
    return sum(o.startswith(prefix) for o in ops)


@pytest.fixture(scope="module")
def masked():
    return compile_fwd(128, True, fp8=True, **FP8_CAUSAL)


@pytest.fixture(scope="module")
def split():
    return compile_fwd(128, True, fp8=True, DIAG_SPLIT=True, LPT=8, **FP8_CAUSAL)


def test_a_masked_block_pays_one_compare_and_one_select_a_score(masked):
    # 64x128 at 4 warps: 64 scores a thread and key block. Before (2026-11-29, fwd18): the masked loop issued 798
    # instructions against the unmasked 477 (128 FMUL: the scale unfolded, 98 ISETP, 128 FSEL)
    assert masked.n_spills == 0
    unmasked_ops, masked_ops = _gmma_loops(masked.asm["sass"])[:2]
    assert _count(masked_ops, "FMUL") == _count(unmasked_ops, "FMUL")  # acc * alpha only
    assert _count(masked_ops, "FFMA") == _count(unmasked_ops, "FFMA")  # the scale in the exponent's FFMA
    assert _count(masked_ops, "FSEL") <= 64 and _count(masked_ops, "ISETP") <= 64 + 8
    assert len(masked_ops) <= len(unmasked_ops) + 3 * 64


def test_the_split_diagonal_adds_a_narrow_masked_loop(split):
    # the unmasked and the wide masked loop score 128 keys (4 QGMMA for Q K^T, 4 for P V at D=128); the narrow one
    # 64 (4 + 2); still 3 programs an SM (<= 168 registers, 4 warps) and no spill
    assert split.n_spills == 0 and split.n_regs <= 168
    loops = _gmma_loops(split.asm["sass"])
    assert [_count(ops, "QGMMA") for ops in loops[:3]] == [8, 8, 6]
    assert len(loops[2]) < len(loops[1])
