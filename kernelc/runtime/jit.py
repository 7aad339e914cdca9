"""``@kernelc.jit``: a kernel object that binds arguments, resolves the grid, picks a backend
(CUDA or the CPU interpreter) and fires launch hooks."""
from __future__ import annotations

import functools
import inspect
from typing import Any, Callable, Dict, Iterable, List, Optional, Tuple

from ..errors import CompilationError
from ..language.core import DeviceFunction, constexpr
from . import hooks
from .fastpath import spec_part
from .device import interpret_requested  # noqa: F401 (kernelc.runtime.jit.interpret_requested, used by callers)
from .device import current_device as _current_device, warmup_knobs as _warm_env
from .grid import call_site, normalize_grid
from ..options import get as option

# extern_libs: Triton's custom libdevice path; kernelc links its own libdevice (accepted, not used)
LAUNCH_OPTIONS = ("num_warps", "num_stages", "num_ctas", "maxnreg", "stream", "enable_fp_fusion",
                  "launch_cooperative_grid", "warmup", "extern_libs")
SHARED_OPTIONS = ("num_warps", "num_stages")  # options a kernel parameter of the same name also sets
_warned = set()


def _warn_once(key, msg):
    # said once per process on stderr (not through `warnings`, which would point into kernelc)
    if key not in _warned:
        _warned.add(key)
        import sys
        print(msg, file=sys.stderr)


class KernelInterface:
    """Anything launchable as ``kernel[grid](*args, **kwargs)``."""

    def __getitem__(self, grid) -> Callable:
        return lambda *args, **kwargs: self.run(*args, grid=grid, **kwargs)


_fast_enabled = None


def _fast_path_enabled() -> bool:
    global _fast_enabled
    if _fast_enabled is None:
        from .device import cuda_available
        _fast_enabled = cuda_available() and not interpret_requested()
    return _fast_enabled

    def run(self, *args, grid, **kwargs):  # pragma: no cover - abstract
        raise NotImplementedError


class JITFunction(DeviceFunction, KernelInterface):
    """A ``@kernelc.jit`` kernel. Launch with ``kernel[grid](*args, BLOCK=..., num_warps=4)``."""

    def __init__(self, fn, *, do_not_specialize: Iterable = (), debug: Optional[bool] = None,
                 noinline: bool = False, interpret: Optional[bool] = None,
                 launch_metadata: Optional[Callable] = None, repr: Optional[Callable] = None):
        super().__init__(fn, noinline=noinline)
        dns = []
        for d in do_not_specialize:
            dns.append(self.arg_names[d] if isinstance(d, int) else d)
        for d in dns:
            if d not in self.arg_names:
                raise ValueError(f"do_not_specialize names {d!r}, which is not a parameter of {self.__name__}")
        self.do_not_specialize = frozenset(dns)
        self.debug = debug
        self.interpret = interpret
        self.launch_metadata = launch_metadata
        self.repr = repr
        self.params = list(self.signature.parameters.values())
        self._backend = None  # the CUDA launcher, created on first GPU launch
        self._fast = None  # generated launch fast path (False: not available)
        self._bound: Dict[tuple, Callable] = {}  # grid tuple -> fast path bound to it
        self._warmed: Dict[int, Any] = {}  # id(compiled kernel) -> what warmup returned for it
        self._warm_memo: Dict[tuple, Any] = {}  # warmup's arguments as a launch key -> what it returned

    def __getitem__(self, grid) -> Callable:
        fast = self._fast
        if fast:
            if type(grid) is tuple:
                bound = self._bound.get(grid)
                for x in grid:  # (2.0,) == (2,) as a dict key: a float or bool grid must not hit a checked one
                    if type(x) is not int:
                        bound = None
                        break
                if bound is None:
                    if len(self._bound) > 64:
                        self._bound.clear()
                    # validated once per distinct grid; the fast path launches it as given
                    g3 = normalize_grid(grid, self.__name__)
                    if not all(g3):
                        bound = lambda *args, **kwargs: self.run(*args, grid=g3, **kwargs)  # noqa: E731
                    else:
                        fast3 = getattr(fast, "fast3", None)
                        bound = functools.partial(fast3, *g3) if fast3 is not None else functools.partial(fast, g3)
                    self._bound[grid] = bound
                return bound
            if not callable(grid):
                grid = normalize_grid(grid, self.__name__)
                if not all(grid):  # an empty grid launches nothing: the general path
                    return lambda *args, **kwargs: self.run(*args, grid=grid, **kwargs)
            return functools.partial(fast, grid)
        if fast is None and self._make_fast():
            return self[grid]
        return lambda *args, **kwargs: self.run(*args, grid=grid, **kwargs)

    def prepare(self, grid, *args, **options) -> Callable:
        """``launch(*tensors, stream=None)``: ``self[grid](*args, **options)`` with the call's tensors (and
        descriptors) in place of those in ``args``, everything else fixed (``runtime/prepared.py``)."""
        from .prepared import prepare
        return prepare(self, grid, args, options)

    def _make_fast(self):
        """The generated launch fast path, made once (False where it does not apply)."""
        if self._fast is None:
            fast = False
            from .override import overrides_for
            if self.interpret is not True and _fast_path_enabled() and overrides_for(self.__name__) is None \
                    and not option("KERNELC_LAUNCH_BLOCKING"):
                from .launcher import fast_launcher
                fast = fast_launcher(self) or False
            self._fast = fast
        return self._fast

    # -- argument binding ------------------------------------------------------------------
    def bind(self, args, kwargs) -> Tuple[Dict[str, Any], Dict[str, Any]]:
        """Split call arguments into (kernel arguments by name, launch options)."""
        options = {k: kwargs.pop(k) for k in list(kwargs) if k in LAUNCH_OPTIONS and k not in self.arg_names}
        try:
            bound = self.signature.bind(*args, **kwargs)
        except TypeError as e:
            n_req = sum(1 for p in self.params if p.default is inspect.Parameter.empty)
            raise CompilationError(
                f"{self.__name__}() was launched with {len(args)} positional and {len(kwargs)} keyword "
                f"arguments but takes {n_req} required parameters ({', '.join(self.arg_names)}): {e}"
                f"{call_site()}",
                self.file, self.first_line, self._def_col(), self.__name__) from None
        bound.apply_defaults()
        values = {}
        for name, v in bound.arguments.items():
            values[name] = v.value if isinstance(v, constexpr) else v
        # A parameter named like a compile option (Triton's tutorial softmax takes ``num_stages``) is
        # both the kernel argument and the option, as in Triton.
        for k in SHARED_OPTIONS:
            if isinstance(values.get(k), int):
                options[k] = values[k]
        return values, options

    def _option_int(self, options, name, default, what, ok) -> int:
        v = options.get(name, default)
        if isinstance(v, bool) or not hasattr(v, "__index__") or not ok(v.__index__()):
            raise ValueError(f"{name} of {self.__name__} must be {what}, got {v!r}{call_site()}")
        return v.__index__()

    def _def_col(self) -> int:
        try:
            return self.parse().col_offset
        except Exception:
            return 0

    def constexpr_mask(self, values: Dict[str, Any]) -> List[bool]:
        # None arguments are compile-time constants, as in Triton.
        return [n in self.constexpr_names or values[n] is None for n in self.arg_names]

    # -- launch ----------------------------------------------------------------------------
    def run(self, *args, grid, warmup=False, **kwargs):
        from .override import overrides_for
        forced = overrides_for(self.__name__)
        if forced:
            unknown = sorted(k for k in forced if k not in self.arg_names and k not in LAUNCH_OPTIONS)
            if unknown:
                raise ValueError(f"KERNELC_OVERRIDE sets {', '.join(unknown)} for {self.__name__}, which has no such "
                                 f"parameter or launch option (parameters: {', '.join(self.arg_names)})")
            kwargs.update(forced)
        values, options = self.bind(args, kwargs)
        num_warps = self._option_int(options, "num_warps", 4, "a power of two from 1 to 32",
                                     lambda v: 1 <= v <= 32 and not v & (v - 1))
        num_stages = self._option_int(options, "num_stages", 3, "an integer from 0 to 16", lambda v: 0 <= v <= 16)
        meta = dict(values, num_warps=num_warps, num_stages=num_stages)
        grid3 = normalize_grid(grid, self.__name__, meta)
        if self._use_interpreter(values):
            return self._run_interpreter(values, grid3, num_warps, num_stages, options, warmup)
        return self._run_cuda(values, grid3, num_warps, num_stages, options, warmup)

    def _use_interpreter(self, values) -> bool:
        if self.interpret is not None:
            return bool(self.interpret)
        if interpret_requested():
            return True
        from .device import cuda_available
        if not cuda_available():
            _warn_once("no-gpu", "kernelc: no CUDA GPU found; running kernels in the CPU interpreter")
            return True
        # CPU-resident tensors (also as TensorDescriptor bases) cannot be read by a GPU kernel.
        if any(getattr(getattr(v, "device", None), "type", "cuda") == "cpu" for v in values.values()
               if hasattr(v, "data_ptr") or hasattr(v, "block_shape")):
            _warn_once("cpu-tensors", "kernelc: arguments live on the CPU; running in the interpreter")
            return True
        return False

    def _record(self, values, mask, grid3, num_warps, num_stages, backend, stream=None, compiled=None, shared=0,
                cache_key=None):
        vals = list(values.values()) if isinstance(values, dict) else list(values)
        return hooks.LaunchRecord(self.__name__, grid3, num_warps, num_stages, shared, stream, backend, compiled,
                                  cache_key, self, vals, mask, self.launch_metadata)

    def _run_interpreter(self, values, grid3, num_warps, num_stages, options, warmup):
        from . import interpreter
        if warmup:
            from .launcher import compile_offline
            return compile_offline(self, values, num_warps, num_stages, options.get("enable_fp_fusion"),
                                   options.get("maxnreg"))
        mask = self.constexpr_mask(values)
        rec = None
        if hooks.any_registered():
            rec = self._record(values, mask, grid3, num_warps, num_stages, "interpreter")
            hooks.fire_enter(rec)
        interpreter.launch(self, grid3, [values[n] for n in self.arg_names], arg_names=self.arg_names,
                           constexpr_mask=mask, kernel_name=self.__name__, num_warps=num_warps)
        if rec is not None:
            hooks.fire_exit(rec)
        return None

    def _run_cuda(self, values, grid3, num_warps, num_stages, options, warmup):
        from .launcher import launch_cuda
        return launch_cuda(self, values, grid3, num_warps, num_stages, options, warmup)

    def warmup(self, *args, grid=(1,), **kwargs):
        """Compile for these arguments without launching; returns the compiled kernel (``n_regs``,
        ``n_spills``, ``metadata.shared``, ``asm``), launchable as ``kernel[grid](*args)``.

        Example::

            k = softmax_kernel.warmup(y, x, n_cols, BLOCK=1024, num_warps=8, grid=(1,))
            occupancy = 65536 // (k.n_regs * 32 * 8)
            k[(n_programs,)](y, x, n_cols)
        """
        # host code may warm up before every launch (Triton's tutorial 02 does, to read n_regs): a call whose
        # arguments specialise as an earlier one's, under the same KERNELC_OVERRIDE / KERNELC_INTERPRET text and
        # on the same device, returns the same object without binding, the override table or a cache lookup
        fast = self._fast
        if fast is None:
            fast = self._make_fast()
        warm_key = getattr(fast, "warm_key", None)
        memo = None
        if warm_key is not None:
            try:
                memo = warm_key(*args, **kwargs)
            except TypeError:  # wrong arguments (the general path says what is wrong), an unhashable constexpr
                memo = None
            if memo is not None:  # with the knobs and the device (fastpath.make_binder)
                try:
                    hit = self._warm_memo.get(memo)
                except TypeError:  # an unhashable constexpr: not memoised
                    hit = memo = None
                if hit is not None:
                    return hit
        from .override import overrides_for
        forced = overrides_for(self.__name__)
        if forced:  # never memoised: the memo cannot hit under this override text
            memo = None
        elif memo is None:  # no generated binding, or one that cannot key these arguments
            memo = self._warmup_key(args, kwargs)
            if memo is not None:
                try:
                    hit = self._warm_memo.get(memo)
                except TypeError:
                    hit = memo = None
                if hit is not None:
                    return hit
        w = self._warmup(args, kwargs, forced)
        if memo is not None:
            if len(self._warm_memo) > 256:
                self._warm_memo.clear()
            self._warm_memo[memo] = w
        return w

    def _warmup_key(self, args, kwargs):
        """What decides warmup's result where there is no generated binding (None: not keyable)."""
        names = self.arg_names
        if len(args) > len(names):
            return None
        try:
            def part(name, v):
                if name not in names or name in self.constexpr_names or v is None:
                    return ("c", type(v), v)
                return spec_part(v, name not in self.do_not_specialize)
            key = (tuple(part(n, v) for n, v in zip(names, args)),
                   tuple((k, part(k, kwargs[k])) for k in sorted(kwargs)),
                   _warm_env(), _current_device())
            hash(key)
            return key
        except TypeError:  # an unhashable constexpr, an argument kernelc cannot pass: the general path
            return None

    def _warmup(self, args, kwargs, forced):
        from .compiled import WarmedKernel
        if forced:
            kwargs.update(forced)
        values, options = self.bind(args, kwargs)
        num_warps = int(options.get("num_warps", 4))
        num_stages = int(options.get("num_stages", 3))
        if self._use_interpreter(values):
            compiled = self._run_interpreter(values, (1, 1, 1), num_warps, num_stages, options, True)
        else:
            compiled = self._run_cuda(values, (1, 1, 1), num_warps, num_stages, options, True)
        # host code may warm up before every launch (Triton's tutorial 02 does): one object per compiled kernel
        cached = self._warmed.get(id(compiled))
        if cached is not None and cached.compiled is compiled and cached.options_for(values, options):
            return cached
        constexprs = {n: values[n] for n, cx in zip(self.arg_names, self.constexpr_mask(values)) if cx}
        options.setdefault("num_warps", num_warps)
        options.setdefault("num_stages", num_stages)
        w = self._warmed[id(compiled)] = WarmedKernel(self, compiled, constexprs, options)
        return w


def jit(fn=None, *, do_not_specialize: Iterable = (), debug: Optional[bool] = None, noinline: bool = False,
        interpret: Optional[bool] = None, launch_metadata: Optional[Callable] = None, repr=None, **_ignored):
    """Compile a Python function into a GPU kernel (or run it in the CPU interpreter).

    Example::

        @kernelc.jit
        def scale(x_ptr, n, s, BLOCK: kl.constexpr):
            offs = kl.program_id(0) * BLOCK + kl.arange(0, BLOCK)
            kl.store(x_ptr + offs, kl.load(x_ptr + offs, mask=offs < n) * s, mask=offs < n)

        scale[(kernelc.cdiv(n, 1024),)](x, n, 2.0, BLOCK=1024)
    """
    def wrap(f):
        return JITFunction(f, do_not_specialize=do_not_specialize, debug=debug, noinline=noinline,
                           interpret=interpret, launch_metadata=launch_metadata, repr=repr)

    return wrap(fn) if fn is not None else wrap
