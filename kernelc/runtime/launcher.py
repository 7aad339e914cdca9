"""The CUDA launch path of a ``@jit`` kernel: specialise, look up (or compile) the kernel, pack the
arguments into a reusable buffer and call cuLaunchKernel on torch's current stream.

The hot path for a cached kernel is: one generated binder call, one pass over the arguments to
build the specialisation key, one dict lookup, in-place argument writes, one ctypes call.
"""
from __future__ import annotations

import weakref
import sys
from typing import Any, Dict, List, Optional, Tuple

from .. import options as knobs  # not "options": launch_cuda takes a dict of launch options by that name
from ..errors import CompilationError, OutOfResources
from . import hooks
from ..language.host_types import kl_dtype_of

_SIG_OF_DTYPE = {}


def _dtype_sig(x) -> str:
    d = x.dtype
    s = _SIG_OF_DTYPE.get(d)
    if s is None:
        s = kl_dtype_of(x).short
        _SIG_OF_DTYPE[d] = s
    return s


class Specializer:
    """Turns call arguments into the specialisation key and back into (signature, constexprs,
    divisibility, equal_to_1, argument kinds). The key format is shared with the generated fast path."""

    def __init__(self, fn):
        self.fn = fn
        self.names = fn.arg_names
        self.dns = fn.do_not_specialize

    def key(self, values: List[Any], cmask: List[bool]) -> tuple:
        from .fastpath import spec_part
        parts = []
        for name, v, cx in zip(self.names, values, cmask):
            if cx:
                parts.append(("c", v))
            else:
                try:
                    parts.append(spec_part(v, name not in self.dns))
                except TypeError as e:
                    raise TypeError(f"{self.fn.__name__}: argument {name!r}: {e}") from None
        return tuple(parts)

    def signature(self, key: tuple):
        sig, cx, div, eq1, kinds = {}, {}, {}, [], []
        for name, part in zip(self.names, key):
            if isinstance(part, tuple) and part[0] == "c":
                cx[name] = part[1]
            elif isinstance(part, str):
                sig[name] = part
                kinds.append(part)
            elif part[0] == "tensordesc":
                sig[name] = part[1]
                kinds.append(("tensordesc", part[1]))
                div.update(_descriptor_divisibility(name, part))
            elif part[0] == "*":
                sig[name] = "*" + kl_dtype_of(part[1]).short
                kinds.append("ptr")
                if part[2]:
                    div[name] = 16
            else:
                sig[name] = part[0]
                kinds.append(part[0])
                if len(part) > 1:
                    if part[1]:
                        eq1.append(name)
                    if part[2]:
                        div[name] = 16
        return sig, cx, div, tuple(eq1), kinds


def _descriptor_divisibility(name, part) -> Dict[str, int]:
    """Per machine field of a descriptor argument: 16 where the key part says aligned/divisible, and
    an explicit 1 for an unaligned base (``kernelc.compile`` would otherwise assume 16)."""
    from ..compiler.abi import descriptor_fields
    from ..language.dtypes import parse_type
    _, ty, base_ok, _, shapes_ok, strides_ok = part
    out = {}
    for f in descriptor_fields(parse_type(ty)):
        ok = base_ok if f.role == "base" else (shapes_ok if f.role == "shape" else strides_ok)[max(f.dim, 0)]
        if ok:
            out[f.name(name)] = 16
        elif f.role == "base":
            out[f.name(name)] = 1
    return out


def _hashable(v) -> bool:
    try:
        hash(v)
        return True
    except TypeError:
        return False


class KernelCache:
    """Per-kernel in-memory cache: specialisation key -> loaded kernel (disk cache behind it)."""

    def __init__(self):
        self.entries: Dict[tuple, Any] = {}


class Loaded:
    __slots__ = ("compiled", "function", "buffer", "kinds", "_launch", "fast", "cmask", "device")

    def __init__(self, compiled, function, buffer, kinds):
        self.compiled = compiled
        self.function = function
        self.buffer = buffer
        self.kinds = kinds
        self.launch = None
        self.cmask = None
        self.device = 0

    @property
    def launch(self):
        return self._launch

    @launch.setter
    def launch(self, launch):
        # ``fast``: what the generated binder calls, looked up once here rather than on every launch
        self._launch = launch
        self.fast = getattr(launch, "fast", launch)


def _current_stream(device: int) -> int:
    import torch
    return torch._C._cuda_getCurrentRawStream(device)


_with_state: "weakref.WeakSet" = weakref.WeakSet()   # every JIT function that has loaded kernels


def get_state(fn):
    st = getattr(fn, "_cuda_state", None)
    if st is None:
        st = fn._cuda_state = {"spec": Specializer(fn), "cache": {}, "compiles": 0, "fast": None}
        _with_state.add(fn)
    return st


def reload_modules(device: Optional[int] = None) -> int:
    """Load every loaded kernel's module again (from its cubin) and launch through the new one;
    returns how many were reloaded.

    For tools: CUPTI PC sampling knows the code of modules loaded while it is enabled (or before it
    was first enabled in the process), so a sampler calls this right after enabling to see kernels
    loaded in between.  The old modules stay loaded (a launch in flight may still use them)."""
    from .driver import LoadedFunction
    from .fastpath import make_launch
    n = 0
    for fn in list(_with_state):
        for ent in list(get_state(fn)["cache"].values()):
            if ent.cmask is None or (device is not None and ent.device != device):
                continue
            ck, old = ent.compiled, ent.function
            ent.function = LoadedFunction(ck.asm["cubin"], ck.name, ck.dynamic_shared, old.threads // 32, ck.n_regs,
                                          ent.device, total_shared=ck.shared)
            ent.launch = make_launch(ent, fn, ent.cmask)
            n += 1
    return n


def compile_for(fn, key, num_warps, num_stages, device: int = 0, enable_fp_fusion=None, maxnreg=None):
    """Compile (or load from the disk cache) the kernel for this specialisation."""
    from .cache import cached_compile
    from .driver import ArgBuffer, LoadedFunction, device_properties
    st = get_state(fn)
    sig, cx, div, eq1, kinds = st["spec"].signature(key)
    props = device_properties(device)
    from ..compiler.backend import target_for_device
    target = target_for_device(props["major"], props["minor"])
    # kernelc.compile assumes 16-byte alignment for a pointer it is told nothing about: say 1 for the
    # pointers the key found unaligned (x[1:] would otherwise get 128-bit accesses and fault)
    div = dict(div, **{n: 1 for n, t in sig.items() if t.startswith("*") and n not in div})
    ck = cached_compile(fn, sig, cx, div, eq1, num_warps, num_stages, target, enable_fp_fusion, maxnreg)
    lf = LoadedFunction(ck.asm["cubin"], ck.name, ck.dynamic_shared, ck.launch_warps, ck.n_regs, device,
                        total_shared=ck.shared)
    buf_kinds = kinds
    if any(isinstance(k, tuple) for k in kinds):
        # tensor descriptors flatten: the compiled kernel's machine signature says into what
        from ..compiler.abi import machine_kind, machine_params
        buf_kinds = [machine_kind(str(t)) for _, t, _ in machine_params(ck.signature, ck.target.arch)]
    if ck.global_scratch_bytes:
        buf_kinds = list(buf_kinds) + ["ptr"]  # the hidden scratch parameter (runtime/scratch.py)
    ent = Loaded(ck, lf, ArgBuffer(tuple(buf_kinds)), kinds)
    ent.device = device
    return ent


def fast_launcher(fn):
    """The generated fast path for ``fn`` (None if its signature does not allow one)."""
    st = get_state(fn)
    if st["fast"] is None:
        from .fastpath import make_binder
        st["fast"] = make_binder(fn) or False
    return st["fast"] or None


def launch_cuda(fn, values: Dict[str, Any], grid, num_warps, num_stages, options, warmup):
    import torch
    st = get_state(fn)
    names = fn.arg_names
    vals = [values[n] for n in names]
    cmask = fn.constexpr_mask(values)
    device = torch._C._cuda_getDevice()
    key = (st["spec"].key(vals, cmask), num_warps, num_stages, device)
    fusion = _fp_fusion_option(options)
    if fusion is not None:  # a non-default enable_fp_fusion: its own entry (the fast path never passes it)
        key += (("enable_fp_fusion", fusion),)
    maxnreg = _maxnreg_option(options)
    if maxnreg is not None:  # a register ceiling: its own entry too
        key += (("maxnreg", maxnreg),)
    try:
        ent = st["cache"].get(key)
    except TypeError:  # an unhashable constexpr value
        key = (tuple(p if not (isinstance(p, tuple) and p[0] == "c") else ("c", repr(p[1])) for p in key[0]),) + key[1:]
        ent = st["cache"].get(key)
    if ent is None:
        failed = st.setdefault("failed", {})
        # compile-time knobs are not in the in-memory key (a test that changes one clears "cache"): a
        # remembered failure holds only under the options it was compiled with
        opts = knobs.compile_options(enable_fp_fusion=fusion).key()
        err = failed.get(key)
        if err is not None and err[0] == opts:
            raise err[1].with_traceback(None)
        if knobs.get("KERNELC_LOG_RECOMPILES") and st["cache"]:
            _log_recompile(fn, key, st["cache"])
        try:
            ent = compile_for(fn, key[0], num_warps, num_stages, device, fusion, maxnreg)
        except OutOfResources as e:
            # the same specialisation fails the same way again: an autotuner that tunes again (a new key,
            # e.g. tutorial 08's tensors keyed by identity) must not compile its oversized configs each
            # time. Triton compiles such a config once too (its check comes when the kernel is loaded).
            failed[key] = (opts, e)
            raise
        from .fastpath import make_launch
        ent.launch = make_launch(ent, fn, cmask)
        ent.cmask, ent.device = cmask, device
        st["cache"][key] = ent
        st["compiles"] += 1
    if warmup:
        return ent.compiled
    stream = options.get("stream")
    stream = _current_stream(device) if stream is None else int(getattr(stream, "cuda_stream", stream))
    rec = None
    if hooks._enter_hooks or hooks._exit_hooks:
        rec = fn._record(values, cmask, grid, num_warps, num_stages, "cuda", stream=stream, compiled=ent.compiled,
                         shared=ent.compiled.shared, cache_key=ent.compiled.cache_key)
        hooks.fire_enter(rec)
    if grid[0] and grid[1] and grid[2]:
        runtime = [v.data_ptr() if hasattr(v, "data_ptr") else v for v, cx in zip(vals, cmask) if not cx]
        ent.launch(grid[0], grid[1], grid[2], stream, *runtime)
        if knobs.get("KERNELC_LAUNCH_BLOCKING"):
            # debugging: wait for this kernel so a fault is reported with its name and launch
            from .driver import _drv, check
            check(_drv().cuStreamSynchronize(_drv().CUstream(stream)), "cuStreamSynchronize after launching",
                  f"{fn.__name__} (grid {grid}, warps {num_warps})")
    if rec is not None:
        hooks.fire_exit(rec)
    return ent.compiled


def _fp_fusion_option(options) -> Optional[bool]:
    """The launch's ``enable_fp_fusion`` when it differs from the default (KERNELC_DEFAULT_FP_FUSION), else None."""
    v = options.get("enable_fp_fusion")
    if v is None:
        return None
    v = bool(v)
    return None if v == knobs.get("KERNELC_DEFAULT_FP_FUSION") else v


def _maxnreg_option(options) -> Optional[int]:
    """The launch's ``maxnreg`` (Triton's option: the registers a thread may use at most), validated; None if unset."""
    from ..compiler.compiler import check_maxnreg
    return check_maxnreg(options.get("maxnreg"))


def _log_recompile(fn, key, cache):
    """Say which argument changed the specialisation (KERNELC_LOG_RECOMPILES=1)."""
    prev = next(reversed(cache))
    names = fn.arg_names
    diffs = []
    for name, a, b in zip(names, prev[0], key[0]):
        if a != b:
            diffs.append(f"{name}: {_describe(b)} (was {_describe(a)})")
    for label, a, b in (("num_warps", prev[1], key[1]), ("num_stages", prev[2], key[2])):
        if a != b:
            diffs.append(f"{label}: {b} (was {a})")
    print(f"kernelc: recompiling {fn.__name__} (#{len(cache) + 1}) because " + "; ".join(diffs or ["device"]),
          file=sys.stderr)


def _describe(part) -> str:
    if isinstance(part, tuple) and part[0] == "c":
        return f"constexpr={part[1]!r}"
    if isinstance(part, str):
        return part
    if part[0] == "tensordesc":
        return f"{part[1]}" + (" 16-byte aligned" if part[2] else " unaligned") + \
            f", shape divisible by 16: {list(part[4])}, strides divisible by 16: {list(part[5])}"
    if part[0] == "*":
        return f"*{str(part[1]).replace('torch.', '')}" + (" 16-byte aligned" if part[2] else " unaligned") + \
            ("" if part[3] else " (host memory)")
    if len(part) == 1:
        return part[0]
    return f"{part[0]}" + (" ==1" if part[1] else "") + (" divisible by 16" if part[2] else "")


def compile_offline(fn, values: Dict[str, Any], num_warps: int, num_stages: int, enable_fp_fusion=None,
                    maxnreg=None):
    """Compile ``fn`` for these argument values without a GPU, for the stand-in device of
    ``runtime/active.py`` (``KERNELC_TARGET`` overrides): what ``warmup`` returns in the interpreter,
    so host code that reads ``n_regs`` or shared memory still gets the compiler's numbers."""
    from ..compiler.backend import target_for_device
    from .active import CPU_STAND_IN
    from .cache import cached_compile
    spec = get_state(fn)["spec"]
    cmask = fn.constexpr_mask(values)
    sig, cx, div, eq1, _ = spec.signature(spec.key([values[n] for n in fn.arg_names], cmask))
    div = dict(div, **{n: 1 for n, t in sig.items() if t.startswith("*") and n not in div})
    target = target_for_device(CPU_STAND_IN["major"], CPU_STAND_IN["minor"])
    return cached_compile(fn, sig, cx, div, eq1, num_warps, num_stages, target, enable_fp_fusion, maxnreg)
