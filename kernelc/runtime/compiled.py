"""What ``JITFunction.warmup`` returns: the compiled kernel, bound to its kernel and launch options,
launchable as ``kernel[grid](*args)`` (Triton's ``CompiledKernel`` as host code uses it).

Attributes are the compiled kernel's (``n_regs``, ``n_spills``, ``asm``, ``shared``, ...) plus Triton's
``metadata`` namespace (``shared``, ``num_warps``, ``num_stages``, ``name``, ...). In the CPU interpreter
the kernel is compiled for the stand-in device (``runtime/active.py``) and launches run in the
interpreter.
"""
from __future__ import annotations

from types import SimpleNamespace
from typing import Any, Dict


class WarmedKernel:
    """A compiled kernel plus the constexpr values and options it was compiled with."""

    def __init__(self, fn, compiled, constexprs: Dict[str, Any], options: Dict[str, Any]):
        self.fn = fn
        self.compiled = compiled
        self.constexprs = dict(constexprs)
        self.options = dict(options)
        self.metadata = SimpleNamespace(
            name=compiled.name, shared=compiled.shared, num_warps=compiled.num_warps,
            num_stages=compiled.num_stages, num_ctas=1, cluster_dims=(1, 1, 1), n_regs=compiled.n_regs,
            n_spills=compiled.n_spills, global_scratch_size=compiled.global_scratch_bytes,
            target=_target_of(compiled))
        self._by_grid: Dict[tuple, Any] = {}  # integer grid -> its launcher
        # what host code reads after every warmup (tutorial 02: n_regs), without a trip through __getattr__
        self.n_regs, self.n_spills, self.shared = compiled.n_regs, compiled.n_spills, compiled.shared

    def __getattr__(self, name):
        if name in ("fn", "compiled"):  # not set yet (copy/pickle)
            raise AttributeError(name)
        if name == "_by_grid":  # a copy made without __init__
            by_grid = self.__dict__["_by_grid"] = {}
            return by_grid
        return getattr(self.compiled, name)

    def options_for(self, values, options) -> bool:
        """Whether this object stands for a warmup with these argument values and options."""
        return all(values.get(n) == v for n, v in self.constexprs.items()) and \
            all(self.options.get(k) == v for k, v in options.items())

    @property
    def n_max_threads(self) -> int:
        return 32 * self.compiled.launch_warps

    def _init_handles(self) -> None:
        """Triton loads the module here; kernelc loaded it when it compiled (nothing to do)."""

    def __getitem__(self, grid):
        # tutorial 02 launches ``kernel[(programs, 1, 1)](...)`` on every call: one launcher per integer grid
        if type(grid) is tuple:
            by_grid = self._by_grid
            launch = by_grid.get(grid)
            if launch is not None:
                for x in grid:  # (2.0,) == (2,) as a dict key: a float grid must not hit an int one
                    if type(x) is not int:
                        return self._launcher(grid)
                return launch
            launch = self._launcher(grid)
            if all(type(x) is int for x in grid):
                if len(by_grid) > 64:
                    by_grid.clear()
                by_grid[grid] = launch
            return launch
        return self._launcher(grid)

    def _launcher(self, grid):
        names = self.fn.arg_names
        n_params = len(names)
        launcher = self.fn[grid]
        # every parameter passed by position (tutorial 02's launch, each call): only the options it was warmed
        # up with are added; Python-level work per launch stays that of fn[grid](...)
        opts_all = self.__dict__.get("_opts_all")
        if opts_all is None:
            opts_all = self._opts_all = {k: v for k, v in self.options.items() if k not in names}
        direct = _positional(launcher, n_params, opts_all)
        if direct is not None:
            # the generated binder for this validated grid, its options passed by position: no partial, no dict
            fast3, g0, g1, g2, tail = direct

            def launch(*args, **kwargs):
                if not kwargs and len(args) == n_params:
                    return fast3(g0, g1, g2, *args, *tail)
                return general(*args, **kwargs)
        else:
            def launch(*args, **kwargs):
                if not kwargs and len(args) == n_params:
                    return launcher(*args, **opts_all)
                return general(*args, **kwargs)

        def general(*args, **kwargs):
            if len(args) > len(names):
                raise TypeError(f"{self.fn.__name__} takes {len(names)} arguments, {len(args)} were given")
            # arguments not passed are the constexprs it was compiled with
            for n in names[len(args):]:
                if n not in kwargs and n in self.constexprs:
                    kwargs[n] = self.constexprs[n]
            opts = {k: v for k, v in self.options.items() if k not in names and k not in kwargs}
            return self.fn[grid](*args, **kwargs, **opts)
        return launch

    def __repr__(self):
        return f"<WarmedKernel {self.compiled!r}>"


def _positional(launcher, n_params: int, opts: Dict[str, Any]):
    """``(fast3, g0, g1, g2, tail)`` where ``launcher`` is the generated binder bound to a validated grid and every
    option in ``opts`` is one of its positional parameters (``tail``: their values in its order), else None."""
    import functools
    if type(launcher) is not functools.partial or launcher.keywords or len(launcher.args) != 3:
        return None
    fast3 = launcher.func
    code = getattr(fast3, "__code__", None)
    if code is None or getattr(fast3, "__name__", "") != "fast3":
        return None
    argnames = code.co_varnames[:code.co_argcount]
    defaults = dict(zip(argnames[len(argnames) - len(fast3.__defaults__ or ()):], fast3.__defaults__ or ()))
    opt_names = argnames[3 + n_params:]
    if any(k not in opt_names for k in opts) or any(k not in defaults for k in opt_names):
        return None
    last = max((opt_names.index(k) + 1 for k in opts), default=0)
    tail = tuple(opts[k] if k in opts else defaults[k] for k in opt_names[:last])
    return (fast3, *launcher.args, tail)


def _target_of(compiled):
    from .active import GPUTarget
    arch = getattr(compiled.target, "arch", "sm_90a")
    digits = "".join(ch for ch in str(arch) if ch.isdigit())
    return GPUTarget("cuda", int(digits or 90), 32)
