"""Forcing a launch configuration from outside the program (used by ``kprof-analyze --verify``).

``KERNELC_OVERRIDE`` names kernels and the constexprs / launch options to force on every launch:

    KERNELC_OVERRIDE='matmul_kernel:BLOCK_SIZE_M=64,BLOCK_SIZE_N=128,num_warps=4,num_stages=4;softmax_kernel:num_warps=8'

or the same as JSON: ``{"matmul_kernel": {"BLOCK_SIZE_M": 64, "num_warps": 4}}``. An autotuned kernel with an
override skips tuning. Values are parsed as Python literals (ints, floats, bools, strings).
"""
from __future__ import annotations

import ast
import json
import os
from typing import Any, Dict, Optional

_cache: Dict[str, Dict[str, Dict[str, Any]]] = {}


def parse(spec: str) -> Dict[str, Dict[str, Any]]:
    spec = spec.strip()
    if not spec:
        return {}
    if spec.startswith("{"):
        data = json.loads(spec)
        return {str(k): dict(v) for k, v in data.items()}
    out: Dict[str, Dict[str, Any]] = {}
    for part in spec.split(";"):
        if not part.strip():
            continue
        if ":" not in part:
            raise ValueError(f"KERNELC_OVERRIDE entry {part!r} must look like 'kernel:KEY=VALUE,KEY=VALUE'")
        name, kvs = part.split(":", 1)
        cfg = {}
        for kv in kvs.split(","):
            if not kv.strip():
                continue
            if "=" not in kv:
                raise ValueError(f"KERNELC_OVERRIDE item {kv!r} for {name.strip()!r} must be KEY=VALUE")
            k, v = kv.split("=", 1)
            try:
                cfg[k.strip()] = ast.literal_eval(v.strip())
            except (ValueError, SyntaxError):
                cfg[k.strip()] = v.strip()
        out[name.strip()] = cfg
    return out


def overrides_for(kernel_name: str) -> Optional[Dict[str, Any]]:
    """The forced settings for ``kernel_name`` (None when none are set)."""
    spec = os.environ.get("KERNELC_OVERRIDE", "")
    table = _cache.get(spec)
    if table is None:
        table = _cache[spec] = parse(spec)
    return table.get(kernel_name)


def format_override(kernel_name: str, config: Dict[str, Any]) -> str:
    """The KERNELC_OVERRIDE text forcing ``config`` on ``kernel_name``."""
    return f"{kernel_name}:" + ",".join(f"{k}={v!r}" for k, v in config.items())
