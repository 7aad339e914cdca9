"""KERNELC_OVERRIDE forces constexprs and launch options on named kernels (kprof-analyze --verify)."""
import pytest
import torch

import kernelc
import kernelc.language as kl
from kernelc.runtime import hooks
from kernelc.runtime.override import format_override, parse


def test_parse_forms():
    assert parse("mm:BLOCK_M=64,num_warps=4;sm:num_warps=8") == {"mm": {"BLOCK_M": 64, "num_warps": 4},
                                                              "sm": {"num_warps": 8}}
    assert parse('{"mm": {"BLOCK_M": 32}}') == {"mm": {"BLOCK_M": 32}}
    assert parse(format_override("k", {"A": 1, "B": "x"})) == {"k": {"A": 1, "B": "x"}}
    with pytest.raises(ValueError, match="KEY=VALUE"):
        parse("mm:BLOCK_M")


@kernelc.autotune(configs=[kernelc.Config({"BLOCK": 16}, num_warps=2), kernelc.Config({"BLOCK": 32}, num_warps=4)],
                  key=["n"])
@kernelc.jit(interpret=True)
def fill(x_ptr, n, BLOCK: kl.constexpr):
    offs = kl.program_id(0) * BLOCK + kl.arange(0, BLOCK)
    kl.store(x_ptr + offs, BLOCK, mask=offs < n)


def test_override_applies_to_autotuned_and_plain_launches(monkeypatch):
    seen = []
    h = hooks.register(enter=seen.append)
    try:
        monkeypatch.setenv("KERNELC_OVERRIDE", "fill:BLOCK=64,num_warps=8")
        x = torch.zeros(100)
        fill[lambda META: (kernelc.cdiv(100, META["BLOCK"]),)](x, 100)
    finally:
        hooks.unregister(h)
    assert seen[-1].constexprs == {"BLOCK": 64} and seen[-1].num_warps == 8
    assert torch.all(x == 64)
