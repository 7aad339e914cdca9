"""Launch hooks: the payload the profiler reads, through the interpreter."""
import torch

import kernelc
import kernelc.language as kl
from kernelc.runtime import hooks

calls = []


def _flops(grid, meta, args):
    calls.append("metadata")
    return {"name": f"scale_{args['n']}", "flops": args["n"], "bytes": 8 * args["n"]}


@kernelc.jit(interpret=True, launch_metadata=_flops)
def scale(x_ptr, n, s, BLOCK: kl.constexpr):
    offs = kl.program_id(0) * BLOCK + kl.arange(0, BLOCK)
    kl.store(x_ptr + offs, kl.load(x_ptr + offs, mask=offs < n) * s, mask=offs < n)


def test_hook_payload():
    seen = []
    h = hooks.register(enter=lambda r: seen.append(("enter", r)), exit=lambda r: seen.append(("exit", r)))
    try:
        x = torch.ones(100)
        calls.clear()
        scale[(4,)](x, 100, 3.0, BLOCK=32, num_warps=2)
    finally:
        hooks.unregister(h)
    assert [s[0] for s in seen] == ["enter", "exit"]
    rec = seen[0][1]
    assert rec.name == "scale" and rec.grid == (4, 1, 1) and rec.num_warps == 2 and rec.backend == "interpreter"
    assert rec.constexprs == {"BLOCK": 32}
    assert [(a.name, a.kind) for a in rec.args] == [("x_ptr", "tensor"), ("n", "int"), ("s", "float"), ("BLOCK", "constexpr")]
    assert rec.args[0].shape == (100,) and rec.args[0].dtype == "float32"
    assert calls == []                                   # launch_metadata is lazy...
    assert rec.launch_metadata == {"name": "scale_100", "flops": 100, "bytes": 800}
    assert rec.launch_metadata["flops"] == 100 and calls == ["metadata"]   # ...and evaluated once
    assert rec.display_name == "scale_100 [grid 4x1x1, warps 2, stages 3]"
    assert torch.equal(x, torch.full((100,), 3.0))


def test_no_hooks_no_records():
    assert not hooks.any_registered()
    x = torch.ones(10)
    calls.clear()
    scale[(1,)](x, 10, 2.0, BLOCK=16)
    assert calls == []


def _triton_style(grid, kernel, args):
    # Triton's tutorial 09: the second argument is the compiled kernel's metadata, read as attributes
    return {"name": f"{kernel.name} [n={args['n']}] w{kernel.num_warps} B{kernel['BLOCK']}", "flops": args["n"]}


@kernelc.jit(interpret=True, launch_metadata=_triton_style)
def scale_t(x_ptr, n, s, BLOCK: kl.constexpr):
    offs = kl.program_id(0) * BLOCK + kl.arange(0, BLOCK)
    kl.store(x_ptr + offs, kl.load(x_ptr + offs, mask=offs < n) * s, mask=offs < n)


def test_launch_metadata_gets_the_kernel_as_triton_passes_it():
    seen = []
    h = hooks.register(enter=seen.append)
    try:
        scale_t[(1,)](torch.ones(8), 8, 2.0, BLOCK=8, num_warps=2)
    finally:
        hooks.unregister(h)
    assert seen[0].launch_metadata == {"name": "scale_t [n=8] w2 B8", "flops": 8}


def test_launch_metadata_names_a_missing_attribute():
    from kernelc.runtime.hooks import KernelMetadata
    m = KernelMetadata({"BLOCK": 8}, num_warps=4)
    m.name = "k"
    assert (m.name, m.BLOCK, m["num_warps"], m.num_ctas) == ("k", 8, 4, 1)
    import pytest
    with pytest.raises(AttributeError, match="'n_regs'.*'BLOCK'"):
        m.n_regs
