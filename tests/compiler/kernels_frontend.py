"""Kernels used by the frontend tests (kept in a file so their source and line numbers are stable)."""
import kernelc
import kernelc.language as kl

LIMIT = 7  # a plain global, folded as a constant


@kernelc.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: kl.constexpr):
    pid = kl.program_id(0)
    offs = pid * BLOCK + kl.arange(0, BLOCK)
    mask = offs < n
    x = kl.load(x_ptr + offs, mask=mask)
    y = kl.load(y_ptr + offs, mask=mask, other=0.0)
    kl.store(out_ptr + offs, x + y, mask=mask)


@kernelc.jit
def twice_plus(a, b):
    return a * 2 + b


@kernelc.jit
def control_flow(x_ptr, n, FLAG: kl.constexpr):
    pid = kl.program_id(0)
    if pid >= n:
        return
    acc = 0
    for i in range(0, n):
        acc += i
    if FLAG:
        acc = twice_plus(acc, LIMIT)
    v = 1.0
    if acc > 3:
        v = 2.0
    j = 0
    while j < n:
        j += 2
    for k in kl.static_range(3):
        acc = acc + k
    kl.store(x_ptr + pid, acc + j + v.to(kl.int32))


@kernelc.jit
def reduce_kernel(x_ptr, out_ptr, BLOCK: kl.constexpr):
    x = kl.load(x_ptr + kl.arange(0, BLOCK))
    kl.store(out_ptr, kl.sum(x, axis=0))
    kl.store(out_ptr + 1, kl.argmax(x, axis=0).to(kl.float32))


# ---- kernels with mistakes ----------------------------------------------------------------------
@kernelc.jit
def bad_shape(x_ptr):
    a = kl.arange(0, 16)
    b = kl.arange(0, 32)
    kl.store(x_ptr + a, a + b)


@kernelc.jit
def bad_runtime_constant(x_ptr, n):
    offs = kl.arange(0, n)
    kl.store(x_ptr + offs, offs)


@kernelc.jit
def bad_break(x_ptr, n):
    for i in range(n):
        break


@kernelc.jit
def bad_not_pointer(x_ptr, n):
    v = kl.load(n)
    kl.store(x_ptr, v)


@kernelc.jit
def bad_call_count(x_ptr):
    kl.store(x_ptr, twice_plus(1, 2, 3))


@kernelc.jit
def bad_one_branch(x_ptr, n):
    if n > 0:
        y = n
    kl.store(x_ptr, y)


@kernelc.jit
def bad_carried_type(x_ptr, n):
    acc = kl.zeros((16,), kl.int32)
    for i in range(n):
        acc = acc.to(kl.float32) + 1.0
    kl.store(x_ptr + kl.arange(0, 16), acc)


@kernelc.jit
def bad_return_in_loop(x_ptr, n):
    for i in range(n):
        return


@kernelc.jit
def bad_kwarg(x_ptr, n):
    kl.load(x_ptr, mask=n > 0, oter=0)


@kernelc.jit
def bad_undefined(x_ptr):
    kl.store(x_ptr, undefined_thing)  # noqa: F821


@kernelc.jit
def _scale_rows(x, offs: kl.constexpr, SCALE: kl.constexpr):
    return x * SCALE + offs


@kernelc.jit
def constexpr_param_gets_tensor(x_ptr, y_ptr, BLOCK: kl.constexpr):
    offs = kl.arange(0, BLOCK)  # a runtime tensor passed where the callee says kl.constexpr (Triton's tutorial 06)
    kl.store(y_ptr + offs, _scale_rows(kl.load(x_ptr + offs), offs, 2))


@kernelc.jit
def bad_async_tail(x_ptr, n):
    acc = kl.zeros([16], dtype=kl.int32)
    for i in kl.range(0, n, async_tail=n):
        acc += kl.load(x_ptr + kl.arange(0, 16))
    kl.store(x_ptr + kl.arange(0, 16), acc)
