"""The tile value (``tensor``), ``constexpr``, device functions and the active-builder seam.

Every language operation is written once, in ``semantic.py``, against a *builder*. Two builders
exist: the compiler's IR builder (records tile-IR ops) and the interpreter's numpy builder (computes
values eagerly). The language never imports either; whoever runs kernel code pushes its builder
with ``builder_scope``.
"""
from __future__ import annotations

import ast
import contextlib
import functools
import inspect
import textwrap
import threading
from typing import Any

from .dtypes import base_type, block_type, dtype, scalar_of, shape_of

_state = threading.local()


def current_builder():
    """The builder of the kernel being compiled or interpreted on this thread."""
    stack = getattr(_state, "stack", None)
    if not stack:
        raise RuntimeError("kernelc.language functions can only be used inside a @kernelc.jit kernel "
                           "(launched with kernel[grid](...) or compiled with kernelc.compile)")
    return stack[-1]


def has_builder() -> bool:
    return bool(getattr(_state, "stack", None))


@contextlib.contextmanager
def builder_scope(builder):
    stack = getattr(_state, "stack", None)
    if stack is None:
        stack = _state.stack = []
    stack.append(builder)
    try:
        yield builder
    finally:
        stack.pop()


class constexpr:
    """A compile-time constant. Used as an annotation (``BLOCK: kl.constexpr``) and as a wrapper.

    Arithmetic on constexprs folds in Python, so ``BLOCK // 2`` is again a constant.
    """

    def __init__(self, value):
        self.value = value.value if isinstance(value, constexpr) else value

    def __repr__(self):
        return f"constexpr[{self.value!r}]"

    def __index__(self):
        return self.value.__index__()

    def __int__(self):
        return int(self.value)

    def __float__(self):
        return float(self.value)

    def __bool__(self):
        return bool(self.value)

    def __hash__(self):
        return hash(self.value)

    def __call__(self, *args, **kwargs):
        return self.value(*args, **kwargs)

    def __getattr__(self, name):
        if name == "value":
            raise AttributeError(name)
        return getattr(self.value, name)


def _cx_binop(name):
    def fwd(self, other):
        return getattr(_unwrap(self) if not isinstance(self, constexpr) else self.value, name)(_unwrap(other))

    def rev(self, other):
        rname = "__r" + name[2:]
        return getattr(self.value, rname)(_unwrap(other))

    return fwd, rev


for _op in ("add", "sub", "mul", "truediv", "floordiv", "mod", "pow", "and", "or", "xor", "lshift",
            "rshift", "lt", "le", "gt", "ge", "eq", "ne"):
    _f, _r = _cx_binop(f"__{_op}__")
    setattr(constexpr, f"__{_op}__", _f)
    if _op not in ("lt", "le", "gt", "ge", "eq", "ne"):
        setattr(constexpr, f"__r{_op}__", _r)
constexpr.logical_and = lambda self, other: constexpr(self.value and _unwrap(other))
constexpr.logical_or = lambda self, other: constexpr(self.value or _unwrap(other))
constexpr.__neg__ = lambda self: -self.value
constexpr.__pos__ = lambda self: +self.value
constexpr.__invert__ = lambda self: ~self.value
constexpr.__abs__ = lambda self: abs(self.value)


def _unwrap(x):
    """Strip ``constexpr`` wrappers (recursively through tuples/lists)."""
    if isinstance(x, constexpr):
        return x.value
    if isinstance(x, tuple):
        return tuple(_unwrap(v) for v in x)
    if isinstance(x, list):
        return [_unwrap(v) for v in x]
    return x


def _unwrap_shape(shape) -> tuple:
    shape = _unwrap(shape)
    if isinstance(shape, int):
        return (shape,)
    out = []
    for s in shape:
        s = _unwrap(s)
        if isinstance(s, tensor):
            raise TypeError("shape dimensions must be compile-time constants (kl.constexpr), got a runtime tensor")
        if not isinstance(s, int) or isinstance(s, bool):
            raise TypeError(f"shape dimensions must be integers, got {s!r}")
        if s < 0:
            raise ValueError(f"shape dimensions must be non-negative, got {s}")
        out.append(s)
    return tuple(out)


class tensor:
    """A tile (or scalar) value inside a kernel: a builder handle plus its type.

    Python operators follow Triton's C-like semantics (``//`` and ``%`` truncate toward zero on
    integers, ``>>`` is arithmetic on signed types), with Triton's promotion and broadcasting rules.
    """

    __slots__ = ("handle", "type")

    def __init__(self, handle, type: base_type):
        self.handle = handle
        self.type = type

    # -- type information -------------------------------------------------------------------
    @property
    def dtype(self):
        return scalar_of(self.type)

    @property
    def shape(self):
        return list(shape_of(self.type))

    @property
    def numel(self):
        return self.type.numel if isinstance(self.type, block_type) else 1

    def __repr__(self):
        h = self.handle
        if hasattr(h, "dtype") and hasattr(h, "shape"):  # interpreter: show values
            return f"tensor({h!r}, dtype={self.dtype})"
        return f"tensor<{self.type}>"

    def __str__(self):
        h = self.handle
        if hasattr(h, "dtype") and hasattr(h, "shape"):
            return str(h)
        return repr(self)

    # -- conversions (interpreter only: compiled code has no Python values) ----------------------
    def _concrete(self, what):
        b = current_builder() if has_builder() else None
        if b is None or not getattr(b, "is_interpreter", False):
            raise TypeError(f"a runtime tensor cannot be used as a Python {what} in compiled code; "
                            f"use kl.where / an `if` on a scalar, or make the value a kl.constexpr")
        import numpy as np
        arr = np.asarray(self.handle)
        if arr.size != 1:
            raise TypeError(f"the {what} value of a tile with {arr.size} elements is ambiguous; "
                            f"reduce it first (kl.sum, kl.max, ...)")
        return arr.reshape(()).item()

    def __bool__(self):
        return bool(self._concrete("bool"))

    def __index__(self):
        return int(self._concrete("int"))

    def __int__(self):
        return int(self._concrete("int"))

    def __float__(self):
        return float(self._concrete("float"))

    __hash__ = None  # == builds a tensor, so tensors cannot be dict keys

    def __iter__(self):
        raise TypeError("tiles are not iterable; index them with kl.arange-based offsets or use a reduction")

    # -- shape helpers ----------------------------------------------------------------------
    @property
    def T(self):
        from . import semantic
        return semantic.trans(self, None)

    def __getitem__(self, slices):
        from . import semantic
        return semantic.getitem(self, slices)

    def to(self, dtype, fp_downcast_rounding=None, bitcast=False):
        """Cast to ``dtype`` (``bitcast=True`` reinterprets the bits)."""
        from . import semantic
        dtype = _unwrap(dtype)
        if _unwrap(bitcast):
            return semantic.bitcast(self, dtype)
        return semantic.cast(self, dtype, _unwrap(fp_downcast_rounding))


def _binop(fname, reverse=False):
    def method(self, other):
        from . import semantic
        f = getattr(semantic, fname)
        return f(other, self) if reverse else f(self, other)

    method.__name__ = fname
    return method


_BINOPS = {
    "add": "add", "sub": "sub", "mul": "mul", "truediv": "truediv", "floordiv": "floordiv",
    "mod": "mod", "and": "and_", "or": "or_", "xor": "xor_", "lshift": "shl", "rshift": "shr",
    "pow": "pow_",
}
for _py, _sem in _BINOPS.items():
    setattr(tensor, f"__{_py}__", _binop(_sem))
    setattr(tensor, f"__r{_py}__", _binop(_sem, reverse=True))
for _py, _sem in {"lt": "less", "le": "less_equal", "gt": "greater", "ge": "greater_equal",
                  "eq": "equal", "ne": "not_equal"}.items():
    setattr(tensor, f"__{_py}__", _binop(_sem))


def _unary(fname):
    def method(self):
        from . import semantic
        return getattr(semantic, fname)(self)

    return method


tensor.__neg__ = _unary("neg")
tensor.__pos__ = lambda self: self
tensor.__invert__ = _unary("invert")
tensor.__abs__ = _unary("abs")


class aggregate:
    """A kernel value made of several runtime values (block pointers, tensor descriptors).

    The compiler threads the runtime parts through loops and ``if``s one by one: ``_kc_parts``
    lists them (tensors), ``_kc_rebuild`` makes a value of the same structure from new parts, and
    ``_kc_structure`` is a hashable key of everything compile-time (values merge only when equal).
    Parts that stay the same object through a loop body are not carried at all, so compile-time
    facts about them (constants, divisibility) survive the loop.

    Example (the frontend's view of ``p = kl.advance(p, (0, 64))`` in a loop): only the parts of
    ``p`` that the body replaced -- its offsets -- become loop-carried values.
    """

    # False: the parts must not change in a loop or differ between the branches of an ``if``
    # (compiled code must see where the value was made; tensor descriptors).
    _kc_carriable = True
    _kc_what = "value"

    def _kc_parts(self) -> list:
        raise NotImplementedError

    def _kc_rebuild(self, parts) -> "aggregate":
        raise NotImplementedError

    def _kc_structure(self):
        raise NotImplementedError


def _member(fn, name=None):
    """Expose a language function as a tensor method (``x.sum(0)``, ``x.reshape(...)``)."""
    setattr(tensor, name or fn.__name__, lambda self, *a, **k: fn(self, *a, **k))
    return fn


# ---------------------------------------------------------------------------------------------
# Device functions
# ---------------------------------------------------------------------------------------------
def _call_site_error(msg):
    """A CompilationError at the call expression that called into kernelc (two frames up), located as
    the compiler locates the call node."""
    import sys
    from ..errors import CompilationError
    frame = sys._getframe(2)
    code = frame.f_code
    col = None
    try:
        pos = list(code.co_positions())[frame.f_lasti // 2]
        line, col = pos[0] or frame.f_lineno, pos[2]
    except (AttributeError, IndexError):
        line = frame.f_lineno
    return CompilationError(msg, code.co_filename, line, col, code.co_name)


class DeviceFunction:
    """A Python function that kernels may call (the base of ``@kernelc.jit``).

    The compiler inlines it from its source; the interpreter calls it directly, so breakpoints and
    prints inside it work.
    """

    def __init__(self, fn, *, noinline: bool = False):
        if not callable(fn):
            raise TypeError(f"@jit expects a function, got {fn!r}")
        self.fn = fn
        self.noinline = noinline
        self.__name__ = getattr(fn, "__name__", "kernel")
        self.__qualname__ = getattr(fn, "__qualname__", self.__name__)
        self.__module__ = getattr(fn, "__module__", None)
        self.__doc__ = getattr(fn, "__doc__", None)
        self.__globals__ = getattr(fn, "__globals__", {})
        self.signature = inspect.signature(fn)
        self.arg_names = list(self.signature.parameters)
        self.constexpr_names = {n for n, p in self.signature.parameters.items() if _is_constexpr_annotation(p.annotation)}
        self._src = None
        self._ast = None

    # Source and AST are read lazily: the interpreter never needs them.
    @property
    def src(self) -> str:
        if self._src is None:
            self._src = textwrap.dedent(inspect.getsource(self.fn))
        return self._src

    @property
    def file(self) -> str:
        return self.fn.__code__.co_filename

    @property
    def first_line(self) -> int:
        return self.fn.__code__.co_firstlineno

    def parse(self) -> ast.FunctionDef:
        """The function's AST with line numbers relative to its file."""
        if self._ast is None:
            tree = ast.parse(self.src)
            ast.increment_lineno(tree, self.first_line - 1)
            fdef = tree.body[0]
            if not isinstance(fdef, (ast.FunctionDef, ast.AsyncFunctionDef)):
                raise TypeError(f"{self.__name__} is not a plain function definition")
            # Column offsets are relative to the dedented source: record the indent to restore them.
            raw = inspect.getsource(self.fn)
            indent = len(raw) - len(raw.lstrip(" \t"))
            if indent:
                for node in ast.walk(fdef):
                    if hasattr(node, "col_offset"):
                        node.col_offset += indent
            self._ast = fdef
        return self._ast

    def __call__(self, *args, **kwargs):
        b = current_builder() if has_builder() else None
        if getattr(b, "is_interpreter", False):
            # the interpreter runs the function as Python: hold it to the compiler's rules first
            from . import syntax
            depth = getattr(b, "call_depth", 0)
            if depth >= syntax.MAX_INLINE_DEPTH:
                raise _call_site_error(syntax.TOO_DEEP)
            syntax.check(self)
            b.call_depth = depth + 1
            try:
                return self.fn(*args, **kwargs)
            finally:
                b.call_depth = depth
        raise RuntimeError(f"{self.__name__} is a kernelc kernel: launch it with {self.__name__}[grid](...), "
                           f"or call it from inside another @kernelc.jit function")

    def __repr__(self):
        return f"<kernelc function {self.__qualname__}>"


def _is_constexpr_annotation(ann) -> bool:
    if ann is constexpr:
        return True
    if isinstance(ann, str):
        return ann.split(".")[-1] == "constexpr"
    return False


def device_function(fn=None, **kw):
    """Decorator used inside the language for its own helpers (combine functions)."""
    if fn is None:
        return functools.partial(device_function, **kw)
    return DeviceFunction(fn, **kw)


# ---------------------------------------------------------------------------------------------
# Loop helpers
# ---------------------------------------------------------------------------------------------
class range:
    """A device loop: ``for i in kl.range(start, end, step, num_stages=3)``.

    Compiled as a loop with loop-carried tiles; ``num_stages`` asks the compiler to pipeline the
    loads inside it. ``warp_specialize=True`` asks for a producer warp that issues the loop's TMA
    copies while the other warps run its dots (sm_90a; False keeps it off for this loop; unset
    follows ``KERNELC_WARP_SPECIALIZE``). ``flatten=True`` on a loop over tiles that holds one loop over K asks
    for the two to run as one loop, so the K loop's ring runs across tiles (by default where the K loop loads
    only through TMA, or only through pointers, and no warp specialisation is asked for; ``KERNELC_FLATTEN_LOOPS=1``
    everywhere it can;
    the compile log says why a loop is not flattened). ``async_tail=True`` asks for the loop's last dot, read only by
    its own accumulator, to stay in flight across the back edge (as ``KERNELC_WGMMA_ASYNC_TAIL=1`` does for every
    loop; False keeps it off for this loop; unset follows the knob). ``refill_top=True`` asks for the loop's TMA ring
    to issue an iteration's copies at its top rather than after its dots, where no wgmma of the loop outlives its
    iteration (as ``KERNELC_TMA_REFILL_TOP=1`` does for every loop; False keeps it off; unset follows the knob). In the
    interpreter it is a plain Python range.
    """

    def __init__(self, arg1, arg2=None, step=None, num_stages=None, loop_unroll_factor=None,
                 disallow_acc_multi_buffer=False, flatten=False, warp_specialize=None, disable_licm=False,
                 async_tail=None, refill_top=None):
        if arg2 is None:
            self.start, self.end = 0, arg1
        else:
            self.start, self.end = arg1, arg2
        self.step = 1 if step is None else step
        self.num_stages = _unwrap(num_stages)
        self.loop_unroll_factor = _unwrap(loop_unroll_factor)
        self.flatten = _unwrap(flatten)
        self.warp_specialize = _unwrap(warp_specialize)
        self.async_tail = _unwrap(async_tail)
        self.refill_top = _unwrap(refill_top)

    def __iter__(self):
        import builtins
        return iter(builtins.range(int(_unwrap(self.start)), int(_unwrap(self.end)), int(_unwrap(self.step))))


class static_range:
    """A loop unrolled at compile time; bounds must be constexprs."""

    def __init__(self, arg1, arg2=None, step=None):
        if arg2 is None:
            self.start, self.end = 0, arg1
        else:
            self.start, self.end = arg1, arg2
        self.step = 1 if step is None else step
        for v in (self.start, self.end, self.step):
            if isinstance(_unwrap(v), tensor):
                raise TypeError("static_range bounds must be compile-time constants (kl.constexpr)")

    def __iter__(self):
        import builtins
        return iter(builtins.range(_unwrap(self.start), _unwrap(self.end), _unwrap(self.step)))


def is_tensor(x) -> bool:
    return isinstance(x, tensor)


def dtype_of(x):
    return x.dtype if isinstance(x, tensor) else None


__all__ = ["tensor", "constexpr", "DeviceFunction", "device_function", "range", "static_range",
           "current_builder", "builder_scope", "has_builder", "dtype"]


# ---------------------------------------------------------------------------------------------
# Device-library calls written the way Triton's own libdevice wrappers are (``core.extern``)
# ---------------------------------------------------------------------------------------------


def extern(fn):
    """Decorator of device-library wrappers (Triton's ``core.extern``): the function runs as written."""
    return fn


def extern_elementwise(lib_name, lib_path, args, arg_type_symbol_dict, is_pure, _semantic=None):
    """Call a libdevice (``__nv_*``) function per element, picking the symbol by the argument types.

    ``arg_type_symbol_dict`` maps a tuple of argument dtypes to ``(symbol, result dtype)``, as in
    Triton. Only libdevice symbols are supported: kernelc links NVIDIA's libdevice and nothing else.
    """
    from . import semantic
    from .extra.libdevice_abi import SYMBOLS
    table = {}
    for key, (symbol, ret) in dict(_unwrap(arg_type_symbol_dict)).items():
        symbol = _unwrap(symbol)
        if symbol not in SYMBOLS:
            raise TypeError(f"tl.extern_elementwise symbol {symbol!r} is not supported by kernelc: only "
                            f"libdevice functions (__nv_*) can be called (library {lib_name or 'libdevice'!r})")
        table[tuple(str(getattr(_unwrap(t), "name", _unwrap(t))) for t in key)] = (
            symbol, str(getattr(_unwrap(ret), "name", _unwrap(ret))))
    return semantic.extern_elementwise("extern_elementwise", [_unwrap(a) for a in _unwrap(args)], table)
