"""The autotuning key of a launch, shared by the autotuner's per-launch lookup and ``tuning.select_config``."""
from __future__ import annotations

from typing import Any, Dict


class _Identity(tuple):
    """A key component standing for one tensor object: Triton 3.6 puts a tensor named in ``key``
    into its key as the object itself (hashed by identity), so each new tensor is tuned again (tutorial
    08 keys on its pointer arrays, so every benchmark point gets its own pick). Such keys live in memory
    only, and leave the cache when their tensor does (runtime/tuning.py)."""


_DTYPE_NAMES: Dict[Any, str] = {}  # str(dtype), per dtype object: a launch names the dtype of every tensor argument


def key_values(tuner, named: Dict[str, Any]) -> tuple:
    """The autotuning key of a launch: the values of the ``key`` arguments (a tensor by identity), then the
    dtype of every tensor argument (Triton includes them)."""
    vals = []
    for k in tuner.key:
        if k not in named:
            continue  # Triton ignores key names that are not parameters (warned at decoration)
        v = named[k]
        vals.append(_Identity(("tensor", id(v))) if hasattr(v, "data_ptr") else v)
    for v in named.values():
        if hasattr(v, "data_ptr"):
            d = v.dtype
            try:
                s = _DTYPE_NAMES[d]
            except (KeyError, TypeError):  # not named yet, or an unhashable dtype-like
                s = str(d)
                if len(_DTYPE_NAMES) < 256:
                    try:
                        _DTYPE_NAMES[d] = s
                    except TypeError:
                        pass
            vals.append(s)
    return tuple(vals)
