"""#28: the CPU interpreter rejects exactly what the compiler rejects, with the same message, file,
line, caret and function (one checker, kernelc/language/syntax.py, runs in both)."""

import numpy as np
import pytest

from kernelc import CompilationError
from kernelc.compiler.compiler import to_tile_ir
from kernelc.compiler.frontend.codegen import CodeGenerator
from kernelc.language import syntax

from tests import rejected_kernels as R


def _where(e):
    return e.message, e.file, e.line, e.col, e.function


@pytest.mark.parametrize("kernel", R.REJECTED, ids=lambda k: k.__name__)
def test_interpreter_and_compiler_give_the_same_error(kernel):
    with pytest.raises(CompilationError) as compiled:
        to_tile_ir(kernel, {"x_ptr": "*fp32", "n": "i32"}, {"BLOCK": 16})
    x = np.zeros(16, np.float32)
    with pytest.raises(CompilationError) as interpreted:
        kernel[(1,)](x, 16, BLOCK=16)
    assert _where(interpreted.value) == _where(compiled.value)
    assert compiled.value.line > 0
    if kernel is not R.k_return_value:       # the one rule that needs the returned value
        assert not x.any()                   # rejected before it ran


def test_errors_name_the_construct_and_point_at_it():
    with pytest.raises(CompilationError) as e:
        R.k_lambda[(1,)](np.zeros(16, np.float32), 16, BLOCK=16)
    assert e.value.message == "`lambda` is not supported in kernelc kernels"
    src = open(R.__file__).read().splitlines()[e.value.line - 1]
    assert src[e.value.col:].startswith("lambda")
    with pytest.raises(CompilationError) as e:
        R.k_recursion[(1,)](np.zeros(16, np.float32), 16, BLOCK=16)
    assert e.value.message == syntax.TOO_DEEP and e.value.function == "_recurse"
    src = open(R.__file__).read().splitlines()[e.value.line - 1]
    assert src[e.value.col:].startswith("_recurse(x, d - 1)")


def test_the_checker_supports_exactly_what_the_frontend_lowers():
    lowered = {n[len("visit_"):] for n in dir(CodeGenerator) if n.startswith("visit_")} - {"block", "Module"}
    assert lowered == {t.__name__ for t in syntax.SUPPORTED}


def test_supported_kernels_still_run_in_the_interpreter():
    import kernelc
    import kernelc.language as kl

    @kernelc.jit(interpret=True)
    def ok(x_ptr, n, BLOCK: kl.constexpr):
        offs = kl.arange(0, BLOCK)
        acc = 0.0
        for i in range(3):
            acc += i
        kl.store(x_ptr + offs, acc + R.TABLE[1], mask=offs < n)
    x = np.zeros(16, np.float32)
    ok[(1,)](x, 16, BLOCK=16)
    assert (x == 5.0).all()
