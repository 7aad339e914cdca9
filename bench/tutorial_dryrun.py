"""A tutorial's dry run on a machine without a GPU: every kernel compiles as it would on an H100, none runs.

``bench/tutorial_runner.py --dry-run`` installs this before it runs the (unmodified) tutorial. Under
real Triton and under kernelc alike:

- the compiler's target is the H100's (``sm_90``, 132 SMs, 232448 B of shared memory per block);
- every tensor the tutorial puts on ``cuda`` lives on torch's ``meta`` device instead: no memory,
  no arithmetic. A meta tensor's ``data_ptr()`` is 0, so pointer arguments specialise as 16-byte
  aligned, as a fresh CUDA allocation does;
- launching is a no-op; a benchmark (``do_bench``, an autotuner's timing) calls its function once and
  reports 1 ms, so every autotune config is compiled and the first one is "chosen";
- autotune results are neither read from nor written to disk;
- the profiler (``triton.profiler``) and cuBLAS (``triton._C.libtriton.nvidia.cublas``) do nothing;
- with a shard (i, N), this process compiles only the kernels whose identity hashes to i modulo N and
  gives the others a stand-in (``_Skipped``) that launches as a no-op.

What it is for: filling each implementation's on-disk compile cache with exactly the kernels the
tutorial compiles on the GPU, so that a GPU run with that cache measures the tutorial, not the
compiler (``bench/triton_tutorials.py --warm``). Whether a GPU run hit the cache is counted there
(``compile`` in the runner's JSON), so a kernel this run compiled for the wrong key shows up as a miss,
never as a silently different kernel. Values of the tutorial's tensors are not computed: numerical
checks in the tutorial see ``meta`` tensors (``allclose``/``equal`` on them answer True).
"""
from __future__ import annotations

import hashlib
import types
from typing import Any, Dict, Optional, Tuple

# An H100 SXM (the kind the GPU runs use; the H200 has the same SM count and limits)
H100_PROPERTIES: Dict[str, Any] = {
    "max_shared_mem": 232448, "max_num_regs": 65536, "multiprocessor_count": 132, "warpSize": 32,
    "sm_clock_rate": 1980000, "mem_clock_rate": 2619000, "mem_bus_width": 5120,
}
H100_NAME = "NVIDIA H100 80GB HBM3"
CAPABILITY = (9, 0)


#: the identities of the compiles this dry-run process was asked for (its own share and the others')
REQUESTS = []


def mine(identity: str, shard: Optional[Tuple[int, int]]) -> bool:
    """Whether this process compiles the kernel ``identity`` (its name, signature, constexprs and
    options) when ``shard`` = (i, N) processes split the compiles: by a hash, so the split does not depend
    on the order in which compiles are asked for (kernelc's autotuner compiles on threads)."""
    if not shard:
        return True
    h = int.from_bytes(hashlib.sha256(identity.encode()).digest()[:8], "little")
    return h % shard[1] == shard[0]


def _is_cuda(d) -> bool:
    import torch
    if isinstance(d, str):
        return d == "cuda" or d.startswith("cuda:")
    if isinstance(d, torch.device):
        return d.type == "cuda"
    return False


def _meta(d):
    return "meta" if _is_cuda(d) else d


def torch_function_mode():
    """A TorchFunctionMode that puts every tensor asked for on ``cuda`` on ``meta``."""
    import torch
    from torch.overrides import TorchFunctionMode

    to_funcs = {torch.Tensor.to, torch.Tensor.new_empty, torch.Tensor.new_zeros, torch.Tensor.new_ones,
                torch.Tensor.new_full, torch.Tensor.new_tensor}
    truthy = {torch.allclose, torch.equal, torch.Tensor.allclose, torch.Tensor.equal}

    class CudaAsMeta(TorchFunctionMode):
        def __torch_function__(self, func, types_, args=(), kwargs=None):
            kwargs = dict(kwargs or {})
            if "device" in kwargs:
                kwargs["device"] = _meta(kwargs["device"])
            if func is torch.Tensor.cuda:
                return args[0].to("meta")
            if func in to_funcs:
                args = tuple(_meta(a) for a in args)
            if func in truthy and any(getattr(a, "is_meta", False) for a in args):
                return True
            if func is torch.Tensor.item and args and getattr(args[0], "is_meta", False):
                return 0
            return func(*args, **kwargs)

    return CudaAsMeta()


def _patch_torch_cuda() -> None:
    import torch
    props = types.SimpleNamespace(name=H100_NAME, major=CAPABILITY[0], minor=CAPABILITY[1],
                                  multi_processor_count=H100_PROPERTIES["multiprocessor_count"],
                                  total_memory=80 * 2**30, warp_size=32,
                                  shared_memory_per_block_optin=H100_PROPERTIES["max_shared_mem"])
    torch.cuda.get_device_capability = lambda *a, **k: CAPABILITY
    torch.cuda.get_device_properties = lambda *a, **k: props
    torch.cuda.get_device_name = lambda *a, **k: H100_NAME
    torch.cuda.synchronize = lambda *a, **k: None
    torch.cuda.current_device = lambda: 0
    torch.cuda.set_device = lambda *a, **k: None
    torch.cuda.empty_cache = lambda: None


def bench_once(fn, *args, quantiles=None, return_mode="mean", **kwargs):
    """A benchmark that runs ``fn`` once (to compile what it launches) and reports 1 ms."""
    fn()
    if quantiles:
        return [1.0] * len(quantiles)
    return 1.0


def _noop(*a, **k):
    return None


class _NullScope:
    """``proton.scope`` as context manager and decorator, recording nothing."""

    def __init__(self, *a, **k):
        pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def __call__(self, fn):
        return fn


def _silence_profiler(mod) -> None:
    for name in ("start", "activate", "deactivate", "finalize", "enter_scope", "exit_scope"):
        if hasattr(mod, name):
            setattr(mod, name, _noop)
    for name in ("scope", "cpu_timed_scope"):
        if hasattr(mod, name):
            setattr(mod, name, _NullScope)
    try:  # no profile is written, so there is none to read or print
        import importlib
        viewer = importlib.import_module(mod.__name__ + ".viewer")
        viewer.parse = lambda *a, **k: (None, [])
        viewer.print_tree = _noop
    except Exception:
        pass


class _NullBlas:
    """cuBLAS stand-in (``triton._C.libtriton.nvidia.cublas.CublasLt``): a baseline, not a Triton kernel;
    nothing is computed in a dry run."""

    def __init__(self, workspace):
        self.workspace = workspace

    def matmul(self, a, b, c):
        return c


# ---------------------------------------------------------------------------------------------
# real Triton
# ---------------------------------------------------------------------------------------------
def _arg_identity(v):
    """What of one launch argument can change the kernels an autotuner compiles for it: a tensor's
    dtype and rank (meta tensors are all 16-byte aligned), a tensor descriptor's dtype, shape and
    strides, a scalar's value. Anything else: the object itself (a new one is a new call)."""
    if hasattr(v, "data_ptr"):
        return ("tensor", str(v.dtype), v.dim())
    if hasattr(v, "block_shape") and hasattr(v, "base"):
        return ("desc", str(getattr(v.base, "dtype", None)), tuple(v.shape), tuple(v.strides))
    if v is None or isinstance(v, (bool, int, float, str)):
        return (type(v).__name__, v)
    return ("object", id(v))


def _retuning(run):
    """An autotuner's ``run`` that forgets the configs it chose before each call that differs from the
    calls before it, so a dry run compiles every config for every kind of call. On the GPU, a key tuned
    once is launched later with the chosen config only, and with other constexprs too (06's non-causal
    tables reuse the causal tables' key, with another ``STAGE``); which config that is depends on real
    timings, so the dry run compiles them all. A call like one before (09 launches each kernel 20000
    times) compiles nothing new either way, and skipping its retune keeps the dry run's host loop short."""
    def retune(self, *args, **kwargs):
        try:
            ident = (tuple(_arg_identity(a) for a in args),
                     tuple(sorted((k, _arg_identity(v)) for k, v in kwargs.items() if k != "grid")))
            seen = self.__dict__.setdefault("_dry_run_calls", set())
            new = ident not in seen
            seen.add(ident)
        except TypeError:  # an unhashable identity: tune as if new
            new = True
        if new:
            self.cache.clear()
        return run(self, *args, **kwargs)
    return retune


class _Skipped:
    """What a compile left to another dry-run process returns: enough of a compiled kernel for a no-op
    launch. ``dry_run_skipped`` tells the runner's accounting not to count it."""
    dry_run_skipped = True

    def __init__(self, name, num_warps=4, num_stages=3, target=None):
        self.name = name
        self.n_regs = self.n_spills = self.shared = self.function = self.global_scratch_bytes = 0
        self.num_warps = self.launch_warps = num_warps
        self.num_stages = num_stages
        self.packed_metadata = None
        self.asm = {}
        self.hash = self.cache_key = None
        self.timings = {}
        self.target = target
        self.metadata = types.SimpleNamespace(name=name, shared=0, num_warps=num_warps, num_stages=num_stages,
                                              target=target)

    def launch_metadata(self, *args, **kwargs):
        return None

    def run(self, *args, **kwargs):
        return None

    def _init_handles(self):
        pass


def install_triton(shard: Optional[Tuple[int, int]] = None) -> None:
    """Make the real Triton (imported from PYTHONPATH) compile for an H100 and launch nothing; with
    ``shard`` = (i, N), compile only this process's share of the kernels."""
    import torch
    import triton
    import triton.testing
    from triton.backends.compiler import GPUTarget
    from triton.backends.driver import DriverBase
    from triton.backends.nvidia.driver import ty_to_cpp

    class _Launcher:
        def __init__(self, src, metadata):
            pass

        def __call__(self, *args, **kwargs):
            return None

    class _Utils:
        def get_device_properties(self, device):
            return dict(H100_PROPERTIES)

        def load_binary(self, name, kernel, shared, device):
            return 0, 0, 0, 0, 1024  # module, function, n_regs (unknown), n_spills (unknown), max threads

    class DryRunDriver(DriverBase):
        def __init__(self):
            self.utils = _Utils()
            self.launcher_cls = _Launcher
            self.get_current_stream = lambda device=None: 0
            self.get_current_device = lambda: 0
            self.set_current_device = lambda device: None
            self.get_device_capability = lambda device=None: CAPABILITY

        @staticmethod
        def is_active():
            return False

        def map_python_to_cpp_type(self, ty):
            return ty_to_cpp(ty)

        def get_current_target(self):
            return GPUTarget("cuda", CAPABILITY[0] * 10 + CAPABILITY[1], 32)

        def get_active_torch_device(self):
            return torch.device("meta")

        def get_benchmarker(self):
            return bench_once

        def get_device_interface(self):
            return torch.cuda

        def get_empty_cache_for_benchmark(self):
            return torch.empty(1, device="meta")

        def clear_cache(self, cache):
            pass

    def tune_without_disk_cache(self, tuning_key, configs, bench_fn):
        # (cache_results): never read or store dry-run "timings"; compile every config
        bench_fn()
        return False

    _patch_torch_cuda()
    try:
        from triton._C.libtriton import nvidia
        nvidia.cublas.CublasLt = _NullBlas
    except Exception:  # a build without the cuBLAS binding: the tutorial then fails as it would anyway
        pass
    from triton.runtime.autotuner import Autotuner
    Autotuner.check_disk_cache = tune_without_disk_cache
    Autotuner.run = _retuning(Autotuner.run)
    if shard:
        import triton.compiler
        real_compile = triton.compiler.compile

        def compile_share(src, target=None, options=None, **kwargs):
            opts = dict(options or {})
            identity = repr((getattr(src, "name", None), sorted(map(str, getattr(src, "signature", {}).items())),
                             sorted(map(str, getattr(src, "constants", {}).items())),
                             sorted(map(str, getattr(src, "attrs", {}).items())), sorted(map(str, opts.items()))))
            REQUESTS.append(hashlib.sha256(identity.encode()).hexdigest()[:12])
            if not mine(identity, shard):
                return _Skipped(getattr(src, "name", "?"), opts.get("num_warps", 4), opts.get("num_stages", 3), target)
            return real_compile(src, target=target, options=options, **kwargs)
        triton.compiler.compile = compile_share  # what JITFunction.create_binder picks up
    triton.runtime.driver.set_active(DryRunDriver())
    triton.testing.do_bench = bench_once
    triton.testing.do_bench_cudagraph = bench_once
    try:
        import triton.profiler as proton
        _silence_profiler(proton)
    except Exception:  # a Triton without Proton: the tutorials that need it fail as they would anyway
        pass


# ---------------------------------------------------------------------------------------------
# kernelc (under the ``triton`` alias)
# ---------------------------------------------------------------------------------------------
def install_kernelc(shard: Optional[Tuple[int, int]] = None) -> None:
    """Make kernelc compile every launch for an H100 (its disk cache, as ``compile_for`` does) and launch
    nothing; with ``shard`` = (i, N), compile only this process's share of the kernels."""
    import kernelc.testing
    from kernelc.compiler.backend import target_for_device
    from kernelc.runtime import autotuner, jit as kjit, launcher, timing, tuning
    from kernelc.runtime import cache
    from kernelc.errors import OutOfResources

    def dry_launch(fn, values, grid, num_warps, num_stages, options, warmup):
        st = launcher.get_state(fn)
        cmask = fn.constexpr_mask(values)
        spec_key = st["spec"].key([values[n] for n in fn.arg_names], cmask)
        fusion = launcher._fp_fusion_option(options)
        key = (spec_key, num_warps, num_stages, fusion)
        dry = st.setdefault("dry_run", {})
        failed = st.setdefault("dry_run_failed", {})
        try:
            ck = dry.get(key)
        except TypeError:  # an unhashable constexpr value
            key = repr(key)
            ck = dry.get(key)
        if ck is None and key in failed:  # as the launcher: an oversized specialisation fails once
            raise failed[key].with_traceback(None)
        if ck is None:
            target = target_for_device(*CAPABILITY)
            identity = repr((fn.__name__, spec_key, num_warps, num_stages, fusion))
            REQUESTS.append(hashlib.sha256(identity.encode()).hexdigest()[:12])
            if not mine(identity, shard):
                ck = dry[key] = _Skipped(fn.__name__, num_warps, num_stages, target)
                return ck
            # the arguments compile_for passes on the GPU (kernelc/runtime/launcher.py)
            sig, cx, div, eq1, _ = st["spec"].signature(spec_key)
            div = dict(div, **{n: 1 for n, t in sig.items() if t.startswith("*") and n not in div})
            try:
                ck = dry[key] = cache.cached_compile(  # looked up per call: the runner counts compiles through it
                    fn, sig, cx, div, eq1, num_warps, num_stages, target, fusion)
            except OutOfResources as e:
                failed[key] = e
                raise
        return ck

    _patch_torch_cuda()
    from kernelc.runtime.active import CudaDriver
    import torch
    CudaDriver.get_active_torch_device = lambda self: torch.device("meta")
    CudaDriver.get_benchmarker = lambda self: bench_once
    CudaDriver.get_empty_cache_for_benchmark = lambda self: torch.empty(1, device="meta")
    launcher.launch_cuda = dry_launch
    kjit.JITFunction._use_interpreter = lambda self, values: False
    # without a GPU the autotuner would take its first config untimed: tune (i.e. compile) them all, as on the GPU
    autotuner._interpreting = lambda fn: bool(getattr(fn, "interpret", False))
    # never take a config from saved autotuning results: another dry-run process's are not timings, and a
    # key found there would compile only its chosen config
    tuning.read_saved = lambda path, configs: None
    autotuner.Autotuner.run = _retuning(autotuner.Autotuner.run)
    tuning._bench = lambda fn, warmup, rep: bench_once(fn)
    tuning._device_name = lambda: H100_NAME
    timing.do_bench = bench_once
    kernelc.testing.do_bench = bench_once
    if hasattr(kernelc.testing, "do_bench_cudagraph"):
        kernelc.testing.do_bench_cudagraph = bench_once
    if hasattr(timing, "do_bench_cudagraph"):
        timing.do_bench_cudagraph = bench_once
    try:
        import triton.profiler as proton  # kprof under the alias
        _silence_profiler(proton)
    except Exception:
        pass
