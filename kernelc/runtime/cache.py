"""On-disk kernel cache (``KERNELC_CACHE_DIR``, default ``~/.cache/kernelc``).

The key covers the kernel's source and the source of every ``@jit`` function it reaches, the
values of the plain/constexpr globals it reads, the specialisation, the options, the target and
the compiler version. An entry is a directory written atomically (built under a temporary name,
then renamed), so concurrent processes never see half an entry; a truncated or corrupt entry is
recompiled with a warning, never trusted.
"""
from __future__ import annotations

import hashlib
import marshal
import types
import json
import os
import shutil
import tempfile
import warnings
from typing import Any, Dict, Optional, Tuple

from .. import options
from ..language.core import DeviceFunction, constexpr

FORMAT_VERSION = 1


def cache_dir() -> str:
    return options.get("KERNELC_CACHE_DIR") or os.path.join(os.path.expanduser("~"), ".cache", "kernelc")


def dependency_fingerprint(fn: DeviceFunction, _seen=None) -> str:
    """Hash of ``fn``'s source, the sources of the @jit functions it calls (transitively, also through
    module attributes like ``helpers.f``) and the values of the constant globals it reads."""
    seen = _seen if _seen is not None else {}
    key = id(fn)
    if key in seen:
        return seen[key]
    seen[key] = ""
    h = hashlib.sha256()
    # The code object carries the function's bytecode, constants, names, file and line table (the
    # kernel's debug lines depend on them); marshalling it is ~100x faster than re-reading the source.
    h.update(marshal.dumps(fn.fn.__code__))
    g = fn.__globals__
    names = sorted(set(_code_names(fn.fn.__code__)))
    modules = [g[n] for n in names if isinstance(g.get(n), types.ModuleType)]
    for name in names:
        v = g.get(name)
        if v is None:
            for m in modules:  # helpers.f, cfg.BLOCK: attribute names of referenced modules
                cand = getattr(m, name, None)
                if isinstance(cand, (DeviceFunction, constexpr)):
                    v = cand
                    break
        if isinstance(v, DeviceFunction):
            h.update(f"{name}:{dependency_fingerprint(v, seen)}".encode())
        elif isinstance(v, constexpr):
            h.update(f"{name}={v.value!r}".encode())
        elif isinstance(v, (bool, int, float, str)):
            h.update(f"{name}={v!r}".encode())
    out = h.hexdigest()
    seen[key] = out
    return out


def _code_names(code):
    """Global and attribute names a code object (and its nested code objects) refers to."""
    yield from code.co_names
    for c in code.co_consts:
        if isinstance(c, types.CodeType):
            yield from _code_names(c)


def cache_key(fn, sig, cx, div, eq1, num_warps, num_stages, target) -> str:
    from ..compiler.artifact import COMPILER_VERSION
    payload = json.dumps({
        "fp": dependency_fingerprint(fn), "name": fn.__name__, "sig": sig,
        "cx": {k: repr(v) for k, v in cx.items()}, "div": div, "eq1": list(eq1), "warps": num_warps,
        "stages": num_stages, "target": str(target), "ptx": getattr(target, "ptx_version", None),
        "options": options.compile_options().key(),
        "compiler": COMPILER_VERSION, "format": FORMAT_VERSION,
    }, sort_keys=True)
    return hashlib.sha256(payload.encode()).hexdigest()[:40]


_TEXT_STAGES = ("tir", "tir_initial", "llir", "llir_opt", "ptx")


def _save(path: str, ck) -> None:
    parent = os.path.dirname(path)
    os.makedirs(parent, exist_ok=True)
    tmp = tempfile.mkdtemp(prefix=".tmp-", dir=parent)
    try:
        with open(os.path.join(tmp, "kernel.cubin"), "wb") as f:
            f.write(ck.asm["cubin"])
        for stage in _TEXT_STAGES:
            if stage in ck.asm:
                with open(os.path.join(tmp, f"kernel.{stage}"), "w") as f:
                    f.write(ck.asm[stage])
        meta = {
            "name": ck.name, "signature": ck.signature, "constexprs": {k: repr(v) for k, v in ck.constexprs.items()},
            "num_warps": ck.num_warps, "num_stages": ck.num_stages, "target": str(ck.target), "n_regs": ck.n_regs,
            "n_spills": ck.n_spills, "shared": ck.shared, "dynamic_shared": ck.dynamic_shared, "local_bytes": ck.local_bytes,
            "compile_log": ck.compile_log, "timings": ck.timings, "arg_names": ck.arg_names,
            "source_map": ck.source_map.to_dict() if ck.source_map is not None else None,
            "cubin_sha256": hashlib.sha256(ck.asm["cubin"]).hexdigest(), "cache_key": ck.cache_key,
            "reports": ck.reports, "extra_warps": ck.extra_warps,
            "global_scratch_bytes": ck.global_scratch_bytes,
        }
        with open(os.path.join(tmp, "meta.json"), "w") as f:
            json.dump(meta, f)
            f.flush()
            os.fsync(f.fileno())
        try:
            os.rename(tmp, path)
        except OSError:  # another process won the race: keep theirs
            shutil.rmtree(tmp, ignore_errors=True)
    except Exception:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def _load(path: str, fn):
    from ..compiler.artifact import CompiledKernel, _LazyAsm
    from ..compiler.backend import parse_target
    from ..compiler.backend.sourcemap import SourceMap
    with open(os.path.join(path, "meta.json")) as f:
        meta = json.load(f)
    with open(os.path.join(path, "kernel.cubin"), "rb") as f:
        cubin = f.read()
    if hashlib.sha256(cubin).hexdigest() != meta["cubin_sha256"]:
        raise ValueError("cubin checksum mismatch")
    asm = _LazyAsm(_CubinSass(cubin), cubin=cubin)
    for stage in _TEXT_STAGES:
        p = os.path.join(path, f"kernel.{stage}")
        if os.path.exists(p):
            with open(p) as f:
                asm[stage] = f.read()
    tgt = parse_target(meta["target"])
    return CompiledKernel(
        name=meta["name"], signature=meta["signature"], constexprs=meta["constexprs"], num_warps=meta["num_warps"],
        num_stages=meta["num_stages"], target=tgt, asm=asm, n_regs=meta["n_regs"], n_spills=meta["n_spills"],
        shared=meta["shared"], dynamic_shared=meta["dynamic_shared"], local_bytes=meta["local_bytes"],
        source_map=SourceMap.from_dict(meta["source_map"]) if meta.get("source_map") else None,
        compile_log=meta["compile_log"], timings=meta["timings"], arg_names=meta["arg_names"],
        cache_key=meta["cache_key"], reports=meta.get("reports", {}), extra_warps=meta.get("extra_warps", 0),
        global_scratch_bytes=meta.get("global_scratch_bytes", 0))


class _CubinSass:
    """Lazy SASS for a kernel loaded from the disk cache."""

    def __init__(self, cubin):
        self.cubin = cubin

    @property
    def sass(self):
        from ..compiler.backend import disassemble
        return disassemble(self.cubin)


def cached_compile(fn, sig, cx, div, eq1, num_warps, num_stages, target):
    """Compile through the disk cache."""
    key = cache_key(fn, sig, cx, div, eq1, num_warps, num_stages, target)
    path = os.path.join(cache_dir(), key[:2], key)
    if os.path.isdir(path):
        try:
            import time
            t0 = time.perf_counter()
            ck = _load(path, fn)
            ck.timings["disk_cache_load"] = time.perf_counter() - t0
            return ck
        except Exception as e:  # truncated or corrupt: recompile, never trust
            warnings.warn(f"kernelc: cache entry {path} is corrupt ({e}); recompiling", RuntimeWarning)
            shutil.rmtree(path, ignore_errors=True)
    from ..compiler.compiler import compile as kcompile
    ck = kcompile(fn, sig, cx, target, num_warps, num_stages, divisibility=div, equal_to_1=eq1)
    ck.cache_key = key
    try:
        _save(path, ck)
    except OSError as e:
        warnings.warn(f"kernelc: could not write the kernel cache at {path}: {e}", RuntimeWarning)
    return ck
