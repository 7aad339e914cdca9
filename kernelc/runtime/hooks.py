"""Launch hooks: the seam through which tools (the kprof profiler) observe kernelc launches.

Register ``enter``/``exit`` callbacks; each receives one ``LaunchRecord``. ``launch_metadata`` (the
user's flops/bytes function) is evaluated lazily, only when a hook reads it, and with no hook
registered a launch pays one truthiness check.

Example::

    from kernelc.runtime import hooks

    def on_enter(rec):
        print(rec.name, rec.grid, rec.launch_metadata.get("flops"))

    handle = hooks.register(enter=on_enter)
    ...
    hooks.unregister(handle)
"""
from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Optional, Tuple

# Read on every launch: a plain list so the no-hook check is `if _enter_hooks:`.
_enter_hooks: List[Callable] = []
_exit_hooks: List[Callable] = []
_lock = threading.Lock()


@dataclass
class ArgInfo:
    name: str
    kind: str  # "tensor" | "int" | "float" | "bool" | "none" | "constexpr" | "other"
    dtype: Optional[str] = None
    shape: Optional[Tuple[int, ...]] = None
    value: Any = None  # scalars and constexprs only
    strides: Optional[Tuple[int, ...]] = None  # tensors, in elements (a replay rebuilds the same views)


class KernelMetadata(dict):
    """The second argument of ``launch_metadata(grid, kernel, args)``. Triton passes its compiled
    kernel's metadata there, read as attributes (tutorial 09 names its frames ``kernel.name``);
    kernelc's own callers read the constexprs and ``num_warps``/``num_stages`` as items. Both work."""

    name: str = ""
    shared: int = 0
    hash = None
    num_ctas = 1

    def __getattr__(self, item):
        try:
            return self[item]
        except KeyError:
            raise AttributeError(f"launch metadata has no {item!r} (it has name, shared, hash, num_ctas and "
                                 f"{', '.join(map(repr, self)) or 'no other keys'})") from None


class LaunchRecord:
    """Everything a tool may want about one launch. Cheap to create: argument details, constexprs and
    the user's ``launch_metadata`` are computed only when read."""

    __slots__ = ("name", "grid", "num_warps", "num_stages", "shared", "stream", "backend", "compiled", "cache_key",
                 "function", "_values", "_cmask", "_metadata_fn", "_metadata", "_args", "_constexprs")

    def __init__(self, name, grid, num_warps, num_stages, shared, stream, backend, compiled=None, cache_key=None,
                 function=None, values=None, cmask=None, metadata_fn=None):
        self.name = name
        self.grid = grid
        self.num_warps = num_warps
        self.num_stages = num_stages
        self.shared = shared
        self.stream = stream
        self.backend = backend  # "cuda" | "interpreter"
        self.compiled = compiled  # CompiledKernel (asm, source map, cache key) when backend == "cuda"
        self.cache_key = cache_key
        self.function = function  # the JITFunction
        self._values = values  # argument values in parameter order
        self._cmask = cmask  # which parameters are constexprs
        self._metadata_fn = metadata_fn
        self._metadata = None
        self._args = None
        self._constexprs = None

    def _names(self):
        return self.function.arg_names if self.function is not None else [f"arg{i}" for i in range(len(self._values))]

    @property
    def constexprs(self) -> Dict[str, Any]:
        if self._constexprs is None:
            self._constexprs = {n: v for n, v, c in zip(self._names(), self._values or (), self._cmask or ()) if c}
        return self._constexprs

    @property
    def args(self) -> List[ArgInfo]:
        if self._args is None:
            self._args = [_arg_info(n, v, c) for n, v, c in zip(self._names(), self._values or (), self._cmask or ())]
        return self._args

    @property
    def launch_metadata(self) -> Dict[str, Any]:
        """The kernel's ``launch_metadata(grid, kernel, args)`` result ({} if it has none); ``kernel`` is a
        :class:`KernelMetadata`."""
        if self._metadata is None:
            self._metadata = {}
            if self._metadata_fn is not None:
                meta = KernelMetadata(self.constexprs, num_warps=self.num_warps, num_stages=self.num_stages)
                meta.name, meta.shared, meta.hash = self.name, self.shared, self.cache_key
                raw = dict(zip(self._names(), self._values or ()))
                out = self._metadata_fn(self.grid, meta, raw)
                self._metadata = dict(out or {})
        return self._metadata

    @property
    def display_name(self) -> str:
        """Kernel name with its launch configuration, e.g. ``mm [grid 128x1x1, warps 8, stages 3, smem 96KiB]``."""
        name = self.launch_metadata.get("name") or self.name
        g = "x".join(str(x) for x in self.grid)
        smem = f", smem {self.shared // 1024}KiB" if self.shared >= 1024 else (f", smem {self.shared}B" if self.shared else "")
        return f"{name} [grid {g}, warps {self.num_warps}, stages {self.num_stages}{smem}]"

    def __repr__(self):
        return f"<LaunchRecord {self.display_name} {self.backend}>"


def _arg_info(name, v, cx) -> ArgInfo:
    if cx:
        return ArgInfo(name, "constexpr", value=v)
    if hasattr(v, "shape") and hasattr(v, "dtype") and not isinstance(v, (int, float, bool)):
        st = v.stride() if callable(getattr(v, "stride", None)) else None
        return ArgInfo(name, "tensor", str(v.dtype).replace("torch.", ""), tuple(v.shape),
                       strides=tuple(int(x) for x in st) if st is not None else None)
    if isinstance(v, bool):
        return ArgInfo(name, "bool", value=v)
    if isinstance(v, int):
        return ArgInfo(name, "int", value=v)
    if isinstance(v, float):
        return ArgInfo(name, "float", value=v)
    return ArgInfo(name, "other")


class HookHandle:
    def __init__(self, enter, exit):
        self.enter, self.exit = enter, exit


def register(enter: Optional[Callable] = None, exit: Optional[Callable] = None) -> HookHandle:
    """Add launch callbacks; returns a handle for ``unregister``."""
    with _lock:
        if enter is not None:
            _enter_hooks.append(enter)
        if exit is not None:
            _exit_hooks.append(exit)
    return HookHandle(enter, exit)


def unregister(handle: HookHandle) -> None:
    with _lock:
        if handle.enter in _enter_hooks:
            _enter_hooks.remove(handle.enter)
        if handle.exit in _exit_hooks:
            _exit_hooks.remove(handle.exit)


def any_registered() -> bool:
    return bool(_enter_hooks or _exit_hooks)


def fire_enter(rec: LaunchRecord) -> None:
    for h in list(_enter_hooks):
        h(rec)


def fire_exit(rec: LaunchRecord) -> None:
    for h in list(_exit_hooks):
        h(rec)
