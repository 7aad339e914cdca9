"""On-disk kernel cache (``KERNELC_CACHE_DIR``, default ``~/.cache/kernelc``).

The key covers the kernel's source and the source of every ``@jit`` function it reaches, the
values of the plain/constexpr globals it reads, the specialisation, the compile options
(``kernelc.options.CompileOptions``, whole), the target and the compiler version.  The entry also
stores what the frontend actually read (folded globals, plain Python helpers it ran:
``compiler/frontend/deps.py``); an entry whose record no longer matches the program is rebuilt. An entry is a directory written atomically (built under a temporary name,
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
from ..compiler.frontend.deps import canonical, stale_reason
from ..errors import OutOfResources
from ..language.core import DeviceFunction, constexpr

FORMAT_VERSION = 1


def triton_key() -> str:
    """A string naming the compiler's version, for caches kept by others that must change when
    kernelc's code generation does (torch inductor reads Triton's ``triton_key`` for this)."""
    from ..compiler.artifact import COMPILER_VERSION
    return f"kernelc-{COMPILER_VERSION}"


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
        else:
            c = canonical(v)   # plain data, lists/dicts of it included
            if c is not None:
                h.update(f"{name}={c}".encode())
    for cell in fn.fn.__closure__ or ():
        try:
            h.update(repr(canonical(cell.cell_contents)).encode())
        except ValueError:  # an empty cell
            pass
    out = h.hexdigest()
    seen[key] = out
    return out


def _code_names(code):
    """Global and attribute names a code object (and its nested code objects) refers to."""
    yield from code.co_names
    for c in code.co_consts:
        if isinstance(c, types.CodeType):
            yield from _code_names(c)


def cache_key(fn, sig, cx, div, eq1, num_warps, num_stages, target, enable_fp_fusion=None, maxnreg=None) -> str:
    from ..compiler.artifact import COMPILER_VERSION
    extra = {} if maxnreg is None else {"maxnreg": maxnreg}  # only where given: other keys stay as they were
    payload = json.dumps({**extra,
        "fp": dependency_fingerprint(fn), "name": fn.__name__, "sig": sig,
        "cx": {k: repr(v) for k, v in cx.items()}, "div": div, "eq1": list(eq1), "warps": num_warps,
        "stages": num_stages, "target": str(target), "ptx": getattr(target, "ptx_version", None),
        "options": options.compile_options(enable_fp_fusion=enable_fp_fusion).key(),
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
            "global_scratch_bytes": ck.global_scratch_bytes, "dependencies": ck.dependencies,
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


class CorruptEntry(ValueError):
    """A cache file that fails validation (the message names the file and what is wrong)."""


def _nat(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and v >= 0


def _str_map(v) -> bool:
    return isinstance(v, dict) and all(isinstance(k, str) and isinstance(x, str) for k, x in v.items())


def _str_list(v) -> bool:
    return isinstance(v, list) and all(isinstance(x, str) for x in v)


# meta.json: field -> (check, what it must be, required)
META_SCHEMA = {
    "name": (lambda v: isinstance(v, str) and v.isidentifier(), "an identifier", True),
    "signature": (_str_map, "a {name: type} object of strings", True),
    "constexprs": (_str_map, "a {name: repr} object of strings", True),
    "num_warps": (lambda v: _nat(v) and v >= 1 and not v & (v - 1), "a power of two", True),
    "num_stages": (_nat, "an integer >= 0", True),
    "target": (lambda v: isinstance(v, str), "a target string", True),
    "n_regs": (_nat, "an integer >= 0", True),
    "n_spills": (_nat, "an integer >= 0", True),
    "shared": (_nat, "an integer >= 0", True),
    "dynamic_shared": (_nat, "an integer >= 0", True),
    "local_bytes": (_nat, "an integer >= 0", True),
    "compile_log": (_str_list, "a list of strings", True),
    "timings": (lambda v: isinstance(v, dict) and all(isinstance(k, str) and isinstance(x, (int, float))
                                                      and not isinstance(x, bool) for k, x in v.items()),
                "a {stage: seconds} object", True),
    "arg_names": (_str_list, "a list of strings", True),
    "source_map": (lambda v: v is None or isinstance(v, dict), "an object or null", True),
    "cubin_sha256": (lambda v: isinstance(v, str) and len(v) == 64 and all(c in "0123456789abcdef" for c in v),
                     "a sha256 hex digest", True),
    "cache_key": (lambda v: v is None or isinstance(v, str), "a string", True),
    "reports": (lambda v: isinstance(v, dict), "an object", False),
    "extra_warps": (_nat, "an integer >= 0", False),
    "global_scratch_bytes": (_nat, "an integer >= 0", False),
    "dependencies": (lambda v: isinstance(v, list) and all(_str_list(x) and len(x) == 4 for x in v),
                     "a list of [kind, module, name, snapshot]", False),
}


def validate_meta(meta, where: str) -> dict:
    """``meta`` if it matches :data:`META_SCHEMA`, else :class:`CorruptEntry` naming ``where`` and the field."""
    if not isinstance(meta, dict):
        raise CorruptEntry(f"{where}: must be a JSON object, got {type(meta).__name__}")
    for key, (ok, what, required) in META_SCHEMA.items():
        if key not in meta:
            if required:
                raise CorruptEntry(f"{where}: field {key!r} is missing")
            continue
        if not ok(meta[key]):
            raise CorruptEntry(f"{where}: field {key!r} must be {what}, got {meta[key]!r:.80}")
    return meta


def _load(path: str, fn):
    from ..compiler.artifact import CompiledKernel, _LazyAsm
    from ..compiler.backend import parse_target
    from cubintools.sourcemap import SourceMap
    meta_path = os.path.join(path, "meta.json")
    try:
        with open(meta_path, "rb") as f:
            meta = json.loads(f.read().decode("utf-8"))
    except (ValueError, UnicodeDecodeError, RecursionError) as e:
        raise CorruptEntry(f"{meta_path}: not JSON ({type(e).__name__}: {e})") from None
    validate_meta(meta, meta_path)
    if meta["cache_key"] is not None and meta["cache_key"] != os.path.basename(path):
        raise CorruptEntry(f"{meta_path}: written for cache key {meta['cache_key']!r}, found under "
                           f"{os.path.basename(path)!r}")
    cubin_path = os.path.join(path, "kernel.cubin")
    with open(cubin_path, "rb") as f:
        cubin = f.read()
    if hashlib.sha256(cubin).hexdigest() != meta["cubin_sha256"]:
        raise CorruptEntry(f"{cubin_path}: checksum mismatch (truncated or replaced)")
    asm = _LazyAsm(_CubinSass(cubin), cubin=cubin)
    for stage in _TEXT_STAGES:
        p = os.path.join(path, f"kernel.{stage}")
        if os.path.exists(p):
            with open(p) as f:
                asm[stage] = f.read()
    try:
        tgt = parse_target(meta["target"])
    except (ValueError, TypeError) as e:
        raise CorruptEntry(f"{meta_path}: field 'target': {e}") from None
    try:
        smap = SourceMap.from_dict(meta["source_map"]) if meta.get("source_map") else None
    except (ValueError, TypeError, KeyError, AttributeError) as e:
        raise CorruptEntry(f"{meta_path}: field 'source_map': {type(e).__name__}: {e}") from None
    return CompiledKernel(
        name=meta["name"], signature=meta["signature"], constexprs=meta["constexprs"], num_warps=meta["num_warps"],
        num_stages=meta["num_stages"], target=tgt, asm=asm, n_regs=meta["n_regs"], n_spills=meta["n_spills"],
        shared=meta["shared"], dynamic_shared=meta["dynamic_shared"], local_bytes=meta["local_bytes"],
        source_map=smap,
        compile_log=meta["compile_log"], timings=meta["timings"], arg_names=meta["arg_names"],
        cache_key=meta["cache_key"], reports=meta.get("reports", {}), extra_warps=meta.get("extra_warps", 0),
        global_scratch_bytes=meta.get("global_scratch_bytes", 0), dependencies=meta.get("dependencies", []))


def entry_path(key: str) -> Optional[str]:
    """The directory of the disk-cache entry ``key`` (a :attr:`CompiledKernel.cache_key`), or None if there is
    no such entry or ``key`` is not a plain key."""
    key = str(key)
    if len(key) < 3 or "/" in key or "\\" in key or key.startswith("."):
        return None
    path = os.path.join(cache_dir(), key[:2], key)
    return path if os.path.isfile(os.path.join(path, "meta.json")) else None


def load_entry_dir(path: str):
    """The :class:`CompiledKernel` stored in the cache-entry directory ``path`` (a disk-cache entry, or a copy
    of one, e.g. next to a profile). Raises :class:`CorruptEntry` naming the file when the entry is unusable."""
    return _load(path, None)


def load_entry(key: str):
    """The :class:`CompiledKernel` stored under ``key`` in the disk cache, or None (missing or unreadable).
    It carries the cubin, source map and reports, but no launcher: it is for inspection (SASS, lines)."""
    path = entry_path(key)
    if path is None:
        return None
    try:
        return _load(path, None)
    except Exception:
        return None


class _CubinSass:
    """Lazy SASS for a kernel loaded from the disk cache."""

    def __init__(self, cubin):
        self.cubin = cubin

    @property
    def sass(self):
        from cubintools.sass import disassemble
        return disassemble(self.cubin)


# A specialisation that needs more than the device has is remembered next to the entries, as
# ``<key>.oor.json``: an autotuner's oversized configs (60 of tutorial 09's 192) fail at once in a process
# that starts from a warm cache, as Triton's do (it caches their binaries and fails them at load).
_FAILED_SUFFIX = ".oor.json"


def _failed_record(path: str, fn):
    """The OutOfResources remembered for the entry ``path``, or None (none, unreadable, or stale: then it
    is removed and the kernel compiles again)."""
    fpath = path + _FAILED_SUFFIX
    try:
        with open(fpath, "rb") as f:
            rec = json.loads(f.read().decode("utf-8"))
        args = (int(rec["required"]), int(rec["limit"]), str(rec["resource"]), str(rec["kernel"]))
        stale = stale_reason(rec["dependencies"], fn)
    except FileNotFoundError:
        return None
    except Exception:  # truncated or foreign: compile again (which rewrites it)
        stale = "unreadable"
    if stale is not None:
        try:
            os.remove(fpath)
        except OSError:
            pass
        return None
    err = OutOfResources(*args)
    err.dependencies = rec["dependencies"]
    err.from_cache = True
    return err


def _save_failed(path: str, err) -> None:
    deps = getattr(err, "dependencies", None)
    if not isinstance(deps, list):
        return  # (raised without the frontend's record: nothing to check it against later)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    tmp = f"{path}{_FAILED_SUFFIX}.tmp{os.getpid()}"
    with open(tmp, "w") as f:
        json.dump({"required": err.required, "limit": err.limit, "resource": err.name, "kernel": err.kernel,
                   "dependencies": deps}, f)
    os.replace(tmp, path + _FAILED_SUFFIX)


def cached_compile(fn, sig, cx, div, eq1, num_warps, num_stages, target, enable_fp_fusion=None, maxnreg=None):
    """Compile through the disk cache (``enable_fp_fusion``, ``maxnreg``: the launch options, None = the
    environment's default / no register ceiling)."""
    key = cache_key(fn, sig, cx, div, eq1, num_warps, num_stages, target, enable_fp_fusion, maxnreg)
    path = os.path.join(cache_dir(), key[:2], key)
    failed = _failed_record(path, fn)
    if failed is not None:
        raise failed
    if os.path.isdir(path):
        stale = None
        try:
            import time
            t0 = time.perf_counter()
            ck = _load(path, fn)
            ck.timings["disk_cache_load"] = time.perf_counter() - t0
            stale = stale_reason(ck.dependencies, fn)
            if stale is None:
                return ck
        except Exception as e:  # truncated or corrupt: recompile, never trust
            why = str(e) if isinstance(e, CorruptEntry) else f"{path}: {type(e).__name__}: {e}"
            warnings.warn(f"kernelc: corrupt cache entry, recompiling ({why})", RuntimeWarning)
        # stale (a folded global or a plain helper changed since the build) or corrupt: rebuild in place
        shutil.rmtree(path, ignore_errors=True)
    from ..compiler.compiler import compile as kcompile
    try:
        ck = kcompile(fn, sig, cx, target, num_warps, num_stages, divisibility=div, equal_to_1=eq1,
                      enable_fp_fusion=enable_fp_fusion, maxnreg=maxnreg)
    except OutOfResources as e:
        try:
            _save_failed(path, e)
        except OSError as w:
            warnings.warn(f"kernelc: could not write the kernel cache at {path}: {w}", RuntimeWarning)
        raise
    ck.cache_key = key
    try:
        _save(path, ck)
    except OSError as e:
        warnings.warn(f"kernelc: could not write the kernel cache at {path}: {e}", RuntimeWarning)
    return ck
