"""Running unmodified Triton programs on kernelc.

``python -m kernelc.run script.py [args]`` (or :func:`kernelc.compat.install` in a notebook/test)
makes ``import triton`` and every ``triton.*`` import resolve to kernelc (``compat/alias.py``);
``docs/triton-compat.md`` lists, name by name, what is supported.

Example::

    import kernelc.compat
    kernelc.compat.install()
    import triton, triton.language as tl      # kernelc and kernelc.language
    triton.__version__                         # "3.6.0" (the Triton kernelc stands in for)
"""
from .alias import TRITON_VERSION, MissingTritonAPI, install, installed, uninstall  # noqa: F401

__all__ = ["install", "uninstall", "installed", "MissingTritonAPI", "TRITON_VERSION", "resolve"]


def resolve(path: str):
    """The object a dotted ``module.attr.attr`` path names (the longest importable module prefix, then
    attributes); under the alias, ``triton.language.sort`` is kernelc's. Raises ImportError/AttributeError."""
    import importlib
    parts = path.split(".")
    for i in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:i]))
        except ImportError:
            continue
        for p in parts[i:]:
            obj = getattr(obj, p)
        return obj
    raise ImportError(path)
