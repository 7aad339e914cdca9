"""Frontend: Python AST -> tile IR (structure, folding, control flow, locations)."""
import os

import pytest

import kernelc.language as kl
from kernelc.compiler.frontend import generate_ir
from kernelc.compiler.ir import verify

from . import kernels_frontend as K

HERE = os.path.join(os.path.dirname(__file__), "kernels_frontend.py")


def _line_of(text):
    for i, line in enumerate(open(HERE), 1):
        if text in line:
            return i
    raise AssertionError(text)


def _ops(fn):
    return [op.name for op in fn.walk()]


def test_add_kernel_ir_is_typed_and_located():
    fn, _ = generate_ir(K.add_kernel, {"x_ptr": "*fp32", "y_ptr": "*fp32", "out_ptr": "*fp32", "n": "i32"},
                        {"BLOCK": 256}, divisibility={"x_ptr": 16})
    verify(fn)
    ops = list(fn.walk())
    loads = [o for o in ops if o.name == "load"]
    assert len(loads) == 2
    assert str(loads[0].results[0].type) == "<256xfp32>"
    assert loads[0].loc.line == _line_of("x = kl.load(x_ptr + offs, mask=mask)")
    assert len(loads[1].operands) == 3  # ptr, mask, other
    store = [o for o in ops if o.name == "store"][0]
    assert store.loc.line == _line_of("kl.store(out_ptr + offs, x + y, mask=mask)")
    ar = [o for o in ops if o.name == "arange"][0]
    assert (ar.attrs["start"], ar.attrs["end"]) == (0, 256)
    text = str(fn)
    assert "kernel add_kernel(%x_ptr: *fp32 {div=16}" in text
    assert "BLOCK=256" in text
    assert "kernels_frontend.py:" in text


def test_control_flow_structure():
    fn, used = generate_ir(K.control_flow, {"x_ptr": "*i32", "n": "i32"}, {"FLAG": True})
    verify(fn)
    names = _ops(fn)
    # early return -> scf.if whose else branch holds the rest of the kernel
    top = [o.name for o in fn.body.ops]
    assert "scf.if" in top and top[-1] == "return"
    assert names.count("scf.for") == 1      # range(...) is a real loop
    assert names.count("scf.while") == 1
    # static_range(3) unrolls: three adds of constants 0, 1, 2 after the loops
    # acc carried through the loop: literal 0 became an i32 block argument
    loop = next(o for o in fn.walk() if o.name == "scf.for")
    assert [str(a.type) for a in loop.regions[0].args] == ["i32", "i32"]
    # FLAG folded: the device function was inlined (its `a * 2 + b` line appears in a location)
    helper_line = _line_of("return a * 2 + b")
    assert any(o.loc.line == helper_line for o in fn.walk())
    # the runtime `if acc > 3: v = 2.0` merges v through an scf.if result of type fp32
    ifs = [o for o in fn.walk() if o.name == "scf.if" and o.results]
    assert any(str(o.results[0].type) == "fp32" for o in ifs)
    assert [r[:3] for r in used.to_list()] == [["function", "tests.compiler.kernels_frontend", "twice_plus"],
                                              ["global", "tests.compiler.kernels_frontend", "LIMIT"]]
    assert used.to_list()[1][3] == "int:7"


def test_constexpr_if_is_folded():
    on, _ = generate_ir(K.control_flow, {"x_ptr": "*i32", "n": "i32"}, {"FLAG": True})
    off, _ = generate_ir(K.control_flow, {"x_ptr": "*i32", "n": "i32"}, {"FLAG": False})
    helper_line = _line_of("return a * 2 + b")
    assert any(o.loc.line == helper_line for o in on.walk())
    assert not any(o.loc.line == helper_line for o in off.walk())


def test_reduce_has_combine_region():
    fn, _ = generate_ir(K.reduce_kernel, {"x_ptr": "*fp32", "out_ptr": "*fp32"}, {"BLOCK": 128})
    verify(fn)
    reds = [o for o in fn.walk() if o.name == "reduce"]
    assert [r.attrs["kind"] for r in reds] == ["add", "argmax"]
    assert [o.name for o in reds[0].regions[0].ops] == ["fadd", "reduce.return"]
    assert len(reds[1].results) == 2 and str(reds[1].results[1].type) == "i32"


def test_signature_must_match_parameters():
    with pytest.raises(kernelc_errors().CompilationError, match="has no parameter"):
        generate_ir(K.add_kernel, {"x_ptr": "*fp32", "bogus": "i32"}, {"BLOCK": 4})
    with pytest.raises(kernelc_errors().CompilationError, match="needs a type or value"):
        generate_ir(K.add_kernel, {"x_ptr": "*fp32"}, {"BLOCK": 4})


def kernelc_errors():
    import kernelc.errors
    return kernelc.errors


def test_constexpr_annotated_device_parameter_takes_a_tensor():
    # Triton ignores a device function's kl.constexpr annotation for runtime values (tutorial 06's
    # _attn_fwd_inner(..., offs_m: tl.constexpr, ...) gets a tensor); compiled and interpreted alike
    import torch
    import kernelc
    fn, _ = generate_ir(K.constexpr_param_gets_tensor, {"x_ptr": "*fp32", "y_ptr": "*fp32"}, {"BLOCK": 16})
    verify(fn)
    assert [o.name for o in fn.walk()].count("arange") >= 1
    x = torch.arange(16, dtype=torch.float32)
    y = torch.empty(16)
    kernelc.jit(K.constexpr_param_gets_tensor.fn, interpret=True)[(1,)](x, y, BLOCK=16)
    assert torch.equal(y, x * 2 + torch.arange(16))
