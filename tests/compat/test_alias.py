"""`import triton` resolved to kernelc: module identity, version, errors that name the user's line."""
import subprocess
import sys
import textwrap

import pytest

import kernelc
from kernelc.compat import MissingTritonAPI, TRITON_VERSION

from .conftest import subprocess_env


def test_modules_are_kernelcs_and_version_is_tritons(alias):
    import triton
    import triton.language as tl
    import triton.testing
    from triton.runtime import driver
    import kernelc.language
    import kernelc.runtime.driver
    assert tl is kernelc.language
    assert triton.testing is kernelc.testing
    assert driver is kernelc.runtime.driver
    assert triton.jit is kernelc.jit and triton.autotune is kernelc.autotune and triton.cdiv is kernelc.cdiv
    assert triton.__version__ == TRITON_VERSION == "3.6.0"
    assert kernelc.__version__ != triton.__version__
    # the kernelc module keeps its own import identity
    assert tl.__spec__.name == "kernelc.language"
    assert triton.runtime.driver.active.get_current_target().backend == "cuda"  # attribute after `import triton`


def test_missing_name_names_the_api_and_the_callers_line(alias):
    import triton.language as tl
    with pytest.raises(MissingTritonAPI) as e:
        tl.no_such_op_in_triton  # noqa: B018
    line = sys._getframe().f_lineno - 1
    msg = str(e.value)
    assert "triton.language.no_such_op_in_triton" in msg
    assert f"{__file__}:{line}" in msg
    assert isinstance(e.value, AttributeError)  # hasattr / getattr(default) probes keep working
    assert not hasattr(tl, "no_such_op_in_triton") and getattr(tl, "no_such_op_in_triton", 7) == 7
    import triton
    with pytest.raises(MissingTritonAPI, match=r"triton\.no_such_root_name .*test_alias\.py:\d+"):
        triton.no_such_root_name  # noqa: B018


def test_missing_module_raises_module_not_found_naming_it(alias):
    with pytest.raises(ModuleNotFoundError, match=r"kernelc has no triton\.no_such_module .*test_alias\.py:\d+"):
        import triton.no_such_module  # noqa: F401


def test_uninstall_removes_every_triton_module(alias):
    import triton.language  # noqa: F401
    import kernelc.language as kl
    alias.uninstall()
    assert not any(n == "triton" or n.startswith("triton.") for n in sys.modules)
    assert "__getattr__" not in kl.__dict__  # kernelc's modules are as before
    alias.install()


def test_refuses_when_a_real_triton_is_imported():
    import types
    import kernelc.compat as compat
    fake = types.ModuleType("triton")
    fake.__file__ = "/elsewhere/triton/__init__.py"
    sys.modules["triton"] = fake
    try:
        with pytest.raises(RuntimeError, match="real Triton is already imported"):
            compat.install()
    finally:
        del sys.modules["triton"]
    assert not compat.installed()


def test_torch_and_its_triton_checks_import_under_the_alias():
    # a fresh process: torch caches has_triton_package() on first use
    code = textwrap.dedent("""
        import sys, types
        import kernelc.language as kl
        if not hasattr(kl, "extra"):
            # tl.extra.libdevice is the language side's (issue 20, branch h20lang); until it is merged, an
            # empty stand-in lets torch's inductor import reach the host-side names this test is about
            ex = types.ModuleType("kernelc.language.extra"); ex.__path__ = []
            ex.libdevice = types.ModuleType("kernelc.language.extra.libdevice")
            sys.modules["kernelc.language.extra"] = ex; sys.modules["kernelc.language.extra.libdevice"] = ex.libdevice
            kl.extra = ex
        import kernelc.compat; kernelc.compat.install()
        import torch
        import torch._inductor.runtime.triton_compat as tc  # what torch.compile imports from triton
        assert tc.HAS_TRITON and tc.CompiledKernel is not None and tc.GPUTarget("cuda", 90, 32).arch == 90
        assert isinstance(tc.triton_key(), str) and tc.builtins_use_semantic_kwarg is False
        import torch._inductor.runtime.hints
        from torch.utils._triton import has_triton_package, get_triton_version, has_triton
        import triton.backends, triton.backends.compiler, triton.compiler.compiler
        assert has_triton_package() and get_triton_version() == (3, 6)
        has_triton()  # must not raise
        assert "nvidia" in triton.backends.backends
        print("OK", triton.backends.compiler.GPUTarget("cuda", 90, 32))
    """)
    r = subprocess.run([sys.executable, "-c", code], env=subprocess_env(), capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    assert "OK GPUTarget(backend='cuda', arch=90, warp_size=32)" in r.stdout


def test_kernelc_run_runs_a_script_and_reports_missing_api_at_its_line(tmp_path):
    script = tmp_path / "prog.py"
    script.write_text(textwrap.dedent("""
        import sys
        import triton
        import triton.language as tl
        print("argv", sys.argv[1:], triton.__version__, __name__)
        tl.not_in_kernelc(1)
    """))
    r = subprocess.run([sys.executable, "-m", "kernelc.run", str(script), "a", "--b"], env=subprocess_env(),
                       capture_output=True, text=True, timeout=120)
    assert "argv ['a', '--b'] 3.6.0 __main__" in r.stdout
    assert r.returncode != 0
    assert f"triton.language.not_in_kernelc is not supported by kernelc (used at {script}:6)" in r.stderr


def test_run_path_for_notebooks(tmp_path, alias):
    from kernelc.run import run_path
    script = tmp_path / "nb.py"
    script.write_text("import triton\nresult = (triton.__version__, triton.next_power_of_2(5))\n")
    g = run_path(str(script))
    assert g["result"] == ("3.6.0", 8)


def test_cublas_baseline_of_the_tutorials(alias):
    import torch
    from triton._C.libtriton import nvidia
    a, b = torch.randn(8, 4), torch.randn(5, 4)
    c = torch.empty(8, 5)
    nvidia.cublas.CublasLt(torch.empty(16)).matmul(a, b, c)  # c = a @ b.T, b given as [N, K]
    assert torch.allclose(c, a @ b.T)
    with pytest.raises(ValueError, match=r"a \[M, K\] and b \[N, K\]"):
        nvidia.cublas.CublasLt(None).matmul(a, b.T, c)


def test_submodules_reached_as_attributes_name_the_missing_api(alias):
    import triton.language as tl
    with pytest.raises(MissingTritonAPI, match=r"triton\.language\.math\.no_such_fn .*test_alias\.py:\d+"):
        tl.math.no_such_fn  # noqa: B018
