"""The kernelc launch hook (``hook="kernelc"``): kernelc kernels get their launch configuration in
their frame name (``matmul_kernel [grid 128x1x1, warps 8, stages 3, smem 96KiB]``), the numbers
their ``launch_metadata`` returns (``flops``, ``bytes``, ...) as metrics, and, in the frame's
``kprof`` extras, what the analyzer needs to find or rebuild the compiled kernel (cache key,
signature, constexprs, warps/stages, target, the ``@jit`` function's source).

* **On a GPU with the cupti backend** the enter hook runs on the launching thread right before
  ``cuLaunchKernel``: it swaps the thread's context for a :class:`~profiler.context.KernelLaunch`
  (scope id + kernel description + metrics), so the CUPTI launch callback that follows stores the
  description under the launch's correlation id; the exit hook swaps the scope id back.  The kernel
  is timed by CUPTI like any other.
* **In the CPU interpreter** (or on a GPU without CUPTI) the hooks time the launch with the host
  clock and report it to the sessions (:func:`profiler.session.kernel_launched`).

Only this module imports kernelc, and only ``kernelc.runtime.hooks`` (the PC sampler registers its own
launch hook through :func:`register_kernelc_hook`).  Descriptions are cached per
(kernel, specialisation, launch configuration); a launch with no ``launch_metadata`` costs two dict
lookups and a small object.
"""
from __future__ import annotations

import os
import sys
import time
from typing import Any, Dict, Optional, Tuple

from . import _native, context
from .context import KernelLaunch as _KernelLaunch, fast as _fast

_handle = None
_cupti = False   # GPU launches are timed by CUPTI: only attach the description
_python = False  # capture Python call paths for interpreted launches
_idle = True     # no session records kernelc launches (the hook, if still registered, does nothing)
_info_cache: Dict[tuple, "KernelInfo"] = {}
_launch_objs: Dict[tuple, Any] = {}  # (scope id, KernelInfo) -> its KernelLaunch, for launches without metrics
_warned: set = set()
_now = time.perf_counter_ns
_on_launch = None  # the session registry's sink for host-timed launches (set by configure)
_use_native = True  # False: the Python hooks even where the C ones are built (bench/reconcile_profilers.py's kprof-py)

_SIG_OF_DTYPE = {"float32": "fp32", "float16": "fp16", "bfloat16": "bf16", "float64": "fp64", "int8": "i8",
                 "int16": "i16", "int32": "i32", "int64": "i64", "uint8": "u8", "uint16": "u16", "uint32": "u32",
                 "uint64": "u64", "bool": "i1", "float8_e4m3fn": "fp8e4nv", "float8_e5m2": "fp8e5"}


class KernelInfo:
    """What the profile says about a kernelc launch configuration.  ``compiled`` (the
    CompiledKernel, GPU only) and ``function`` (the JITFunction) are kept for PC sampling, which
    maps samples to SASS; both live as long as kernelc's caches anyway."""

    __slots__ = ("display_name", "extra", "name", "compiled", "function")

    def __init__(self, display_name: str, extra: Dict[str, Any], name: str, compiled=None, function=None):
        self.display_name = display_name
        self.extra = extra
        self.name = name
        self.compiled = compiled
        self.function = function


def configure(install: bool, cupti: bool, python: bool, on_launch=None) -> None:
    """Called by the session registry whenever the set of active sessions changes; ``on_launch`` receives
    host-timed launches (:func:`profiler.session.kernel_launched`)."""
    global _cupti, _python, _idle, _on_launch
    _cupti, _python = cupti, python
    _idle = not install
    if on_launch is not None:
        _on_launch = on_launch
    if install:
        _install()
    else:
        _uninstall()


def _install() -> None:
    global _handle
    if _handle is not None:
        return
    try:
        from kernelc.runtime import hooks as khooks
    except Exception:  # kernelc not importable: nothing to hook
        return
    enter, exit_ = _enter, _exit
    # native_scopes: the cupti path's common case in C, the rest in _enter/_exit (_use_native: a bench's A/B)
    ks = _native._module if _use_native else None
    if ks is not None:
        try:
            ks.setup_hooks(sys.modules[__name__], khooks.LaunchRecord, context.KernelLaunch, _enter, _exit)
            enter, exit_ = ks.hook_enter, ks.hook_exit
        except Exception as e:
            _warn_once("native", f"native kernelc hook not set up ({type(e).__name__}: {e}); using Python's")
    _handle = khooks.register(enter=enter, exit=exit_)


def _uninstall() -> None:
    global _handle
    if _handle is None:
        return
    kh = sys.modules.get("kernelc.runtime.hooks")
    if kh is not None:
        kh.unregister(_handle)
    _handle = None


def register_kernelc_hook(enter=None, exit=None):
    """Register launch callbacks with kernelc; a handle for :func:`unregister_kernelc_hook`, or None when
    kernelc is not importable."""
    try:
        from kernelc.runtime import hooks as khooks
    except Exception:
        return None
    return khooks.register(enter=enter, exit=exit)


def unregister_kernelc_hook(handle) -> None:
    kh = sys.modules.get("kernelc.runtime.hooks")
    if handle is not None and kh is not None:
        kh.unregister(handle)
def sessions_gone() -> None:
    """In a forked child that dropped its parent's sessions: the hook stays registered (see
    session._after_fork_in_child) but records nothing."""
    global _cupti, _python, _idle
    _cupti = _python = False
    _idle = True


def installed() -> bool:
    return _handle is not None


def _warn_once(key: str, msg: str) -> None:
    if key not in _warned:
        _warned.add(key)
        print(f"kprof: {msg}", file=sys.stderr)


# -- the hooks ----------------------------------------------------------------------------------
# (id of the compiled kernel, grid, scope id) -> its KernelLaunch, for launches without metadata; the
# KernelLaunch's info holds the compiled kernel, so its id is not reused while the entry lives (a
# CompiledKernel is an eq-dataclass: unhashable)
_kl_fast: Dict[tuple, Any] = {}


def _enter(rec) -> None:
    if _idle:
        return
    try:
        try:
            c = _fast.ctx
        except AttributeError:
            c = context.ctx_slow()
        if _cupti and rec.backend == "cuda":
            node = c.node
            if type(node) is not int:  # a previous launch raised before its exit hook
                node = c.kprev
            c.kprev = node
            if node == 0 and c.inherit:
                node = context.MAIN.node
                if type(node) is not int:
                    node = node.node
            fn = rec.function
            ck = rec.compiled
            # A compiled kernel and grid pin everything describe() keys on (name, cache key, warps,
            # stages, smem): one dict lookup per launch instead of describe's key, for launches without
            # launch_metadata (whose metrics are per launch).
            if ck is not None and getattr(fn, "launch_metadata", None) is None:
                key = (id(ck), rec.grid, node)
                kl = _kl_fast.get(key)
                if kl is None:
                    info, _ = describe(rec)
                    kl = _launch_objs.get((node, info))
                    if kl is None:
                        kl = _launch_objs[(node, info)] = context.KernelLaunch(node, info, None)
                    if info.compiled is ck:
                        _kl_fast[key] = kl
            else:
                info, metrics = describe(rec)
                if metrics is None:  # equal launches share one object (no allocation per launch)
                    kl = _launch_objs.get((node, info))
                    if kl is None:
                        kl = _launch_objs[(node, info)] = context.KernelLaunch(node, info, None)
                else:
                    kl = context.KernelLaunch(node, info, metrics)
            c.node = kl
            clock = context._clock
            if clock is not None:
                if context._ext is None:  # context.mark(c), inlined
                    c.times.append(clock())
                    c.nodes.append(kl)
                else:
                    context.mark(c)
        else:
            c.kkey = (context.current_node(), context.python_key_here(1) if _python else None)
            c.kstart = _now()
    except Exception as e:  # never break a launch
        _warn_once("enter", f"kernelc launch hook failed ({type(e).__name__}: {e}); continuing")


def _exit(rec) -> None:
    if _idle:
        try:  # a launch that began while recording: give the thread its scope back
            c = context.local.ctx
            if type(c.node) is context.KernelLaunch:
                c.node = c.kprev
            c.kkey = None
        except Exception:
            pass
        return
    try:
        try:
            c = _fast.ctx
        except AttributeError:
            c = context.ctx_slow()
        if _cupti and rec.backend == "cuda":
            if type(c.node) is _KernelLaunch:
                c.node = node = c.kprev
                clock = context._clock
                if clock is not None:
                    if context._ext is None:  # context.mark(c), inlined
                        c.times.append(clock())
                        c.nodes.append(node)
                    else:
                        context.mark(c)
            return
        end = _now()
        if c.kkey is None:
            return
        key, start = c.kkey, c.kstart
        c.kkey = None
        info, metrics = describe(rec)
        if rec.backend == "cuda":
            dtype, did, timed = "CUDA", _cuda_device(), False
        else:
            dtype, did, timed = "CPU", 0, True
        if _on_launch is not None:
            _on_launch(key, info, metrics, start, end, dtype, did, timed)
    except Exception as e:
        _warn_once("exit", f"kernelc launch hook failed ({type(e).__name__}: {e}); continuing")


def _cuda_device() -> int:
    torch = sys.modules.get("torch")
    try:
        return int(torch.cuda.current_device()) if torch is not None else 0
    except Exception:
        return 0


# -- describing a launch ------------------------------------------------------------------------
def describe(rec) -> Tuple[KernelInfo, Optional[Dict[str, Any]]]:
    """``(KernelInfo, metrics)`` of a launch record; ``metrics`` are the numeric values of the
    kernel's ``launch_metadata`` (``None`` without one)."""
    fn = rec.function
    mname = None
    metrics = None
    if fn is not None and getattr(fn, "launch_metadata", None) is not None:
        try:
            md = rec.launch_metadata
        except Exception as e:
            _warn_once(f"md:{rec.name}", f"launch_metadata of {rec.name} raised {type(e).__name__}: {e}; "
                       "its flops/bytes are left out")
            md = {}
        mname = md.get("name") if isinstance(md.get("name"), str) else None
        metrics = {}
        for k, v in md.items():
            num = None if k == "name" else _as_number(v)
            if num is not None:
                metrics[str(k)] = num
        metrics = metrics or None
    key = (fn, rec.cache_key, rec.grid, rec.num_warps, rec.num_stages, rec.shared, mname, rec.backend)
    if rec.cache_key is None:  # the interpreter has no cache key: tell specialisations apart
        key += (repr(sorted(rec.constexprs.items())),)
    info = _info_cache.get(key)
    if info is None:
        info = _info_cache[key] = _build_info(rec, mname)
    return info, metrics


def _as_number(v) -> Any:
    """A launch-metadata value as a Python int or float (numpy and torch scalars included), or
    ``None`` for anything that is not a single number."""
    if isinstance(v, bool):
        return None
    if isinstance(v, (int, float)):
        return v
    if isinstance(v, (str, bytes)):
        return None
    try:
        if hasattr(v, "__index__"):
            return int(v.__index__())
        if hasattr(v, "__float__"):
            return float(v)
    except Exception:  # a tensor of several elements, a broken __float__
        return None
    return None


def _display_name(rec, mname: Optional[str]) -> str:
    name = mname or rec.name
    g = "x".join(str(x) for x in rec.grid)
    sh = rec.shared or 0
    smem = f", smem {sh // 1024}KiB" if sh >= 1024 else (f", smem {sh}B" if sh else "")
    return f"{name} [grid {g}, warps {rec.num_warps}, stages {rec.num_stages}{smem}]"


def _jsonable(v):
    if v is None or isinstance(v, (bool, int, float, str)):
        return v
    name = getattr(v, "name", None)  # kernelc dtypes and similar
    return name if isinstance(name, str) else repr(v)


def _specialization(rec) -> Optional[Dict[str, Any]]:
    """kernelc's specialisation of this launch (its rules: a pointer 16-byte aligned, an int equal
    to 1 or a multiple of 16, unless ``do_not_specialize``): what the analyzer needs to rebuild the
    same kernel.  On a GPU the cache key already pins it; this says it in words."""
    fn = rec.function
    values = getattr(rec, "_values", None)
    cmask = getattr(rec, "_cmask", None)
    if fn is None or values is None or cmask is None:
        return None
    dns = getattr(fn, "do_not_specialize", ()) or ()
    div: Dict[str, int] = {}
    eq1 = []
    for name, v, cx in zip(fn.arg_names, values, cmask):
        if cx or v is None or isinstance(v, bool):
            continue
        if hasattr(v, "data_ptr"):
            if int(v.data_ptr()) & 15 == 0:
                div[name] = 16
        elif isinstance(v, int) and name not in dns:
            if v == 1:
                eq1.append(name)
            elif v & 15 == 0:
                div[name] = 16
    return {"divisibility": div, "equal_to_1": eq1}


def _arg_json(a) -> Dict[str, Any]:
    out: Dict[str, Any] = {"name": a.name, "kind": a.kind}
    if a.kind == "tensor":
        out["dtype"] = a.dtype
        out["shape"] = list(a.shape or ())
        if getattr(a, "strides", None) is not None:
            out["strides"] = list(a.strides)
    elif a.kind in ("int", "float", "bool"):
        out["value"] = a.value
    return out


def _signature(rec) -> Dict[str, str]:
    ck = rec.compiled
    if ck is not None and getattr(ck, "signature", None):
        return dict(ck.signature)
    sig = {}
    for a in rec.args:
        if a.kind == "tensor":
            sig[a.name] = "*" + _SIG_OF_DTYPE.get(str(a.dtype), str(a.dtype))
        elif a.kind == "int":
            sig[a.name] = "i32" if -2 ** 31 <= a.value < 2 ** 31 else "i64"
        elif a.kind == "float":
            sig[a.name] = "fp32"
        elif a.kind == "bool":
            sig[a.name] = "i1"
    return sig


def _source(fn) -> Optional[Dict[str, Any]]:
    if fn is None:
        return None
    try:
        return {"file": os.path.abspath(fn.file), "first_line": int(fn.first_line), "lines": fn.src.splitlines()}
    except Exception:
        return None


def _build_info(rec, mname: Optional[str]) -> KernelInfo:
    ck = rec.compiled
    target = getattr(getattr(ck, "target", None), "arch", None) if ck is not None else None
    extra: Dict[str, Any] = {
        "kind": "kernel",
        "kernel": rec.name,
        "cache_key": rec.cache_key,
        "backend": rec.backend,
        "signature": _signature(rec),
        "constexprs": {k: _jsonable(v) for k, v in rec.constexprs.items()},
        "num_warps": rec.num_warps,
        "num_stages": rec.num_stages,
        "grid": list(rec.grid),
        "shared": rec.shared or 0,
        "target": target or "sm_90a",
    }
    if ck is not None:
        extra["n_regs"] = getattr(ck, "n_regs", None)
        extra["n_spills"] = getattr(ck, "n_spills", None)
    try:  # the first launch with this configuration: scalar values, tensor dtypes/shapes
        extra["args"] = [_arg_json(a) for a in rec.args if a.kind != "constexpr"]
        spec = _specialization(rec)
        if spec is not None:
            extra["specialization"] = spec
    except Exception:
        pass
    src = _source(rec.function)
    if src is not None:
        extra["source"] = src
    return KernelInfo(_display_name(rec, mname), extra, rec.name, ck, rec.function)
