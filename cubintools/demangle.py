"""C++ kernel names as people read them (``void at::native::vectorized_elementwise_kernel<4, ...>(...)``).

cupti-python has no demangler, so this calls the Itanium ABI demangler every C++ runtime ships,
``__cxa_demangle`` from libstdc++ (already loaded by torch), through ctypes -- the same function
torch.profiler and ``c++filt`` use, so names match theirs.  A name that is not mangled, or that
does not demangle, is returned unchanged; results are cached.
"""
from __future__ import annotations

import ctypes
import ctypes.util
import functools
from typing import Optional

_impl = None


def _load():
    global _impl
    if _impl is not None:
        return _impl
    _impl = False
    for name in ("libstdc++.so.6", ctypes.util.find_library("stdc++"), "libc++.so.1", "libc++abi.so.1"):
        if not name:
            continue
        try:
            lib = ctypes.CDLL(name)
            fn = lib.__cxa_demangle
        except (OSError, AttributeError):
            continue
        fn.restype = ctypes.c_void_p
        fn.argtypes = [ctypes.c_char_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.POINTER(ctypes.c_int)]
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        libc.free.argtypes = [ctypes.c_void_p]
        libc.free.restype = None
        _impl = (fn, libc.free)
        break
    return _impl


@functools.lru_cache(maxsize=65536)
def demangle(name: str) -> str:
    """The demangled form of ``name`` (unchanged if it is not a mangled C++ name)."""
    if not name or not name.startswith("_Z"):
        return name
    out = _demangle(name)
    return out if out else name


def _demangle(name: str) -> Optional[str]:
    impl = _load()
    if not impl:
        return None
    fn, free = impl
    status = ctypes.c_int(0)
    try:
        ptr = fn(name.encode(), None, None, ctypes.byref(status))
    except Exception:
        return None
    if not ptr:
        return None
    try:
        if status.value != 0:
            return None
        return ctypes.string_at(ptr).decode("utf-8", "replace")
    finally:
        free(ptr)
