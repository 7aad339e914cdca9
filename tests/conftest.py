import os

import pytest


def _has_gpu() -> bool:
    try:
        from kernelc.runtime.device import cuda_available
        return cuda_available()
    except Exception:
        return False


def pytest_collection_modifyitems(config, items):
    if _has_gpu():
        return
    skip = pytest.mark.skip(reason="needs an NVIDIA GPU (CUDA driver not found)")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


# nvdisasm costs ~0.5 s of start-up a call whatever the cubin, and tests disassemble the same cubins over and over
# (a third of the suite's time, 2026-11-28): the controller gives every worker one content-addressed SASS cache for
# the run. Entries are keyed by the cubin's bytes, flags and nvdisasm binary, so sharing cannot change a result.
# nvJitLink likewise: tests compile the same kernels at the same configs (the examples' attention kernels, the
# tutorials' shapes), each into its own kernel cache; a fifth of the assembling was of PTX assembled before in the
# run (2026-11-29). The cubin cache is keyed by the PTX, the options and nvJitLink's version.
_RUN_ENV = {}


# The SASS assertions hold for the nvJitLink this machine has; the GPU hosts assemble with another (13.0.88 where
# this one has 13.5, 2026-11-30) and some of their SASS differs (docs/performance.md, "nvj27"). --nvjitlink LIB runs
# the suite with that library: loaded here before anything imports cuda.bindings (which takes a library already
# loaded) and put in LD_PRELOAD for the xdist workers and every process the tests start.
def pytest_addoption(parser):
    parser.addoption("--nvjitlink", metavar="LIB", default=None,
                     help="assemble with this libnvJitLink.so (e.g. the GPU hosts' 13.0.88: pip install --no-deps "
                          "--target DIR nvidia-nvjitlink==13.0.88; DIR/nvidia/cu13/lib/libnvJitLink.so.13)")


def _preload_nvjitlink(lib):
    import ctypes
    if not os.path.isfile(lib):
        raise pytest.UsageError(f"--nvjitlink {lib}: no such file")
    lib = os.path.abspath(lib)
    ctypes.CDLL(lib, mode=os.RTLD_GLOBAL)
    preload = os.environ.get("LD_PRELOAD", "").split()
    if lib not in preload:
        os.environ["LD_PRELOAD"] = " ".join([lib, *preload])


def nvjitlink_version() -> str:
    try:
        from cuda.bindings import nvjitlink
        return ".".join(map(str, nvjitlink.version()))
    except Exception as e:  # no nvJitLink here: the SASS tests skip or fail on their own
        return f"unavailable ({type(e).__name__})"


def pytest_report_header(config):
    return f"nvJitLink {nvjitlink_version()}" + (f" (--nvjitlink {config.getoption('nvjitlink')})"
                                                 if config.getoption("nvjitlink") else "")


def pytest_configure(config):
    if config.getoption("nvjitlink", None):
        _preload_nvjitlink(config.getoption("nvjitlink"))
    if "PYTEST_XDIST_WORKER" in os.environ:
        return
    import tempfile
    # the SpillRefill marks of nvdisasm's dataflow analysis are read by no test; without it disassembly is ~25% faster
    if "KERNELC_NVDISASM_DATAFLOW" not in os.environ:
        _RUN_ENV["KERNELC_NVDISASM_DATAFLOW"] = os.environ["KERNELC_NVDISASM_DATAFLOW"] = "0"
    for var, prefix in (("KERNELC_SASS_CACHE_DIR", "kernelc-test-sass-"), ("KERNELC_CUBIN_CACHE_DIR", "kernelc-test-cubin-")):
        if not os.environ.get(var):
            _RUN_ENV[var] = os.environ[var] = tempfile.mkdtemp(prefix=prefix)


def pytest_unconfigure(config):
    import shutil
    for var, path in _RUN_ENV.items():
        if os.path.isabs(path):
            shutil.rmtree(path, ignore_errors=True)
        os.environ.pop(var, None)
    _RUN_ENV.clear()


@pytest.fixture(autouse=True)
def _isolated_cache(tmp_path_factory, monkeypatch):
    # Every test gets its own kernel cache so tests never see each other's compiled kernels.
    monkeypatch.setenv("KERNELC_CACHE_DIR", str(tmp_path_factory.mktemp("kcache")))
    yield


# The launcher's in-memory cache is keyed on the specialisation, not on compile knobs (reading them on every
# launch would cost the fast path), so a test that sets a compile knob would launch what an earlier test compiled
# under other knobs (H100, 2026-11-27: a split=False case ran the split kernel). A compile knob set through
# monkeypatch drops every in-memory launch cache, and so does the end of a test that set one.
_COMPILE_KNOBS = None


def _drop_launch_caches():
    import sys
    launcher = sys.modules.get("kernelc.runtime.launcher")
    if launcher is None:
        return
    for fn in list(launcher._with_state):
        launcher.get_state(fn)["cache"].clear()


@pytest.fixture(autouse=True)
def _compile_knobs_drop_launch_caches(monkeypatch, _isolated_cache):
    global _COMPILE_KNOBS
    if _COMPILE_KNOBS is None:
        from kernelc.options import KNOBS
        _COMPILE_KNOBS = frozenset(k.name for k in KNOBS if k.compile)
    set_env, del_env, touched = monkeypatch.setenv, monkeypatch.delenv, []

    def setenv(name, value, prepend=None):
        set_env(name, value, prepend)
        if name in _COMPILE_KNOBS:
            touched.append(name)
            _drop_launch_caches()

    def delenv(name, raising=True):
        del_env(name, raising)
        if name in _COMPILE_KNOBS:
            touched.append(name)
            _drop_launch_caches()

    monkeypatch.setenv, monkeypatch.delenv = setenv, delenv
    yield
    if touched:
        _drop_launch_caches()


# A kernel that faults leaves a CUDA context that fails every later call ("unspecified launch failure"), so
# under xdist one bad kernel turned the rest of its worker's tests into failures that named the wrong tests
# (H100, 2026-11-27: 607 failures from a handful of faults). After each GPU test the worker synchronises;
# if the context is broken it exits, and xdist reports the crash against this test and starts a new worker.
_STICKY = ("launch failure", "illegal address", "illegal instruction", "misaligned address", "hardware stack error",
           "unspecified", "an illegal memory access")


@pytest.fixture(autouse=True)
def _gpu_fault_isolation(request):
    yield
    if "gpu" not in request.keywords or not os.environ.get("PYTEST_XDIST_WORKER"):
        return
    import sys
    torch = sys.modules.get("torch")
    if torch is None or not torch.cuda.is_initialized():
        return
    try:
        torch.cuda.synchronize()
    except Exception as exc:  # noqa: BLE001 - any error here means the context is unusable
        if any(s in str(exc).lower() for s in _STICKY):
            sys.stderr.write(f"\n{request.node.nodeid}: the CUDA context is broken after this test ({exc}); "
                             "this worker exits so later tests get a fresh one\n")
            sys.stderr.flush()
            os._exit(70)
        raise


# CUPTI's PC sampling admits one client a device: two xdist workers sampling at once get CUPTI_ERROR_HARDWARE_BUSY
# (H200, 2026-11-28: three of test_pcs_gpu.py's tests failed that way under -n 8). Tests marked pcsampling_device
# take a lock file shared by every worker process for their whole run, subprocesses included.
@pytest.fixture(autouse=True)
def _one_pc_sampler_at_a_time(request):
    if request.node.get_closest_marker("pcsampling_device") is None:
        yield
        return
    import fcntl
    import tempfile
    with open(os.path.join(tempfile.gettempdir(), "kernelc-tests-pcsampling.lock"), "a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)
