"""#28: malformed grids and launch arguments get clear errors naming the kernel, the dimension or
argument and the user's call site; out-of-range offsets name the right argument; the generated CUDA
fast path hands anything unusual to the checked path. Includes hypothesis fuzzers (interpreter)."""
import sys

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import kernelc
import kernelc.language as kl
from kernelc import CompilationError, InterpreterError
from kernelc.errors import KernelError
from kernelc.runtime.grid import MAX_GRID, GridError, normalize_grid

FUZZ = settings(max_examples=150, deadline=None, derandomize=True)


@kernelc.jit(interpret=True)
def count_programs(c_ptr, n, BLOCK: kl.constexpr):
    kl.atomic_add(c_ptr, 1)


@kernelc.jit(interpret=True)
def two_args(x_ptr, y_ptr, n, BLOCK: kl.constexpr):
    offs = kl.arange(0, BLOCK)
    kl.store(x_ptr + offs + n, 1.0)


def _launch(grid):
    c = np.zeros(1, np.int32)
    count_programs[grid](c, 4, BLOCK=16)
    return int(c[0])


@pytest.mark.parametrize("grid,msg", [
    ((), "a grid has 1 to 3 dimensions, not 0"), ((1, 1, 1, 1), "1 to 3 dimensions, not 4"),
    ((-1,), "dimension x is negative"), ((2, -3), "dimension y is negative"),
    ((2.5,), r"dimension x is 2.5 \(float\), not an integer; use kernelc.cdiv"), (("4",), "dimension x is '4'"),
    ((None,), "dimension x is None"), ((True,), "dimension x is True"), ([1, [2]], r"dimension y is \[2\]"),
    ((2**31,), r"dimension x is 2147483648, more than CUDA allows \(2147483647\)"),
    ((1, 65536), r"dimension y is 65536, more than CUDA allows \(65535\)"), ((1, 1, 2**70), "dimension z"),
    (None, r"grid of count_programs is None \(NoneType\); it must be a tuple"), ("12", "grid of count_programs is '12'"),
    (lambda m: None, "the grid function of count_programs returned None"),
    (lambda m: {"x": 1}, "the grid function of count_programs returned {'x': 1}"),
    (lambda m: m["BLOCK"] / 4, r"dimension x is 4.0 \(float\)"), (lambda m: (1, 2, 3, 4), "not 4"),
])
def test_malformed_grids_name_kernel_dimension_and_call_site(grid, msg):
    with pytest.raises(GridError, match=msg) as e:
        _launch(grid)
    assert f"(launched at {__file__}:" in str(e.value)


def test_call_site_is_the_users_line():
    c = np.zeros(1, np.int32)
    line = sys._getframe().f_lineno + 2
    with pytest.raises(GridError) as e:
        count_programs[(-1,)](c, 4, BLOCK=16)
    assert str(e.value).endswith(f"(launched at {__file__}:{line})")


def test_empty_and_integer_like_grids():
    assert _launch((0,)) == 0 and _launch((3, 0, 2)) == 0          # nothing launched, as in Triton
    assert _launch(np.int64(3)) == 3 and _launch([np.int32(2), 2]) == 4
    assert _launch(lambda m: (m["n"] // 2,)) == 2
    assert normalize_grid((5,), "k") == (5, 1, 1) and normalize_grid(MAX_GRID, "k") == MAX_GRID


def test_wrong_argument_count_and_names_point_at_the_call():
    c = np.zeros(1, np.int32)
    with pytest.raises(CompilationError, match=r"launched with 1 positional .*\(launched at .*test_launch_hostile"):
        count_programs[(1,)](c, BLOCK=16)
    with pytest.raises(CompilationError, match="unexpected keyword argument 'm'"):
        count_programs[(1,)](c, 4, m=3, BLOCK=16)


def test_integer_that_does_not_fit_names_the_argument():
    c = np.zeros(1, np.int32)
    with pytest.raises(CompilationError, match="integer argument 1180591620717411303424 does not fit") as e:
        count_programs[(1,)](c, 2**70, BLOCK=16)
    assert e.value.message and "n" in str(e.value)


def test_fastpath_integer_range_check():
    from kernelc.runtime.fastpath import spec_part
    assert spec_part(2**63, False) == ("u64",) and spec_part(-2**63, False) == ("i64",)
    with pytest.raises(TypeError, match="does not fit in 64 bits"):
        spec_part(2**64)
    with pytest.raises(TypeError, match="does not fit in 64 bits"):
        spec_part(-2**63 - 1)


def test_out_of_range_offset_names_the_argument_it_came_from():
    # before: with a 1 MiB guard, an offset 2.8 MB past x_ptr's end was blamed on y_ptr
    x, y = np.zeros(16, np.float32), np.zeros(16, np.float32)
    for off in (700_000, 2**29, -2**29):
        with pytest.raises(InterpreterError, match=f"argument 'x_ptr' element offset {off} is outside"):
            two_args[(1,)](x, y, off, BLOCK=16)


def test_generated_fast_path_sends_bad_grids_and_values_to_the_checked_path():
    # CPU check of the generated CUDA launcher: a fake compiled entry records what would be launched
    torch = pytest.importorskip("torch")
    from kernelc.runtime import fastpath
    from kernelc.runtime.launcher import get_state

    @kernelc.jit
    def fp_kernel(x_ptr, n, BLOCK: kl.constexpr):
        offs = kl.arange(0, BLOCK)
        kl.store(x_ptr + offs, 1.0, mask=offs < n)
    fast = fastpath.make_binder(fp_kernel)
    x = torch.zeros(16)
    launched = []

    class Entry:
        compiled = None

        @staticmethod
        def launch(*a):
            launched.append(a[:3])
    key = ((("*", x.dtype, x.data_ptr() & 15 == 0, False), fastpath.spec_part(16), ("c", 16)), 4, 3, 0)
    get_state(fp_kernel)["cache"][key] = Entry
    fast((2, 1, 1), x, 16, BLOCK=16)
    fast(lambda m: (m["BLOCK"] // 8, 3), x, 16, BLOCK=16)
    assert launched == [(2, 1, 1), (2, 3, 1)]
    fp_kernel.interpret = True      # the checked path runs in the interpreter here
    for bad, msg in ((lambda m: 2.0, "dimension x is 2.0"), (lambda m: (1, 2**20), "dimension y"),
                     (lambda m: "x", "returned 'x'"), (lambda m: (1, -1), "negative")):
        with pytest.raises(GridError, match=msg):
            fast(bad, x, 16, BLOCK=16)
    fast(lambda m: (0,), x, 16, BLOCK=16)                          # empty: nothing launched
    with pytest.raises(CompilationError, match="does not fit in 64 bits"):
        fast((1, 1, 1), x, 2**64, BLOCK=16)
    assert launched == [(2, 1, 1), (2, 3, 1)]



def test_a_float_grid_never_reuses_the_checked_int_grid_it_equals():
    # (2.0,) == (2,) and hashes alike: the per-grid cache of checked tuples must not let the float through
    # (found on an H100, 2026-11-27: the GPU test launched (2,) first, then (2.0,) raised nothing)
    @kernelc.jit
    def g_kernel(x_ptr, BLOCK: kl.constexpr):
        kl.store(x_ptr + kl.arange(0, BLOCK), 1.0)
    seen = []
    g_kernel._fast = lambda grid, *a, **k: seen.append(grid)   # stands in for the generated CUDA fast path
    g_kernel[(2,)](None, BLOCK=16)
    g_kernel[(2,)](None, BLOCK=16)
    for bad, msg in (((2.0,), "dimension x is 2.0"), ((True,), "dimension x is True"), ((2, 1.0), "dimension y")):
        with pytest.raises(GridError, match=msg):
            g_kernel[bad]
    g_kernel[(np.int64(2),)](None, BLOCK=16)                 # an integer type that is not int is still a grid
    assert seen == [(2, 1, 1)] * 3

# -- fuzzers ------------------------------------------------------------------------------------

_SMALL = st.integers(0, 3)
_BAD_DIM = st.one_of(st.integers(max_value=-1), st.integers(min_value=2**31), st.floats(), st.text(max_size=3),
                     st.none(), st.booleans(), st.lists(st.integers(0, 2), max_size=2), st.complex_numbers())
_DIM = st.one_of(_SMALL, _SMALL.map(np.int64), _BAD_DIM)
_GRID = st.one_of(_DIM, st.lists(_DIM, max_size=5), st.lists(_DIM, max_size=5).map(tuple), st.dictionaries(
    st.text(max_size=2), _SMALL, max_size=2))


@FUZZ
@given(grid=st.one_of(_GRID, _GRID.map(lambda g: (lambda meta: g))))
def test_fuzz_grids_run_the_right_number_of_programs_or_say_why_not(grid):
    g = grid({}) if callable(grid) else grid
    try:
        n = _launch(grid)
    except GridError as e:
        assert "count_programs" in str(e) and "launched at" in str(e)
        return
    dims = [g] if not isinstance(g, (list, tuple)) else list(g)
    assert n == int(np.prod([int(d) for d in dims]))


_ARRAY = st.sampled_from(["float32", "float16", "int8", "uint64", "bool", "complex64", "float64"]).map(
    lambda dt: np.zeros(16, dt))
_VALUE = st.one_of(st.integers(), st.floats(), st.booleans(), st.none(), st.text(max_size=3), _ARRAY,
                   st.lists(st.integers(), max_size=2), st.integers(-2**40, 2**40).map(np.int64))


_OPT = st.one_of(st.integers(-2, 40), st.none(), st.floats(), st.text(max_size=2), st.booleans())


@FUZZ
@given(x=_VALUE, y=_VALUE, n=_VALUE, extra=st.dictionaries(st.sampled_from(["BLOCK", "z", "num_warps", "num_stages"]),
                                                            _OPT, max_size=3))
def test_fuzz_launch_arguments_run_or_get_an_error_naming_what_is_wrong(x, y, n, extra):
    kw = dict({"BLOCK": 16}, **extra)
    try:
        with np.errstate(all="raise"):
            two_args[(1,)](x, y, n, **kw)
    except KernelError as e:      # points at the kernel source
        assert e.file if isinstance(e, CompilationError) else str(e)
    except (ValueError, TypeError) as e:
        assert "two_args" in str(e), f"error names neither the kernel nor the argument: {e!r}"


@pytest.mark.gpu
def test_gpu_launch_paths_check_grids_and_arguments():
    torch = pytest.importorskip("torch")

    @kernelc.jit
    def gpu_fill(x_ptr, n, BLOCK: kl.constexpr):
        offs = kl.program_id(0) * BLOCK + kl.arange(0, BLOCK)
        kl.store(x_ptr + offs, 1.0, mask=offs < n)
    x = torch.zeros(256, device="cuda")
    for _ in range(2):                       # the second launch takes the generated fast path
        gpu_fill[(2,)](x, 256, BLOCK=128)
        gpu_fill[lambda m: (triton_cdiv(256, m["BLOCK"]),)](x, 256, BLOCK=128)
    torch.cuda.synchronize()
    assert bool((x == 1).all())
    x.zero_()
    gpu_fill[(0,)](x, 256, BLOCK=128)       # empty: nothing launched, no driver error
    gpu_fill[lambda m: (0, 1)](x, 256, BLOCK=128)
    torch.cuda.synchronize()
    assert not bool(x.any())
    for bad, msg in (((2.0,), "dimension x is 2.0"), (lambda m: (1, 70000), "dimension y is 70000"),
                     (lambda m: None, "returned None"), ((-1,), "negative")):
        with pytest.raises(GridError, match=msg):
            gpu_fill[bad](x, 256, BLOCK=128)
    with pytest.raises(TypeError, match="argument 'n'.*does not fit in 64 bits"):
        gpu_fill[(1,)](x, 2**64, BLOCK=128)
    with pytest.raises(TypeError, match="argument 'n'.*does not fit in fp32"):
        gpu_fill[(1,)](x, 1e300, BLOCK=128)


def triton_cdiv(a, b):
    return (a + b - 1) // b


def test_a_launch_without_a_current_context_makes_it_current_and_launches_again(monkeypatch):
    # CPU half: only CUDA_ERROR_INVALID_CONTEXT makes the context current (and asks for a second launch)
    from kernelc.runtime import driver
    made = []
    monkeypatch.setattr(driver, "ensure_context", lambda device=0: made.append(device))
    assert driver.context_made_current(driver.CUDA_ERROR_INVALID_CONTEXT, 1) and made == [1]
    assert not driver.context_made_current(700) and made == [1]   # an illegal address is not retried


@pytest.mark.gpu
def test_gpu_launch_from_a_thread_that_never_touched_cuda():
    # torch's autograd thread launched the attention backward's first kernel without a current context
    # (CUDA_ERROR_INVALID_CONTEXT on an H100, 2026-11-27)
    import threading
    torch = pytest.importorskip("torch")

    @kernelc.jit
    def fill_ones(x_ptr, BLOCK: kl.constexpr):
        kl.store(x_ptr + kl.arange(0, BLOCK), 1.0)
    x = torch.zeros(64, device="cuda")
    fill_ones[(1,)](x, BLOCK=64)                  # compiled and loaded here
    x.zero_()
    torch.cuda.synchronize()
    errors = []

    def worker():
        try:
            fill_ones[(1,)](x, BLOCK=64)
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(e)
    t = threading.Thread(target=worker)
    t.start()
    t.join()
    torch.cuda.synchronize()
    assert not errors, errors
    assert bool((x == 1).all())
