"""``kl.prefetch`` (language/cache.py): a cache hint with no result. PTX ``prefetch.global.L1/L2`` per element a
thread owns (one copy of a replicated element), SASS ``CCTL.E.PF1`` on sm_90a; the interpreter ignores it."""
import re

import pytest
import torch

import kernelc
import kernelc.language as kl


@kernelc.jit
def touch_rows(X, Y, N, BLOCK: kl.constexpr, LEVEL: kl.constexpr):
    offs = kl.arange(0, BLOCK)
    nxt = BLOCK + kl.arange(0, BLOCK // 32) * 32  # one pointer a 128-byte line of the next block
    kl.prefetch(X + nxt, mask=nxt < N, level=LEVEL)
    kl.prefetch(X)  # a scalar pointer: one thread
    kl.store(Y + offs, kl.load(X + offs) * 2)


def _compile(level="L1"):
    return kernelc.compile(touch_rows, {"X": "*fp32", "Y": "*fp32", "N": "i32"}, dict(BLOCK=64, LEVEL=level),
                           target="sm_90a", num_warps=8)


def test_prefetch_lowers_to_one_predicated_prefetch_a_line_and_no_load():
    ck = _compile()
    ptx = ck.asm["ptx"]
    pf = re.findall(r"@%p\d+ prefetch\.global\.L1 \[", ptx)
    # the 2-element tile: one element a thread (its copies in other threads predicated off), plus the scalar's
    assert len(pf) == 2, ptx
    assert ptx.count("ld.global") <= 1  # the one load of the store's row: the prefetch loads nothing
    assert len(re.findall(r"CCTL\.E\.PF1", ck.asm["sass"])) == 2


def test_prefetch_level_l2_and_bad_level():
    assert "prefetch.global.L2" in _compile("L2").asm["ptx"]
    with pytest.raises(Exception, match="level"):
        _compile("L3")


def test_prefetch_is_a_no_op_in_the_interpreter(monkeypatch):
    monkeypatch.setenv("KERNELC_INTERPRET", "1")
    x = torch.arange(128, dtype=torch.float32)
    y = torch.zeros(64)
    touch_rows[(1,)](x, y, 128, BLOCK=64, LEVEL="L1")
    assert torch.equal(y, x[:64] * 2)
