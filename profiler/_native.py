"""Builds and loads ``profiler/_kscope.c`` (a scope's entry and exit in C; knob ``native_scopes``).

The extension is compiled on first use with the C compiler and headers of the running Python (the same
ones Triton's launcher needs) into a per-user cache, named by a hash of its source and the interpreter's
ABI, and loaded from there afterwards.  Anything that fails (no compiler, no headers, a read-only home)
leaves ``load()`` returning ``None`` and the reason in :data:`status`: scopes then run the Python methods.
"""
from __future__ import annotations

import hashlib
import importlib.machinery
import importlib.util
import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile
from typing import Any, Optional

_SRC = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_kscope.c")
status = "not loaded"   # "native: <path>", "off (native_scopes=off)" or why the build or load failed
_module: Any = None


def _cache_dir() -> str:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "kprof", "native")


def _target(src: bytes) -> str:
    suffix = importlib.machinery.EXTENSION_SUFFIXES[0]
    tag = hashlib.sha256(src + sys.version.encode() + suffix.encode()).hexdigest()[:16]
    return f"_kscope_{tag}{suffix}"


def _compile(src_path: str, out: str) -> Optional[str]:
    """Compile into ``out`` (atomically); ``None`` or why not."""
    cc = (sysconfig.get_config_var("CC") or "cc").split()[0]
    if shutil.which(cc) is None:
        cc = shutil.which("cc") or shutil.which("gcc")
        if cc is None:
            return "no C compiler"
    inc = sysconfig.get_paths().get("include")
    if not inc or not os.path.exists(os.path.join(inc, "Python.h")):
        return f"no Python.h under {inc}"
    os.makedirs(os.path.dirname(out), exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".build-", suffix=".so", dir=os.path.dirname(out))
    os.close(fd)
    try:
        r = subprocess.run([cc, "-O2", "-shared", "-fPIC", f"-I{inc}", src_path, "-o", tmp],
                           capture_output=True, text=True, timeout=120)
        if r.returncode != 0:
            return f"{cc} failed: {(r.stderr or r.stdout).strip()[-300:]}"
        os.replace(tmp, out)   # concurrent builders: the last one wins, each file complete
        return None
    except (OSError, subprocess.SubprocessError) as e:
        return f"{cc}: {type(e).__name__}: {e}"
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def _load_file(path: str) -> Any:
    loader = importlib.machinery.ExtensionFileLoader("profiler._kscope", path)
    spec = importlib.util.spec_from_file_location("profiler._kscope", path, loader=loader)
    mod = importlib.util.module_from_spec(spec)
    loader.exec_module(mod)
    return mod


def load(mode: str) -> Any:
    """The ``_kscope`` module, or ``None`` (``mode`` is the knob's value: ``auto`` or ``off``)."""
    global status, _module
    if mode == "off":
        status = "off (native_scopes=off)"
        return None
    if _module is not None:
        return _module
    try:
        with open(_SRC, "rb") as f:
            src = f.read()
        out = os.path.join(_cache_dir(), _target(src))
        built = False
        if not os.path.exists(out):
            err = _compile(_SRC, out)
            if err is not None:
                status = f"python (build failed: {err})"
                return None
            built = True
        try:
            mod = _load_file(out)
        except Exception:
            if built:
                raise
            # a cached file that does not load (truncated, another machine's): built again, once
            err = _compile(_SRC, out)
            if err is not None:
                status = f"python (rebuild failed: {err})"
                return None
            mod = _load_file(out)
    except Exception as e:   # never break `import profiler`
        status = f"python (load failed: {type(e).__name__}: {e})"
        return None
    _module = mod
    status = f"native: {out}"
    return mod
