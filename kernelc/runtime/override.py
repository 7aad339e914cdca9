"""Forcing a launch configuration from outside the program (used by ``kprof-analyze --verify``).

``KERNELC_OVERRIDE`` names kernels and the constexprs / launch options to force on every launch:

    KERNELC_OVERRIDE='matmul_kernel:BLOCK_SIZE_M=64,BLOCK_SIZE_N=128,num_warps=4,num_stages=4;softmax_kernel:num_warps=8'

or the same as JSON: ``{"matmul_kernel": {"BLOCK_SIZE_M": 64, "num_warps": 4}}``. An autotuned kernel with an
override skips tuning. Values are parsed as Python literals (ints, floats, bools, strings).
"""
from __future__ import annotations

import ast
import json
from typing import Any, Dict, Optional

from .. import options

_cache: Dict[str, Dict[str, Dict[str, Any]]] = {}


class OverrideError(ValueError):
    """A malformed ``KERNELC_OVERRIDE`` (the message says which part and what it should look like)."""


_LAUNCH_INTS = ("num_warps", "num_stages")


def _checked(name: Any, cfg: Any) -> Dict[str, Any]:
    if not isinstance(name, str) or not name.isidentifier():
        raise OverrideError(f"KERNELC_OVERRIDE names kernel {name!r}, which is not a Python identifier")
    if not isinstance(cfg, dict):
        raise OverrideError(f"KERNELC_OVERRIDE settings for {name!r} must be KEY=VALUE items (a JSON object), "
                            f"got {type(cfg).__name__}")
    for k, v in cfg.items():
        if not isinstance(k, str) or not k.isidentifier():
            raise OverrideError(f"KERNELC_OVERRIDE key {k!r} for {name!r} is not a Python identifier")
        if k in _LAUNCH_INTS and (isinstance(v, bool) or not isinstance(v, int) or v < 1):
            raise OverrideError(f"KERNELC_OVERRIDE {k}={v!r} for {name!r} must be a positive integer")
    return dict(cfg)


def parse(spec: str) -> Dict[str, Dict[str, Any]]:
    """``{kernel: {key: value}}`` from a ``KERNELC_OVERRIDE`` text; raises :class:`OverrideError`."""
    spec = spec.strip()
    if not spec:
        return {}
    if spec.startswith("{"):
        try:
            data = json.loads(spec)
        except ValueError as e:
            raise OverrideError(f"KERNELC_OVERRIDE is not valid JSON: {e}") from None
        if not isinstance(data, dict):
            raise OverrideError("KERNELC_OVERRIDE JSON must be an object {kernel: {KEY: VALUE}}")
        return {k: _checked(k, v) for k, v in data.items()}
    out: Dict[str, Dict[str, Any]] = {}
    for part in spec.split(";"):
        if not part.strip():
            continue
        if ":" not in part:
            raise OverrideError(f"KERNELC_OVERRIDE entry {part!r} must look like 'kernel:KEY=VALUE,KEY=VALUE'")
        name, kvs = part.split(":", 1)
        cfg = {}
        for kv in kvs.split(","):
            if not kv.strip():
                continue
            if "=" not in kv:
                raise OverrideError(f"KERNELC_OVERRIDE item {kv!r} for {name.strip()!r} must be KEY=VALUE")
            k, v = kv.split("=", 1)
            try:
                cfg[k.strip()] = ast.literal_eval(v.strip())
            except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
                cfg[k.strip()] = v.strip()
        out[name.strip()] = _checked(name.strip(), cfg)
    return out


def overrides_for(kernel_name: str) -> Optional[Dict[str, Any]]:
    """The forced settings for ``kernel_name`` (None when none are set)."""
    spec = options.get("KERNELC_OVERRIDE")
    table = _cache.get(spec)
    if table is None:
        table = _cache[spec] = parse(spec)
    return table.get(kernel_name)


def format_override(kernel_name: str, config: Dict[str, Any]) -> str:
    """The KERNELC_OVERRIDE text forcing ``config`` on ``kernel_name``."""
    return f"{kernel_name}:" + ",".join(f"{k}={v!r}" for k, v in config.items())
