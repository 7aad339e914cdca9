"""The compiled-kernel object (light: loading a kernel from the disk cache imports only this)."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional

COMPILER_VERSION = "0.6.47"


class _LazyAsm(dict):
    """``asm`` dict whose "sass" entry is disassembled on first access."""

    def __init__(self, artifacts, **kw):
        super().__init__(**kw)
        self._art = artifacts

    def __missing__(self, key):
        if key == "sass" and self._art is not None:
            v = self._art.sass
            self["sass"] = v
            return v
        raise KeyError(key)

    def __contains__(self, key):
        return super().__contains__(key) or (key == "sass" and self._art is not None)

    def keys(self):
        ks = list(super().keys())
        if "sass" not in ks and self._art is not None:
            ks.append("sass")
        return ks


@dataclass
class CompiledKernel:
    """A compiled kernel: every stage's text, resources, the source map and compile-time breakdown."""

    name: str
    signature: Dict[str, str]
    constexprs: Dict[str, Any]
    num_warps: int
    num_stages: int
    target: Any
    asm: Dict[str, Any]
    n_regs: int = 0
    n_spills: int = 0
    shared: int = 0  # static + dynamic shared memory per program (bytes)
    dynamic_shared: int = 0  # the part passed at launch
    local_bytes: int = 0
    source_map: Any = None
    compile_log: List[str] = field(default_factory=list)
    timings: Dict[str, float] = field(default_factory=dict)
    arg_names: List[str] = field(default_factory=list)
    arg_types: List[Any] = field(default_factory=list)
    used_globals: Dict[str, Any] = field(default_factory=dict)    # "module.name" -> canonical value text
    # what the frontend read: [kind, module, name, snapshot] (compiler/frontend/deps.py); the disk
    # cache checks it before reusing the build
    dependencies: List[List[str]] = field(default_factory=list)
    cache_key: Optional[str] = None
    artifacts: Any = None
    # Facts for tools: "memory_accesses" (per load/store: vector width, contiguity, what limited it) and
    # "dots" (per dot: wgmma / mma.sync / fma and why).
    reports: Dict[str, Any] = field(default_factory=dict)
    # warps launched besides num_warps: a warp-specialised kernel's producer (codegen/warp_specialize.py)
    extra_warps: int = 0
    # bytes of global scratch per program, passed as a hidden last parameter: the CUtensorMaps of
    # descriptors made in the kernel (codegen/device_tensor_map.py; the launcher allocates grid x this)
    global_scratch_bytes: int = 0

    @property
    def launch_warps(self) -> int:
        """Warps per program at launch (``num_warps`` plus any producer warps)."""
        return self.num_warps + self.extra_warps

    @property
    def function_name(self) -> str:
        return self.name

    def __repr__(self):
        return (f"<CompiledKernel {self.name} {self.target.arch if self.target else '?'} warps={self.num_warps} "
                f"regs={self.n_regs} spills={self.n_spills} smem={self.shared}>")


