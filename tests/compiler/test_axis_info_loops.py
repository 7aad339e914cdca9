"""The axis analysis (passes/axis_info.py) through ``while`` loops: a value carried by an ``scf.while`` keeps
what holds for its initial value and for every value the body yields back (a block pointer advanced by a
constant keeps its offsets' divisibility; ``lower_descriptors`` needs that proof to take TMA), and loses it
when the body yields something less known."""
import kernelc
import kernelc.language as kl
from kernelc.compiler.compiler import _base_function
from kernelc.compiler.frontend import generate_ir
from kernelc.compiler.passes.axis_info import analyze


@kernelc.jit
def while_offsets(x_ptr, out_ptr, N, odd, STEP: kl.constexpr, ODD: kl.constexpr):
    i = 0
    j = 8
    acc = kl.zeros((16,), dtype=kl.float32)
    while i < N:
        acc += kl.load(x_ptr + i + kl.arange(0, 16))
        i += STEP
        if ODD:
            j += odd
        else:
            j += 4
    kl.store(out_ptr + kl.arange(0, 16), acc + i + j)


def _carried(step, odd):
    """Divisibility of the carried i and j (after the accumulator): in the before-region and as results."""
    fn, _ = generate_ir(_base_function(while_offsets), dict(x_ptr="*fp32", out_ptr="*fp32", N="i32", odd="i32"),
                        dict(STEP=step, ODD=odd), {"x_ptr": 16, "out_ptr": 16}, (), None, arch="sm_90a", num_warps=4)
    loop = next(op for op in fn.walk() if op.name == "scf.while")
    axis = analyze(fn)
    return [axis.get(a).divisibility[0] for a in loop.regions[0].args[1:3]], \
        [axis.get(r).divisibility[0] for r in loop.results[1:3]]


def test_a_constant_step_keeps_the_divisibility_of_init_and_step():
    args, results = _carried(32, False)
    assert args[0] >= 32 and args[1] == 4  # i: 0 + 32k; j: 8 + 4k
    assert results == args


def test_an_unknown_step_loses_it():
    args, _ = _carried(32, True)
    assert args[0] >= 32 and args[1] == 1  # j: 8 + odd*k
    args, _ = _carried(12, False)
    assert args[0] == 4
