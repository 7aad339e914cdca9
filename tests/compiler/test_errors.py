"""Bad input: every mistake gets a CompilationError with file:line, the source line, a caret and one
sentence saying what is wrong."""
import os
import re

import pytest

from kernelc import CompilationError
from kernelc.compiler.frontend import generate_ir

from . import kernels_frontend as K

HERE = os.path.join(os.path.dirname(__file__), "kernels_frontend.py")


def _line_of(text):
    for i, line in enumerate(open(HERE), 1):
        if text in line:
            return i
    raise AssertionError(text)


def _compile_error(kernel, sig, cx=None):
    with pytest.raises(CompilationError) as ei:
        generate_ir(kernel, sig, cx or {})
    return ei.value


CASES = [
    # kernel, signature, the offending source text, what the message must say
    (K.bad_shape, {"x_ptr": "*i32"}, "kl.store(x_ptr + a, a + b)", r"cannot broadcast tiles of shapes \[16\] and \[32\]"),
    (K.bad_runtime_constant, {"x_ptr": "*i32", "n": "i32"}, "offs = kl.arange(0, n)",
     r"arange\(\) end must be a compile-time constant"),
    (K.bad_break, {"x_ptr": "*i32", "n": "i32"}, "break", r"`break` is not supported"),
    (K.bad_not_pointer, {"x_ptr": "*i32", "n": "i32"}, "v = kl.load(n)", r"load\(\) needs a pointer .* got i32"),
    (K.bad_call_count, {"x_ptr": "*i32"}, "twice_plus(1, 2, 3)", r"twice_plus\(\): too many positional arguments"),
    (K.bad_one_branch, {"x_ptr": "*i32", "n": "i32"}, "kl.store(x_ptr, y)",
     r"'y' is not defined here: it is assigned in only one branch"),
    (K.bad_carried_type, {"x_ptr": "*fp32", "n": "i32"}, "for i in range(n):",
     r"loop-carried variable 'acc' has type <16xi32> before the loop but <16xfp32>"),
    (K.bad_return_in_loop, {"x_ptr": "*i32", "n": "i32"}, "for i in range(n):", r"`return` inside a loop"),
    (K.bad_kwarg, {"x_ptr": "*i32", "n": "i32"}, "kl.load(x_ptr, mask=n > 0, oter=0)",
     r"unexpected keyword argument 'oter'"),
    (K.bad_undefined, {"x_ptr": "*i32"}, "kl.store(x_ptr, undefined_thing)", r"name 'undefined_thing' is not defined"),
    (K.bad_async_tail, {"x_ptr": "*i32", "n": "i32"}, "kl.range(0, n, async_tail=n)",
     r"range\(async_tail=\.\.\.\) must be a compile-time True or False"),
]


@pytest.mark.parametrize("kernel,sig,src,msg", CASES, ids=[c[0].__name__ for c in CASES])
def test_error_points_at_the_line(kernel, sig, src, msg):
    e = _compile_error(kernel, sig)
    # the first occurrence of the text inside this kernel's body
    lines = open(HERE).read().splitlines()
    line = next(i for i in range(kernel.parse().lineno + 1, len(lines) + 1) if src in lines[i - 1])
    assert e.file == HERE
    assert e.line == line, str(e)
    assert re.search(msg, e.message), e.message
    text = str(e)
    # header, the source line, a caret under the column, the message
    head, src_line, caret, *rest = text.splitlines()
    assert head.startswith(f"at {HERE}:{line}:") and head.endswith(f"in {kernel.__name__}:")
    assert src.strip() in src_line
    assert caret.strip() == "^"
    assert caret.index("^") == e.col + 4 and src_line[e.col + 4] != " "
    assert "\n".join(rest).strip() == e.message


def test_error_message_example_is_readable():
    e = _compile_error(K.bad_shape, {"x_ptr": "*i32"})
    print(e)  # shown with -s; the closing note quotes it
    assert str(e).count("\n") == 3
