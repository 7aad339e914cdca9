"""bench/experiments/mem23/knob_ab.py's attention-backward operands (CPU interpreter): o and lse are the forward's on
q, k, v (call P24's random lse overflowed dq in fp16 at N 4096, a NaN in the harness's check: docs/performance.md)."""
import math
import os
import sys

import pytest
import torch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "bench", "experiments", "mem23"))

import knob_ab  # noqa: E402


@pytest.mark.parametrize("kind", ["bwd", "bwd_causal"])
def test_bwd_operands_are_a_forwards(kind, monkeypatch):
    monkeypatch.setenv("KERNELC_INTERPRET", "1")
    do, q, k, v, o, lse = knob_ab.operands(kind, torch, 32, device="cpu")
    assert do.shape == q.shape == o.shape == (1, 32, 32, 128) and lse.shape == (1, 32, 32)
    s = q.float() @ k.float().transpose(-1, -2) * 128 ** -0.5
    if kind == "bwd_causal":
        s = s.masked_fill(torch.ones(32, 32, dtype=torch.bool).triu(1), float("-inf"))
    torch.testing.assert_close(lse, torch.logsumexp(s, -1) / math.log(2), rtol=1e-5, atol=1e-4)
    torch.testing.assert_close(o.float(), torch.softmax(s, -1) @ v.float(), rtol=1e-2, atol=2e-3)
    assert knob_ab.WORKS["bwd128_ds_causal"][1] == "bwd_causal" and knob_ab.WORKS["bwd128_ds"][1] == "bwd"
