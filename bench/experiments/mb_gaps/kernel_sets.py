"""The kernels without dots that issue 21's fill-policy work is checked on, at their benchmarks' sizes: the
memory-bound set (examples/kernels/memory_bound.py, bench_memory_bound's wrappers), bench_kernels' kernels
without dots (vector add, softmax, layer-norm forward) and Triton 3.6's tutorials 01, 02 and 05 (read from
``$TRITON_TUTORIALS``, default /work/main/.ext/tutorials; not part of this repository: only their ``@jit``
functions are taken).

A case is ``(file, kernel, signature, constexprs, num_warps, num_stages)``; integers and pointers are taken
divisible by 16 (floats not), as the runtime specialises them for the benchmarks' tensors.
"""
from __future__ import annotations

import importlib.util
import os
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))
TUTORIALS = os.environ.get("TRITON_TUTORIALS", "/work/main/.ext/tutorials")


def memory_bound_cases():
    sys.path.insert(0, os.path.join(ROOT, "bench", "experiments", "tutorial_gaps"))
    from memory_bound_sass import CASES
    src = os.path.join(ROOT, "examples", "kernels", "memory_bound.py")
    out = {}
    for k, (sig, cx, warps) in CASES.items():
        out[f"mb {k}"] = (src, k, sig, cx, warps, 3)
    return out


def bench_kernels_cases():
    ex = os.path.join(ROOT, "examples", "kernels")
    sm = "output_ptr=*fp32,input_ptr=*fp32,input_row_stride=i32,output_row_stride=i32,n_rows=i32,n_cols=i32"
    return {
        "bk vector_add 2^28": (os.path.join(ex, "vector_add.py"), "add_kernel",
                               "x_ptr=*fp32,y_ptr=*fp32,output_ptr=*fp32,n_elements=i32", "BLOCK_SIZE=1024", 4, 3),
        "bk softmax 4096x4096": (os.path.join(ex, "softmax.py"), "softmax_kernel", sm, "BLOCK_SIZE=4096,num_stages=2",
                                 16, 2),
        "bk softmax 8192x1024": (os.path.join(ex, "softmax.py"), "softmax_kernel", sm, "BLOCK_SIZE=1024,num_stages=2",
                                 4, 2),
        "bk layernorm fwd 4096x8192": (os.path.join(ex, "layernorm.py"), "layer_norm_fwd_kernel",
                                       "X=*fp16,Y=*fp16,W=*fp16,B=*fp16,Mean=*fp32,Rstd=*fp32,stride=i32,N=i32,eps=fp32",
                                       "BLOCK_SIZE=8192", 8, 3),
    }


def tutorial_cases():
    t = TUTORIALS
    out = {"t01 add_kernel": (os.path.join(t, "01-vector-add.py"), "add_kernel",
                              "x_ptr=*fp32,y_ptr=*fp32,output_ptr=*fp32,n_elements=i32", "BLOCK_SIZE=1024", 4, 3)}
    sm = "output_ptr=*fp32,input_ptr=*fp32,input_row_stride=i32,output_row_stride=i32,n_rows=i32,n_cols=i32"
    for b in (256, 512, 1024, 2048, 4096, 8192, 16384):   # N = 256 .. 12672 (M = 4096); 4 stages on an H100
        out[f"t02 softmax BLOCK {b}"] = (os.path.join(t, "02-fused-softmax.py"), "softmax_kernel", sm,
                                         f"BLOCK_SIZE={b},num_stages=4", 8, 4)
    for b in (1024, 2048, 4096, 8192, 16384):              # N = 1024 .. 15872 fp16
        w = min(max(b // 256, 1), 8)
        g = 256 if b <= 1024 else 128 if b <= 4096 else 96 if b <= 8192 else 64
        out[f"t05 fwd BLOCK {b}"] = (os.path.join(t, "05-layer-norm.py"), "_layer_norm_fwd_fused",
                                     "X=*fp16,Y=*fp16,W=*fp16,B=*fp16,Mean=*fp32,Rstd=*fp32,stride=i32,N=i32,eps=fp32",
                                     f"BLOCK_SIZE={b}", w, 3)
        out[f"t05 bwd_dx BLOCK {b}"] = (os.path.join(t, "05-layer-norm.py"), "_layer_norm_bwd_dx_fused",
                                        "DX=*fp16,DY=*fp16,DW=*fp16,DB=*fp16,X=*fp16,W=*fp16,Mean=*fp32,Rstd=*fp32,"
                                        "Lock=*i32,stride=i32,N=i32", f"GROUP_SIZE_M={g},BLOCK_SIZE_N={b}", w, 3)
    out["t05 bwd_dwdb"] = (os.path.join(t, "05-layer-norm.py"), "_layer_norm_bwd_dwdb",
                           "DW=*fp16,DB=*fp16,FINAL_DW=*fp16,FINAL_DB=*fp16,M=i32,N=i32",
                           "BLOCK_SIZE_M=32,BLOCK_SIZE_N=128", 4, 3)
    return out


def all_cases():
    out = {**memory_bound_cases(), **bench_kernels_cases()}
    if os.path.isdir(TUTORIALS):
        out.update(tutorial_cases())
    return out


def _kv(text):
    out = {}
    for part in filter(None, text.split(",")):
        k, v = part.split("=", 1)
        out[k.strip()] = v.strip()
    return out


def _value(v):
    for conv in (int, float):
        try:
            return conv(v)
        except ValueError:
            pass
    return v


_modules = {}


def load_kernel(path, kernel):
    """The ``@jit`` function ``kernel`` of ``path`` compiled by kernelc (a Triton file runs under the ``triton``
    alias: only its imports and jit functions are taken)."""
    if path not in _modules:
        sys.path.insert(0, os.path.join(ROOT, "bench", "experiments", "tutorial_gaps"))
        from cpu_compare import kernel_module
        from kernelc.compat import install
        install()
        # the file stays: the frontend reads the kernel's source from it
        fd, mod_path = tempfile.mkstemp(suffix=".py", prefix="mb_gaps_")
        with os.fdopen(fd, "w") as f:
            f.write(kernel_module(path))
        spec = importlib.util.spec_from_file_location(f"mb_gaps_{len(_modules)}", mod_path)
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        _modules[path] = mod
    return getattr(_modules[path], kernel)


def compile_case(case):
    """kernelc's CompiledKernel for ``case`` (this process's options)."""
    import kernelc
    path, kernel, sig_text, cx_text, warps, stages = case
    sig = _kv(sig_text)
    cx = {k: _value(v) for k, v in _kv(cx_text).items()}
    div = {n: 16 for n, t in sig.items() if t.startswith("*") or t in ("i32", "i64")}
    return kernelc.compile(load_kernel(path, kernel), sig, cx, target="sm_90a", num_warps=warps, num_stages=stages,
                           divisibility=div)
