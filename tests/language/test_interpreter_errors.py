"""Interpreter errors and debugging: CompilationErrors at the kernel line, breakpoints, Python asserts."""
import functools
import io
import pdb
import sys

import numpy as np
import pytest

import kernelc
import kernelc.language as kl
from kernelc import CompilationError, InterpreterError
from kernelc.runtime.interpreter import InterpreterBuilder, launch

jit = functools.partial(kernelc.jit, interpret=True)


def _line_of(text):
    for i, line in enumerate(open(__file__), 1):
        if text in line:
            return i
    raise AssertionError(text)


def _col_of(text, sub):
    line = open(__file__).read().splitlines()[_line_of(text) - 1]
    return line.index(sub)


@jit
def typo_kernel(x_ptr, n, BLOCK: kl.constexpr):
    offs = kl.arange(0, BLOCK)
    x = kl.load(x_ptr + offs, mask=offs < n, oter=0.0)  # TYPO


@jit
def unsigned_kernel(x_ptr, BLOCK: kl.constexpr):
    x = kl.load(x_ptr + kl.arange(0, BLOCK))
    y = x < -1  # UNSIGNED


@jit
def non_tensor_kernel(x_ptr, BLOCK: kl.constexpr):
    kl.store(x_ptr + kl.arange(0, BLOCK), "oops")  # NON-TENSOR


@jit
def not_a_pointer_kernel(n, BLOCK: kl.constexpr):
    kl.load(n + kl.arange(0, BLOCK))  # NOT-A-POINTER


@jit
def shape_kernel(x_ptr):
    a = kl.arange(0, 4)
    b = kl.arange(0, 8)
    kl.store(x_ptr + a, a + b)  # SHAPES


@kernelc.jit
def bad_helper(x):
    return x + "s"  # HELPER


@jit
def calls_bad_helper(x_ptr):
    bad_helper(kl.load(x_ptr))


@jit
def undefined_name_kernel(x_ptr):
    kl.store(x_ptr, undefined_thing)  # noqa: F821  # NAME


@jit
def static_assert_kernel(x_ptr, BLOCK: kl.constexpr):
    kl.static_assert(BLOCK % 16 == 0, "BLOCK must be a multiple of 16")  # STATIC


@jit
def sum_of_pointers_kernel(x_ptr):
    kl.sum(x_ptr + kl.arange(0, 4), 0)  # PTRSUM


@jit
def python_assert_kernel(x_ptr):
    x = kl.load(x_ptr)
    assert x > 0, "x must be positive"  # PYASSERT


def _compile_error(kernel, *args, **kw):
    with pytest.raises(CompilationError) as ei:
        kernel[(1,)](*args, **kw)
    return ei.value


@pytest.mark.parametrize("kernel,args,kw,marker,col_sub,words", [
    (typo_kernel, (np.zeros(4, np.float32), 4), {"BLOCK": 4}, "# TYPO", "kl.load",
     "unexpected keyword argument 'oter'"),
    (unsigned_kernel, (np.zeros(4, np.uint32),), {"BLOCK": 4}, "# UNSIGNED", "x < -1", "negative constant -1"),
    (non_tensor_kernel, (np.zeros(4, np.float32),), {"BLOCK": 4}, "# NON-TENSOR", "kl.store",
     "expected a tensor or a number"),
    (not_a_pointer_kernel, (5,), {"BLOCK": 4}, "# NOT-A-POINTER", "kl.load", "needs a pointer"),
    (shape_kernel, (np.zeros(4, np.int32),), {}, "# SHAPES", "a + b", "cannot broadcast"),
    (undefined_name_kernel, (np.zeros(1),), {}, "# NAME", "undefined_thing", "'undefined_thing' is not defined"),
    (sum_of_pointers_kernel, (np.zeros(4),), {}, "# PTRSUM", "kl.sum", "cannot add two pointers"),
    (static_assert_kernel, (np.zeros(1),), {"BLOCK": 8}, "# STATIC", "kl.static_assert",
     "BLOCK must be a multiple of 16"),
])
def test_semantic_errors_become_compilation_errors(kernel, args, kw, marker, col_sub, words):
    e = _compile_error(kernel, *args, **kw)
    line = _line_of(marker)
    assert (e.file, e.line) == (__file__, line)
    assert e.col == _col_of(marker, col_sub)
    assert words in e.message
    text = str(e)
    assert f"{__file__}:{line}:{e.col + 1}" in text
    src = open(__file__).read().splitlines()[line - 1]
    assert src in text and "\n    " + " " * e.col + "^" in text  # the source line with a caret under it
    assert "\n" not in e.message.strip()  # one sentence


def test_error_inside_a_device_function_points_at_its_line():
    e = _compile_error(calls_bad_helper, np.zeros(1, np.float32))
    assert e.line == _line_of("# HELPER") and e.function == "bad_helper"
    assert "expected a tensor or a number" in e.message


def test_non_tensor_argument_points_at_the_parameter():
    e = _compile_error(typo_kernel, "not an array", 4, BLOCK=4)
    assert e.line == _line_of("def typo_kernel(") and e.col == _col_of("def typo_kernel(", "x_ptr")
    assert "argument 'x_ptr' must be a tensor" in e.message
    e = _compile_error(typo_kernel, [1.0, 2.0], 4, BLOCK=4)
    assert "got list" in e.message


def test_python_assert_in_kernel_is_a_runtime_error_with_program_id():
    python_assert_kernel[(1,)](np.ones(1, np.float32))
    with pytest.raises(InterpreterError) as ei:
        python_assert_kernel[(1,)](np.zeros(1, np.float32))
    assert "x must be positive" in str(ei.value) and ei.value.line == _line_of("# PYASSERT")
    assert ei.value.program_id == (0, 0, 0)


def test_other_python_errors_propagate_unchanged():
    @jit
    def k(x_ptr, FN: kl.constexpr):
        FN()

    def boom():
        raise KeyError("user bug")

    with pytest.raises(KeyError, match="user bug"):
        k[(1,)](np.zeros(1), FN=boom)


def test_breakpoint_and_printing_tiles_in_pdb():
    out = io.StringIO()
    dbg = pdb.Pdb(stdin=io.StringIO("p x.handle.tolist()\np kl.sum(x, 0)\np int(kl.program_id(0))\nc\n"),
                  stdout=out)
    dbg.use_rawinput = False

    @jit
    def k(x_ptr, BREAK: kl.constexpr):
        x = kl.load(x_ptr + kl.arange(0, 4)) * 2
        BREAK()
        kl.store(x_ptr + kl.arange(0, 4), x)

    x = np.arange(4, dtype=np.float32)
    try:
        k[(1,)](x, BREAK=lambda: dbg.set_trace(sys._getframe(1)))
    finally:
        sys.settrace(None)
    text = out.getvalue()
    assert "[0.0, 2.0, 4.0, 6.0]" in text
    assert "array(12., dtype=float32)" in text and "(Pdb) 0\n" in text
    np.testing.assert_array_equal(x, [0, 2, 4, 6])


def test_python_control_flow_on_scalar_tiles():
    @jit
    def k(x_ptr, o_ptr, n):
        acc = kl.zeros((4,), kl.float32)
        for i in kl.range(0, n):  # runtime bound: a plain Python loop here
            acc += kl.load(x_ptr + i * 4 + kl.arange(0, 4))
        if kl.sum(acc, 0) > 10:
            acc = acc * -1
        i = 0
        while i < n:
            i += 1
        for j in kl.static_range(2):
            acc += j
        kl.store(o_ptr + kl.arange(0, 4), acc + i)

    x = np.arange(12, dtype=np.float32)
    o = np.zeros(4, np.float32)
    k[(1,)](x, o, 3)
    np.testing.assert_array_equal(o, -(x.reshape(3, 4).sum(0)) + 1 + 3)


def test_tile_truthiness_needs_a_scalar():
    @jit
    def k(x_ptr):
        if kl.load(x_ptr + kl.arange(0, 4)) > 0:
            pass

    e = _compile_error(k, np.zeros(4, np.float32))
    assert "ambiguous" in e.message


def test_launch_entry_point_directly():
    from kernelc.language.core import DeviceFunction

    def add_one(x_ptr, n, BLOCK: kl.constexpr):
        offs = kl.arange(0, BLOCK)
        kl.store(x_ptr + offs, kl.load(x_ptr + offs, mask=offs < n) + 1, mask=offs < n)

    fn = DeviceFunction(add_one)
    x = np.zeros(5, np.int32)
    launch(fn, (2, 1, 1), [x, 5, 8], arg_names=["x_ptr", "n", "BLOCK"], constexpr_mask=[False, False, True],
           kernel_name="add_one")
    np.testing.assert_array_equal(x, 2)
    assert InterpreterBuilder.is_interpreter is True


def test_zero_sized_grid_runs_nothing():
    calls = []

    @jit
    def k(x_ptr, REC: kl.constexpr):
        REC(1)

    k[(0,)](np.zeros(1), REC=calls.append)
    k[(2, 0)](np.zeros(1), REC=calls.append)
    assert calls == []
