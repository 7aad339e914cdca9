"""``import triton`` resolved to kernelc: an import finder that answers every ``triton`` /
``triton.*`` import with kernelc's module of the same name, and never imports a real Triton.

* ``triton`` itself is a module of its own (:class:`TritonRoot`): kernelc's top-level names plus the
  few Triton keeps there (``set_allocator``, ``runtime``, ...), and ``__version__`` = the Triton
  version kernelc stands in for, while ``kernelc.__version__`` stays kernelc's.
* ``triton.X.Y`` is ``kernelc.X.Y`` (the same module object) unless :data:`RENAMED` says otherwise:
  ``triton.profiler`` is kprof in Proton's API (``profiler/proton``), ``triton.backends`` the
  modules torch imports when it believes Triton is installed (``kernelc/compat/backends``).
* A name kernelc lacks raises :class:`MissingTritonAPI` (an ``AttributeError``, so ``hasattr`` and
  ``getattr(m, name, default)`` probes behave) naming the Triton API and the user's file and line; a
  module kernelc lacks raises ``ModuleNotFoundError`` likewise.
"""
from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import os
import sys
import types
from typing import Dict, List, Optional, Tuple

#: the Triton release whose API the alias presents
TRITON_VERSION = "3.6.0"

#: Triton module -> the module that implements it, where the name is not ``kernelc.<rest>``
RENAMED: Dict[str, str] = {
    "triton.profiler": "profiler.proton",
    "triton.profiler.viewer": "profiler.proton.viewer",
    "triton.profiler.proton": "profiler.proton",
    "triton.backends": "kernelc.compat.backends",
    "triton.backends.compiler": "kernelc.compat.backends.compiler",
    "triton.backends.driver": "kernelc.compat.backends.driver",
    "triton.runtime.errors": "kernelc.errors",
    "triton.compiler.errors": "kernelc.errors",
    "triton.errors": "kernelc.errors",
    "triton._C": "kernelc.compat._C",
}

#: names Triton keeps on the ``triton`` module that live elsewhere in kernelc
ROOT_EXTRAS: Dict[str, Tuple[str, str]] = {
    "TritonError": ("kernelc.errors", "KernelError"),
    "must_use_result": ("kernelc.compat.extras", "must_use_result"),
    "constexpr_function": ("kernelc.compat.extras", "constexpr_function"),
}

_KERNELC_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_PROFILER_DIR = os.path.join(os.path.dirname(_KERNELC_DIR), "profiler")
_IMPORT_INTERNALS = ("<frozen importlib", os.path.dirname(importlib.__file__))


def user_location() -> Tuple[str, int]:
    """File and line of the innermost frame outside kernelc, kprof and the import machinery."""
    f = sys._getframe(1)
    while f is not None:
        fn = f.f_code.co_filename
        if not (fn.startswith(_KERNELC_DIR) or fn.startswith(_PROFILER_DIR) or fn.startswith(_IMPORT_INTERNALS)):
            return fn, f.f_lineno
        f = f.f_back
    return "<unknown>", 0


class MissingTritonAPI(AttributeError):
    """A Triton name that kernelc does not provide (see docs/triton-compat.md)."""

    def __init__(self, api: str, where: Optional[Tuple[str, int]] = None, hint: str = ""):
        file, line = where or user_location()
        self.api, self.file, self.line = api, file, line
        super().__init__(f"{api} is not supported by kernelc (used at {file}:{line}); kernelc runs Triton "
                         f"{TRITON_VERSION} programs but lacks this name. The supported names are listed in "
                         f"docs/triton-compat.md" + (f". {hint}" if hint else ""))


#: kernelc module -> module whose names it also answers under the alias: Triton's
#: ``triton.language.core`` holds every builtin that ``triton.language`` re-exports (torch reads
#: ``triton.language.core.view``); kernelc keeps some of them in ``language.standard``
FALLBACKS: Dict[str, str] = {"kernelc.language.core": "kernelc.language"}


def _missing_getattr(triton_name: str, module: types.ModuleType, fallback: Optional[str] = None):
    previous = module.__dict__.get("__getattr__")

    def __getattr__(name):
        if previous is not None:
            try:
                return previous(name)
            except AttributeError:
                pass
        if fallback is not None and not name.startswith("_"):
            other = importlib.import_module(fallback)
            if name in other.__dict__:
                return other.__dict__[name]
        if name.startswith("__"):  # dunder probes (copy, pickle, inspect) stay plain
            raise AttributeError(f"module {module.__name__!r} has no attribute {name!r}")
        # a submodule not imported yet (``import triton.language`` then ``tl.extra``)
        try:
            return importlib.import_module(f"{triton_name}.{name}")
        except ModuleNotFoundError:
            pass
        raise MissingTritonAPI(f"{triton_name}.{name}")

    __getattr__._kernelc_alias = previous  # type: ignore[attr-defined]
    return __getattr__


class TritonRoot(types.ModuleType):
    """The ``triton`` module under the alias."""

    def __getattr__(self, name):
        if name.startswith("__") and name != "__version__":
            raise AttributeError(f"module 'triton' has no attribute {name!r}")
        import kernelc
        if name in ROOT_EXTRAS:
            mod, attr = ROOT_EXTRAS[name]
            value = getattr(importlib.import_module(mod), attr)
        elif hasattr(kernelc, name) and not isinstance(getattr(kernelc, name), types.ModuleType):
            value = getattr(kernelc, name)
        else:
            try:
                value = importlib.import_module(f"triton.{name}")
            except ModuleNotFoundError:
                raise MissingTritonAPI(f"triton.{name}") from None
        setattr(self, name, value)
        return value

    def __repr__(self):
        return f"<module 'triton' (kernelc standing in for Triton {TRITON_VERSION})>"

    def __dir__(self):
        import kernelc
        return sorted(set(super().__dir__()) | {n for n in dir(kernelc) if not n.startswith("_")} | set(ROOT_EXTRAS))


def _make_root() -> TritonRoot:
    import kernelc
    root = TritonRoot("triton", f"kernelc standing in for Triton {TRITON_VERSION} (kernelc {kernelc.__version__})")
    root.__version__ = TRITON_VERSION
    root.__path__ = []  # a package: submodule imports come to the finder
    root.__file__ = kernelc.__file__
    root.__kernelc__ = True
    return root


class _Existing(importlib.abc.Loader):
    """Loads nothing: the module already exists (kernelc's), it is only registered under a Triton name."""

    def __init__(self, module):
        self.module = module
        self.own_spec = getattr(module, "__spec__", None)

    def create_module(self, spec):
        return self.module

    def exec_module(self, module):
        # the import system just set __spec__ to the Triton name's spec: kernelc's module keeps its own
        if self.own_spec is not None:
            module.__spec__ = self.own_spec


class TritonFinder(importlib.abc.MetaPathFinder):
    """``sys.meta_path`` entry answering ``triton`` and ``triton.*`` with kernelc's modules."""

    def __init__(self):
        self.patched: List[types.ModuleType] = []

    def target_of(self, fullname: str) -> str:
        if fullname in RENAMED:
            return RENAMED[fullname]
        for prefix, target in RENAMED.items():
            if fullname.startswith(prefix + "."):
                return target + fullname[len(prefix):]
        return "kernelc" + fullname[len("triton"):]

    def find_spec(self, fullname, path=None, target=None):
        if fullname != "triton" and not fullname.startswith("triton."):
            return None
        if fullname == "triton":
            module = _make_root()
        else:
            name = self.target_of(fullname)
            try:
                module = importlib.import_module(name)
            except ModuleNotFoundError as e:
                if e.name and not (name == e.name or name.startswith(e.name + ".")):
                    raise  # kernelc itself lacks a dependency: not the user's problem to name
                file, line = user_location()
                raise ModuleNotFoundError(
                    f"No module named {fullname!r}: kernelc has no {fullname} (used at {file}:{line}); see "
                    f"docs/triton-compat.md for what kernelc supports", name=fullname) from None
            self._patch(fullname, module)
            # submodules already imported are reached as attributes (tl.math, triton.runtime.driver)
            prefix = module.__name__ + "."
            for sub_name, sub in list(sys.modules.items()):
                if sub_name.startswith(prefix) and isinstance(sub, types.ModuleType):
                    self._patch(fullname + "." + sub_name[len(prefix):], sub)
        return importlib.machinery.ModuleSpec(fullname, _Existing(module), is_package=hasattr(module, "__path__"))

    def _patch(self, triton_name: str, module: types.ModuleType) -> None:
        """Make a missing name in ``module`` raise :class:`MissingTritonAPI` (until uninstall)."""
        if getattr(module.__dict__.get("__getattr__"), "_kernelc_alias", False) is not False:
            return
        module.__getattr__ = _missing_getattr(triton_name, module, FALLBACKS.get(module.__name__))
        self.patched.append(module)

    def unpatch(self) -> None:
        for m in self.patched:
            g = m.__dict__.get("__getattr__")
            prev = getattr(g, "_kernelc_alias", None)
            if prev is not None:
                m.__getattr__ = prev
            else:
                m.__dict__.pop("__getattr__", None)
        self.patched.clear()


_finder: Optional[TritonFinder] = None


def install() -> None:
    """Resolve ``import triton`` and ``triton.*`` to kernelc from now on in this process.

    Raises ``RuntimeError`` if a real Triton was already imported (the two cannot share the name)."""
    global _finder
    if _finder is not None:
        return
    real = sys.modules.get("triton")
    if real is not None and not getattr(real, "__kernelc__", False):
        raise RuntimeError(f"a real Triton is already imported ({getattr(real, '__file__', real)}); install the "
                           "kernelc alias before anything imports triton (use `python -m kernelc.run script.py`)")
    _finder = TritonFinder()
    sys.meta_path.insert(0, _finder)
    for name in FALLBACKS:  # reached as attributes (triton.language.core), not only through imports
        _finder._patch("triton" + name[len("kernelc"):], importlib.import_module(name))


def uninstall() -> None:
    """Undo :func:`install`: drop the finder and every ``triton`` module it registered."""
    global _finder
    if _finder is None:
        return
    try:
        sys.meta_path.remove(_finder)
    except ValueError:
        pass
    _finder.unpatch()
    for name in [n for n in sys.modules if n == "triton" or n.startswith("triton.")]:
        del sys.modules[name]
    _finder = None


def installed() -> bool:
    return _finder is not None
