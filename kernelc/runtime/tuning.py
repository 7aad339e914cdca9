"""Choosing an autotune config on the GPU: benchmark the candidates, keep the fastest per key.

Candidates are compiled in parallel threads (one per core) before timing; LLVM, which llvmlite lets
only one thread of a process into, runs in worker processes for the compiles that overlap
(compiler/backend/llvm_pool.py). Results persist on disk per (kernel, key values, device) unless
``cache_results`` is off.
"""
from __future__ import annotations

import hashlib
import json
import os
import sys
import time
from concurrent.futures import ThreadPoolExecutor
import weakref
from typing import Any, Dict, List

from .. import options
from .cache import cache_dir, dependency_fingerprint
from .tuning_key import key_values


def _identity_tensors(tuner, named):
    return [named[k] for k in tuner.key if k in named and hasattr(named[k], "data_ptr")]


def _remember(tuner, named, key, config):
    """Store ``config`` for ``key``; a key naming tensors by identity is dropped when one of them dies
    (ids are reused), and is never kept on disk."""
    tuner.cache[key] = config
    # every pick, also of keys that left the cache, for reports (bench/tutorial_runner.py)
    tuner.__dict__.setdefault("picks", {})[str(key)] = config
    for t in _identity_tensors(tuner, named):
        try:
            weakref.finalize(t, tuner.cache.pop, key, None)
        except TypeError:  # an object without weak references: keep the entry
            pass


def _disk_path(tuner, key, device_name):
    fn = tuner.base_fn
    h = hashlib.sha256(json.dumps([dependency_fingerprint(fn), repr(key), device_name,
                                   [repr(c) for c in tuner.configs]]).encode()).hexdigest()[:32]
    return os.path.join(cache_dir(), "autotune", f"{fn.__name__}-{h}.json")


def _device_name() -> str:
    import torch
    return torch.cuda.get_device_name()


def read_saved(path: str, configs):
    """The config a saved autotuning result names, or None (no file, or one of the wrong shape: then a
    warning names the file, and the caller tunes again and overwrites it)."""
    try:
        with open(path, "rb") as f:
            raw = f.read()
    except OSError:
        return None
    try:
        saved = json.loads(raw.decode("utf-8"))
    except (ValueError, UnicodeDecodeError, RecursionError) as e:
        why = f"not JSON ({type(e).__name__})"
    else:
        if not isinstance(saved, dict) or not isinstance(saved.get("config"), str):
            why = 'not an object with a "config" string'
        else:
            for c in configs:
                if repr(c) == saved["config"]:
                    return c
            return None  # tuned for configs that have since changed: tune again
    import warnings
    warnings.warn(f"kernelc: autotune cache file {path} is corrupt ({why}); tuning again", RuntimeWarning)
    return None


DEFAULT_WARMUP_MS, DEFAULT_REP_MS = 25, 100


def _bench(fn, warmup, rep):
    from .timing import do_bench
    return do_bench(fn, warmup=warmup, rep=rep, return_mode="median")


def _tuner_bench(tuner, fn) -> float:
    """Time one candidate as the autotuner was told: its ``do_bench``, a CUDA graph, or do_bench."""
    if tuner.do_bench is not None:  # Triton's contract: do_bench(fn, quantiles=...) -> [median, ...]
        out = tuner.do_bench(fn, quantiles=(0.5, 0.2, 0.8))
        return float(out[0] if isinstance(out, (list, tuple)) else out)
    if tuner.use_cuda_graph:
        from .timing import do_bench_cudagraph
        return do_bench_cudagraph(fn, rep=tuner.rep_ms or 20, return_mode="median")
    # Triton's lengths (its do_bench defaults) unless the autotuner was given its own: with 5 + 20 ms, tutorial 08's
    # tuner picked a config 20% slower in 2 of 3 tunings (docs/triton-tutorials.md, "08's pick")
    return _bench(fn, tuner.warmup_ms or DEFAULT_WARMUP_MS, tuner.rep_ms or DEFAULT_REP_MS)


def select_config(tuner, configs, args, kwargs, grid):
    named = dict(zip(tuner.arg_names, args))
    named.update(kwargs)
    key = key_values(tuner, named)
    hit = tuner.cache.get(key)
    if hit is not None:
        return hit
    device_name = _device_name()
    on_disk = not _identity_tensors(tuner, named)
    path = _disk_path(tuner, key, device_name) if on_disk else None
    if on_disk and (tuner.cache_results or options.get("KERNELC_AUTOTUNE_DISK_CACHE")):
        c = read_saved(path, configs)
        if c is not None:
            _remember(tuner, named, key, c)
            return c
    if len(configs) == 1:
        _remember(tuner, named, key, configs[0])
        return configs[0]
    t0 = time.perf_counter()
    fn = tuner.fn
    # compile every candidate first, in parallel
    def warm(c):
        try:
            a, kw = args, kwargs
            if c.pre_hook is not None:
                # a pre-hook may change what the kernel is compiled for (Triton's tutorials set tensor
                # descriptors' block shapes there): run it on copies of such arguments, per thread
                a, kw = _hook_copies(tuner.arg_names, args, kwargs, c)
            fn.warmup(*a, grid=grid, **dict(kw, **c.all_kwargs()))
            return None
        except Exception as e:  # a config that cannot compile (e.g. out of shared memory) is skipped
            return e
    with ThreadPoolExecutor(max_workers=max(1, min(os.cpu_count() or 1, len(configs)))) as ex:
        errors = list(ex.map(warm, configs))
    restore = {n: named[n].clone() for n in tuner.restore_value if n in named}
    from .jit import JITFunction
    launch = fn[grid] if isinstance(fn, JITFunction) else (lambda *a, **kw: fn.run(*a, grid=grid, **kw))
    timings = {}
    show = False
    for i, (c, err) in enumerate(zip(configs, errors)):
        if err is not None:
            timings[c] = float("inf")
            continue

        def call():
            full = dict(named, **c.all_kwargs())
            for n in tuner.reset_to_zero:
                named[n].zero_()
            if c.pre_hook is not None:
                c.pre_hook(full)
            if tuner.pre_hook is not None:
                tuner.pre_hook(full)
            try:
                # the launch fast path, as a user's kernel[grid](...) takes: the timed window of a short kernel (08's
                # check sizes: 16 us) must not hold the general path's argument binding, or every candidate reads
                # as that host time and the pick is a coin toss (docs/triton-tutorials.md, 08's pick)
                launch(*args, **dict(kwargs, **c.all_kwargs()))
            except Exception as e:
                if tuner.post_hook is not None:
                    tuner.post_hook(full, exception=e)
                raise
            if tuner.post_hook is not None:
                tuner.post_hook(full, exception=None)
        try:
            timings[c] = _tuner_bench(tuner, call)
        except Exception:
            timings[c] = float("inf")
        for n, v in restore.items():
            named[n].copy_(v)
        if not show and time.perf_counter() - t0 > 1.0:
            show = True
        if show:
            done = i + 1
            bar = "#" * int(30 * done / len(configs))
            print(f"\rkernelc autotune {tuner.__name__}: [{bar:<30}] {done}/{len(configs)}", end="", file=sys.stderr)
    if show:
        print(file=sys.stderr)
    best = min(timings, key=timings.get)
    if timings[best] == float("inf"):
        raise RuntimeError(f"no autotune config of {tuner.__name__} could run: {[str(e) for e in errors if e][:2]}")
    _remember(tuner, named, key, best)
    tuner.configs_timings = timings
    elapsed = time.perf_counter() - t0
    if options.get("KERNELC_PRINT_AUTOTUNING"):
        print(f"kernelc autotuning {tuner.__name__} for key {key}: best {best} ({timings[best]:.4f} ms) "
              f"after {elapsed:.2f}s over {len(configs)} configs", file=sys.stderr)
    if path is None:
        return best
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        tmp = path + f".tmp{os.getpid()}"
        with open(tmp, "w") as f:
            json.dump({"config": repr(best), "timings_ms": {repr(c): t for c, t in timings.items()}}, f)
        os.replace(tmp, path)
    except OSError:
        pass
    return best


def _hook_copies(arg_names, args, kwargs, config):
    """``args``/``kwargs`` with shallow copies of the non-tensor objects (tensor descriptors) after
    ``config.pre_hook`` ran on them, leaving the caller's objects as they were."""
    import copy
    named = dict(zip(arg_names, args))
    named.update(kwargs)
    copies = {}
    for k, v in named.items():
        if hasattr(v, "block_shape") and not hasattr(v, "data_ptr"):
            v = copy.copy(v)
            v.block_shape = list(v.block_shape)  # the copy owns its block shape
        copies[k] = v
    config.pre_hook(dict(copies, **config.all_kwargs()))
    return [copies[n] for n in arg_names[:len(args)]], {k: copies[k] for k in kwargs}
