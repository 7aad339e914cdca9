"""Kernels the compiler rejects (tests/language/test_interpreter_rejects_like_compiler.py): each one
runs as plain Python, so before #28 the CPU interpreter ran it without a word."""
import kernelc
import kernelc.language as kl

jit = kernelc.jit(interpret=True)
TABLE = [1.0, 2.0]


def _k(fn):
    return kernelc.jit(fn, interpret=True)


@_k
def k_break(x_ptr, n, BLOCK: kl.constexpr):
    offs = kl.arange(0, BLOCK)
    for i in range(4):
        if i == 2:
            break
    kl.store(x_ptr + offs, 1.0)


@_k
def k_continue(x_ptr, n, BLOCK: kl.constexpr):
    offs = kl.arange(0, BLOCK)
    for i in range(4):
        continue
    kl.store(x_ptr + offs, 1.0)


@_k
def k_try(x_ptr, n, BLOCK: kl.constexpr):
    offs = kl.arange(0, BLOCK)
    try:
        kl.store(x_ptr + offs, 1.0)
    except Exception:
        pass


@_k
def k_with(x_ptr, n, BLOCK: kl.constexpr):
    offs = kl.arange(0, BLOCK)
    with open(__file__):
        kl.store(x_ptr + offs, 1.0)


@_k
def k_raise(x_ptr, n, BLOCK: kl.constexpr):
    offs = kl.arange(0, BLOCK)
    if BLOCK < 0:
        raise ValueError("never")
    kl.store(x_ptr + offs, 1.0)


@_k
def k_lambda(x_ptr, n, BLOCK: kl.constexpr):
    offs = kl.arange(0, BLOCK)
    f = lambda v: v * 2.0  # noqa: E731
    kl.store(x_ptr + offs, f(1.0))


@_k
def k_listcomp(x_ptr, n, BLOCK: kl.constexpr):
    offs = kl.arange(0, BLOCK)
    vals = [v * 2.0 for v in TABLE]
    kl.store(x_ptr + offs, vals[0])


@_k
def k_genexp(x_ptr, n, BLOCK: kl.constexpr):
    offs = kl.arange(0, BLOCK)
    kl.store(x_ptr + offs, sum(v for v in TABLE))


@_k
def k_dictcomp(x_ptr, n, BLOCK: kl.constexpr):
    offs = kl.arange(0, BLOCK)
    d = {i: v for i, v in enumerate(TABLE)}
    kl.store(x_ptr + offs, d[0])


@_k
def k_dict(x_ptr, n, BLOCK: kl.constexpr):
    offs = kl.arange(0, BLOCK)
    d = {"a": 1.0}
    kl.store(x_ptr + offs, d["a"])


@_k
def k_walrus(x_ptr, n, BLOCK: kl.constexpr):
    offs = kl.arange(0, BLOCK)
    kl.store(x_ptr + offs, (v := 1.0))


@_k
def k_for_else(x_ptr, n, BLOCK: kl.constexpr):
    offs = kl.arange(0, BLOCK)
    for i in range(2):
        pass
    else:
        kl.store(x_ptr + offs, 1.0)


@_k
def k_while_else(x_ptr, n, BLOCK: kl.constexpr):
    offs = kl.arange(0, BLOCK)
    i = 0
    while i < 2:
        i += 1
    else:
        kl.store(x_ptr + offs, 1.0)


@_k
def k_return_in_loop(x_ptr, n, BLOCK: kl.constexpr):
    offs = kl.arange(0, BLOCK)
    for i in range(2):
        if i == 5:
            return
    kl.store(x_ptr + offs, 1.0)


@_k
def k_return_value(x_ptr, n, BLOCK: kl.constexpr):
    offs = kl.arange(0, BLOCK)
    kl.store(x_ptr + offs, 1.0)
    return offs


@kernelc.jit
def _recurse(x, d: kl.constexpr):
    if d > 0:
        return _recurse(x, d - 1)
    return x


@_k
def k_recursion(x_ptr, n, BLOCK: kl.constexpr):
    offs = kl.arange(0, BLOCK)
    kl.store(x_ptr + offs, _recurse(1.0, 40))


@kernelc.jit
def _helper_with_break(x):
    for i in range(3):
        break
    return x


@_k
def k_device_function_break(x_ptr, n, BLOCK: kl.constexpr):
    offs = kl.arange(0, BLOCK)
    kl.store(x_ptr + offs, _helper_with_break(1.0))


@_k
def k_nested_def(x_ptr, n, BLOCK: kl.constexpr):
    offs = kl.arange(0, BLOCK)

    def inner(v):
        return v
    kl.store(x_ptr + offs, inner(1.0))


@_k
def k_subscript_assign(x_ptr, n, BLOCK: kl.constexpr):
    offs = kl.arange(0, BLOCK)
    vals = [1.0, 2.0]
    vals[0] = 3.0
    kl.store(x_ptr + offs, vals[0])


@_k
def k_attribute_assign(x_ptr, n, BLOCK: kl.constexpr):
    offs = kl.arange(0, BLOCK)
    k_attribute_assign.seen = 1
    kl.store(x_ptr + offs, 1.0)


@_k
def k_augassign_subscript(x_ptr, n, BLOCK: kl.constexpr):
    offs = kl.arange(0, BLOCK)
    vals = [1.0]
    vals[0] += 1.0
    kl.store(x_ptr + offs, vals[0])


@_k
def k_starred_assign(x_ptr, n, BLOCK: kl.constexpr):
    offs = kl.arange(0, BLOCK)
    a, *rest = (1.0, 2.0, 3.0)
    kl.store(x_ptr + offs, a)


@_k
def k_global(x_ptr, n, BLOCK: kl.constexpr):
    global TABLE
    offs = kl.arange(0, BLOCK)
    kl.store(x_ptr + offs, TABLE[0])


@_k
def k_del(x_ptr, n, BLOCK: kl.constexpr):
    offs = kl.arange(0, BLOCK)
    y = 1.0
    del y
    kl.store(x_ptr + offs, 1.0)


@_k
def k_import(x_ptr, n, BLOCK: kl.constexpr):
    import math
    offs = kl.arange(0, BLOCK)
    kl.store(x_ptr + offs, math.pi)


@_k
def k_set(x_ptr, n, BLOCK: kl.constexpr):
    offs = kl.arange(0, BLOCK)
    s = {1.0}
    kl.store(x_ptr + offs, 1.0)


@_k
def k_match(x_ptr, n, BLOCK: kl.constexpr):
    offs = kl.arange(0, BLOCK)
    match BLOCK:
        case 16:
            kl.store(x_ptr + offs, 1.0)




@kernelc.jit
def _combine_with_lambda(a, b):
    f = lambda u, v: u + v  # noqa: E731
    return f(a, b)


@_k
def k_combine_function_lambda(x_ptr, n, BLOCK: kl.constexpr):
    offs = kl.arange(0, BLOCK)
    kl.store(x_ptr + offs, kl.reduce(kl.load(x_ptr + offs), 0, _combine_with_lambda))


REJECTED = [v for k, v in sorted(globals().items()) if k.startswith("k_")]
