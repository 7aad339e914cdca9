"""``kernelc.autotune`` / ``kernelc.heuristics`` / ``kernelc.Config`` (Triton-compatible).

Configs are benchmarked on the GPU (the runtime issue); in the CPU interpreter the first config
that survives pruning runs, since timings there say nothing about the GPU.
"""
from __future__ import annotations

from typing import Any, Callable, Dict, List, Optional

from ..errors import OutOfResources  # noqa: F401  (Triton's triton.runtime.autotuner.OutOfResources)
from . import device as _device
from .jit import KernelInterface
from .override import overrides_for
from .tuning_key import key_values


class Config:
    """One autotuning candidate: constexpr values plus launch options.

    Example: ``kernelc.Config({"BLOCK_M": 128, "BLOCK_N": 64}, num_warps=4, num_stages=3)``
    """

    def __init__(self, kwargs: Dict[str, Any], num_warps: int = 4, num_stages: int = 3, num_ctas: int = 1,
                 maxnreg: Optional[int] = None, pre_hook: Optional[Callable] = None, ir_override: Optional[str] = None):
        if ir_override is not None:
            # Triton swaps in a hand-written IR file; kernelc has no such input (its IR is its own)
            raise NotImplementedError(f"Config(ir_override={ir_override!r}): kernelc cannot load Triton IR files; "
                                      "drop ir_override (kernelc compiles the kernel source)")
        self.ir_override = None
        self.kwargs = dict(kwargs)
        self.num_warps = num_warps
        self.num_stages = num_stages
        self.num_ctas = num_ctas
        self.maxnreg = maxnreg
        self.pre_hook = pre_hook

    def all_kwargs(self) -> Dict[str, Any]:
        out = dict(self.kwargs, num_warps=self.num_warps, num_stages=self.num_stages)
        if self.maxnreg is not None:
            out["maxnreg"] = self.maxnreg
        return out

    def __repr__(self):
        kw = ", ".join(f"{k}: {v}" for k, v in self.kwargs.items())
        return f"Config({{{kw}}}, num_warps={self.num_warps}, num_stages={self.num_stages})"

    def __eq__(self, other):
        return isinstance(other, Config) and self.all_kwargs() == other.all_kwargs()

    def __hash__(self):
        return hash(tuple(sorted(self.all_kwargs().items())))


class Autotuner(KernelInterface):
    def __init__(self, fn, arg_names: List[str], configs: List[Config], key: List[str],
                 prune_configs_by: Optional[Dict[str, Callable]] = None, reset_to_zero=None,
                 restore_value=None, warmup=None, rep=None, cache_results=False, do_bench=None,
                 pre_hook: Optional[Callable] = None, post_hook: Optional[Callable] = None, use_cuda_graph=False):
        self.fn = fn
        self.arg_names = arg_names
        self.configs = list(configs) or [Config({})]
        self.key = list(key)
        self.prune_configs_by = prune_configs_by or {}
        self.reset_to_zero = list(reset_to_zero or [])
        self.restore_value = list(restore_value or [])
        self.warmup_ms = warmup
        self.rep_ms = rep
        self.cache_results = cache_results
        self.do_bench = do_bench
        # Triton's autotuner-level hooks around every benchmarked run: pre_hook(kwargs) and
        # post_hook(kwargs, exception)
        self.pre_hook = pre_hook
        self.post_hook = post_hook
        self.use_cuda_graph = use_cuda_graph
        self.configs_timings: Optional[Dict[Config, float]] = None
        self.cache: Dict[tuple, Config] = {}
        self.best_config: Optional[Config] = None
        self.__name__ = getattr(fn, "__name__", "kernel")
        # Triton keys the cache on the key names that are parameters and ignores the others (tutorial
        # 08 ships with a misspelt key): do the same, but say so once
        unknown = [k for k in self.key if k not in arg_names]
        if unknown:
            import warnings
            warnings.warn(f"autotune key(s) {', '.join(map(repr, unknown))} of {self.__name__} are not parameters "
                          f"of the kernel and are ignored (parameters: {', '.join(arg_names)})", stacklevel=3)

    @property
    def base_fn(self):
        f = self.fn
        while not hasattr(f, "arg_names") or isinstance(f, (Autotuner, Heuristics)):
            f = f.fn
        return f

    def prune_configs(self, kwargs: Dict[str, Any], nargs: Optional[Dict[str, Any]] = None) -> List[Config]:
        """As Triton 3.6: ``early_config_prune(configs, nargs, **kwargs)`` and ``perf_model(**nargs,
        **kwargs, **config)``, where ``nargs`` are the positional arguments by name and ``kwargs`` the
        keyword arguments of the launch."""
        configs = self.configs
        nargs = dict(nargs or {})
        named_args = {**nargs, **kwargs}
        pruner = self.prune_configs_by.get("early_config_prune")
        if pruner is not None:
            configs = list(pruner(configs, nargs, **kwargs))
            if not configs:
                raise ValueError(f"early_config_prune removed every config of {self.__name__}")
        model = self.prune_configs_by.get("perf_model")
        if model is not None:
            top_k = self.prune_configs_by.get("top_k", 1.0)
            if isinstance(top_k, float) and top_k <= 1.0:
                top_k = max(1, int(len(configs) * top_k))
            elif not isinstance(top_k, int):
                raise TypeError(f"prune_configs_by['top_k'] must be an int or a float <= 1.0, got {top_k!r}")
            if len(configs) > top_k:
                est = {c: model(**named_args, **c.all_kwargs()) for c in configs}
                configs = sorted(configs, key=est.get)[:top_k]
        return configs

    def run(self, *args, grid, **kwargs):
        # runs on every launch of a tuned kernel: no function-local imports here (each costs about a microsecond)
        nargs = dict(zip(self.arg_names, args))
        named = dict(nargs, **kwargs)
        base = self.__dict__.get("_base") or self.__dict__.setdefault("_base", self.base_fn)
        forced = overrides_for(base.__name__)
        tune = not forced and not _device.interpret_requested() and not _interpreting(base)
        config = None
        if tune:
            # a key tuned before launches its pick without pruning again: as in Triton, early_config_prune and
            # perf_model run when a key is tuned, not on every launch
            try:
                config = self.cache.get(key_values(self, named))
            except TypeError:  # an unhashable key value: select_config says which
                pass
        if config is None:
            configs = self.prune_configs(kwargs, nargs)
            # Interpreter (or CPU-only machine): run the first surviving config; tuning is a GPU matter.
            config = configs[0]
            if forced:  # KERNELC_OVERRIDE: no tuning; the forced values win over the first config
                config = Config({k: v for k, v in config.kwargs.items() if k not in forced},
                                num_warps=forced.get("num_warps", config.num_warps),
                                num_stages=forced.get("num_stages", config.num_stages))
            elif tune:
                config = _select_config(self, configs, args, kwargs, grid)
        self.best_config = config
        config_kwargs = config.all_kwargs()
        if config.pre_hook is not None:
            config.pre_hook(dict(named, **config_kwargs))
        if kwargs:
            for k in config.kwargs:
                if k in kwargs:
                    raise ValueError(f"{k!r} is both passed to {self.__name__} and set by an autotune config")
            config_kwargs = dict(kwargs, **config_kwargs)
        # through a JIT kernel's generated fast path, as ``fn[grid]`` gives it (the general ``run`` binds arguments
        # with inspect, which costs more host time than a large GEMM runs; docs/performance.md)
        fast = getattr(self.fn, "_fast", None)
        if fast and callable(grid) and type(grid) is not tuple:
            return fast(grid, *args, **config_kwargs)
        return self.fn[grid](*args, **config_kwargs)


def _interpreting(fn) -> bool:
    return bool(getattr(fn, "interpret", False)) or not _device.cuda_available()


def _select_config(tuner, configs, args, kwargs, grid):
    # tuning.py imports the cache and options modules; loaded on the first tuned launch
    global _select_config
    from .tuning import select_config
    _select_config = select_config
    return select_config(tuner, configs, args, kwargs, grid)


class Heuristics(KernelInterface):
    def __init__(self, fn, arg_names: List[str], values: Dict[str, Callable]):
        self.fn = fn
        self.arg_names = arg_names
        self.values = values
        self.__name__ = getattr(fn, "__name__", "kernel")

    def run(self, *args, grid, **kwargs):
        named = dict(zip(self.arg_names, args))
        named.update(kwargs)
        for k, f in self.values.items():
            kwargs[k] = f(named)
            named[k] = kwargs[k]
        return self.fn[grid](*args, **kwargs)


def _arg_names(fn) -> List[str]:
    while not hasattr(fn, "arg_names"):
        fn = fn.fn
    return list(fn.arg_names)


def autotune(configs: List[Config], key: List[str], prune_configs_by=None, reset_to_zero=None,
             restore_value=None, pre_hook=None, post_hook=None, warmup=None, rep=None, use_cuda_graph=False,
             do_bench=None, cache_results=False):
    """Decorator: pick the fastest of ``configs`` for each value of the ``key`` arguments (Triton's
    arguments: ``prune_configs_by={"early_config_prune": f(configs, nargs, **kwargs), "perf_model": f(**nargs, **kwargs,
    **config), "top_k": n}``, ``reset_to_zero``/``restore_value`` argument names, ``pre_hook(nargs)`` /
    ``post_hook(nargs, exception)`` around each benchmarked run, ``warmup``/``rep`` ms, ``use_cuda_graph``,
    ``do_bench(fn, quantiles=...)``, ``cache_results`` to keep results on disk)."""
    def decorator(fn):
        return Autotuner(fn, _arg_names(fn), configs, key, prune_configs_by, reset_to_zero, restore_value,
                         warmup, rep, cache_results, do_bench, pre_hook, post_hook, use_cuda_graph)
    return decorator


def heuristics(values: Dict[str, Callable[[Dict[str, Any]], Any]]):
    """Decorator: compute constexprs from the other arguments, e.g. ``{"EVEN": lambda a: a["n"] % 64 == 0}``."""
    def decorator(fn):
        return Heuristics(fn, _arg_names(fn), values)
    return decorator
