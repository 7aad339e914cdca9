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
from dataclasses import dataclass, field
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


@dataclass
class LaunchRecord:
    """Everything a tool may want about one launch."""

    name: str
    grid: Tuple[int, int, int]
    num_warps: int
    num_stages: int
    shared: int
    constexprs: Dict[str, Any]
    args: List[ArgInfo]
    stream: Any
    backend: str  # "cuda" | "interpreter"
    compiled: Any = None  # CompiledKernel (asm, source map, cache key) when backend == "cuda"
    cache_key: Optional[str] = None
    function: Any = None  # the JITFunction
    _metadata_fn: Optional[Callable] = field(default=None, repr=False)
    _raw_args: Optional[Dict[str, Any]] = field(default=None, repr=False)
    _metadata: Optional[Dict[str, Any]] = field(default=None, repr=False)

    @property
    def launch_metadata(self) -> Dict[str, Any]:
        """The kernel's ``launch_metadata(grid, meta, args)`` result ({} if it has none)."""
        if self._metadata is None:
            self._metadata = {}
            if self._metadata_fn is not None:
                meta = dict(self.constexprs, num_warps=self.num_warps, num_stages=self.num_stages)
                out = self._metadata_fn(self.grid, meta, dict(self._raw_args or {}))
                self._metadata = dict(out or {})
        return self._metadata

    @property
    def display_name(self) -> str:
        """Kernel name with its launch configuration, e.g. ``mm [grid 128x1x1, warps 8, stages 3, smem 96KiB]``."""
        name = self.launch_metadata.get("name") or self.name
        g = "x".join(str(x) for x in self.grid)
        smem = f", smem {self.shared // 1024}KiB" if self.shared >= 1024 else (f", smem {self.shared}B" if self.shared else "")
        return f"{name} [grid {g}, warps {self.num_warps}, stages {self.num_stages}{smem}]"


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
