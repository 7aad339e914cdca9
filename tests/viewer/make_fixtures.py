"""Build the viewer's fixture profiles (and, with --goldens, the expected outputs).

    python tests/viewer/make_fixtures.py            # kprof fixtures + bad files (+ Proton stand-in if absent)
    python tests/viewer/make_fixtures.py --goldens  # also rewrite tests/viewer/data/expected/*.txt

The kprof fixtures are built with :mod:`profiler.format`, the way the profiler builds its trees.
Numbers are realistic for an H100 SXM (sm_90, 132 SMs): e.g. the attention matmul runs 10 times
4096^3 fp16 at ~600 TFLOP/s.  ``proton_small.hatchet`` is written by hand here only as a stand-in
(``--proton-stand-in`` forces it): the real one comes from ``bench/make_proton_fixture.py`` on a
GPU, and this script never overwrites it otherwise.
"""

from __future__ import annotations

import argparse
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
DATA = os.path.join(HERE, "data")
sys.path.insert(0, os.path.dirname(os.path.dirname(HERE)))  # the repository root

from profiler.format import ProfileNode, device_entry, write_profile  # noqa: E402

H100 = {"CUDA": {"0": device_entry("90", 132, 1980000, 2619000, 5120)}}
CUBLAS = "sm90_xmma_gemm_f16f16_f16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1_execute_segment_k_off_kernel__5x_cublas"
KERNEL_FILE = "/work/examples/kernels/matmul.py"

MATMUL_SOURCE = [
    "@kernelc.jit",
    "def matmul_kernel(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_ak, stride_bk, stride_bn,",
    "                  stride_cm, stride_cn, BLOCK_M: kl.constexpr, BLOCK_N: kl.constexpr,",
    "                  BLOCK_K: kl.constexpr):",
    "    pid = kl.program_id(0)",
    "    num_pid_n = kl.cdiv(N, BLOCK_N)",
    "    pid_m = pid // num_pid_n",
    "    pid_n = pid % num_pid_n",
    "    offs_m = pid_m * BLOCK_M + kl.arange(0, BLOCK_M)",
    "    offs_n = pid_n * BLOCK_N + kl.arange(0, BLOCK_N)",
    "    offs_k = kl.arange(0, BLOCK_K)",
    "    a_ptrs = a_ptr + offs_m[:, None] * stride_am + offs_k[None, :] * stride_ak",
    "    b_ptrs = b_ptr + offs_k[:, None] * stride_bk + offs_n[None, :] * stride_bn",
    "    acc = kl.zeros((BLOCK_M, BLOCK_N), dtype=kl.float32)",
    "    for k in range(0, kl.cdiv(K, BLOCK_K)):",
    "        a = kl.load(a_ptrs, mask=offs_k[None, :] < K - k * BLOCK_K, other=0.0)",
    "        b = kl.load(b_ptrs, mask=offs_k[:, None] < K - k * BLOCK_K, other=0.0)",
    "        acc += kl.dot(a, b)",
    "        a_ptrs += BLOCK_K * stride_ak",
    "        b_ptrs += BLOCK_K * stride_bk",
    "    c = acc.to(kl.float16)",
    "    c_ptrs = c_ptr + offs_m[:, None] * stride_cm + offs_n[None, :] * stride_cn",
    "    mask = (offs_m[:, None] < M) & (offs_n[None, :] < N)",
    "    kl.store(c_ptrs, c, mask=mask)",
]
MATMUL_FIRST_LINE = 10  # "@kernelc.jit" is line 10 of matmul.py; the dot is line 27

# Sampled lines of the attention matmul: line -> (num_samples, {stall reason: samples}).
# "selected" samples are issuing warps, so num_stalled_samples = num_samples - selected.
MATMUL_SAMPLES = {
    14: (3, {"wait": 2, "selected": 1}),
    18: (5, {"short_scoreboard": 3, "selected": 2}),
    25: (310, {"long_scoreboard": 180, "mio_throttle": 40, "wait": 40, "selected": 30, "barrier": 20}),
    26: (290, {"long_scoreboard": 150, "mio_throttle": 50, "wait": 45, "selected": 25, "barrier": 20}),
    27: (820, {"math_pipe_throttle": 300, "selected": 200, "wait": 150, "long_scoreboard": 100, "barrier": 70}),
    28: (25, {"wait": 15, "selected": 10}),
    29: (20, {"wait": 12, "selected": 8}),
    33: (95, {"lg_throttle": 60, "long_scoreboard": 20, "selected": 15}),
}
# Code inlined from another file (kernelc's library): shows up outside the stored source.
CORE_SAMPLES = {("core.py", 512): (12, {"short_scoreboard": 8, "selected": 4})}

MATMUL_INSTRUCTIONS = [
    {"pc": 0x0a0, "opcode": "IMAD.WIDE", "line": 18, "samples": 5, "stalls": {"short_scoreboard": 3, "selected": 2}},
    {"pc": 0x3c0, "opcode": "LDGSTS.E.BYPASS.LTC128B.128", "line": 25, "samples": 260,
     "stalls": {"long_scoreboard": 160, "mio_throttle": 40, "wait": 30, "selected": 20, "barrier": 10}},
    {"pc": 0x3d0, "opcode": "LDGSTS.E.BYPASS.LTC128B.128", "line": 26, "samples": 240,
     "stalls": {"long_scoreboard": 130, "mio_throttle": 50, "wait": 35, "selected": 15, "barrier": 10}},
    {"pc": 0x5a0, "opcode": "LDSM.16.M88.4", "line": 27, "samples": 220,
     "stalls": {"long_scoreboard": 100, "wait": 60, "selected": 40, "barrier": 20}},
    {"pc": 0x5c0, "opcode": "HMMA.16816.F32", "line": 27, "samples": 560,
     "stalls": {"math_pipe_throttle": 300, "selected": 160, "wait": 90, "barrier": 10}},
    {"pc": 0x8f0, "opcode": "STG.E.128", "line": 33, "samples": 95, "stalls": {"lg_throttle": 60, "long_scoreboard": 20, "selected": 15}},
]


def kernel_frame(parent: ProfileNode, kernel: str, grid: str, warps: int, stages: int, smem_kib: int, *,
                 time_ns: int, count: int, cache_key: str, **metrics) -> ProfileNode:
    """A kernelc kernel frame as kprof names it, with its launch metrics and kprof extras."""
    name = f"{kernel} [grid {grid}, warps {warps}, stages {stages}, smem {smem_kib}KiB]"
    node = parent.child(name)
    node.add_metrics({"time (ns)": time_ns, "count": count, "device_id": "0", "device_type": "CUDA", **metrics})
    node.extra = {"kind": "kernel", "kernel": kernel, "cache_key": cache_key}
    return node


def torch_frame(parent: ProfileNode, name: str, *, time_ns: int, count: int) -> ProfileNode:
    node = parent.child(name)
    node.add_metrics({"time (ns)": time_ns, "count": count, "device_id": "0", "device_type": "CUDA"})
    return node


def add_line_samples(kernel: ProfileNode, file_base: str, samples: dict) -> None:
    for line, (n, stalls) in sorted(samples.items()):
        base, line_no = (line if isinstance(line, tuple) else (file_base, line))
        child = kernel.child(f"{base}:{line_no}", "line")
        metrics = {"num_samples": n, "num_stalled_samples": n - stalls.get("selected", 0)}
        metrics.update({f"stalled_{r}": v for r, v in stalls.items()})
        child.add_metrics(metrics)


def build_small() -> ProfileNode:
    """ROOT > train_step > {attn, mlp, optimizer} > kernels; the attention matmul is sampled."""
    root = ProfileNode("ROOT")
    step = root.child("train_step")
    attn = step.child("attn")
    mm = kernel_frame(attn, "matmul_kernel", "1024x1x1", 8, 3, 96, time_ns=2_290_000, count=10,
                      cache_key="3f2a9c4e1b7d", flops16=1_374_389_534_720, bytes=1_006_632_960)
    mm.extra["source"] = {"file": KERNEL_FILE, "first_line": MATMUL_FIRST_LINE, "lines": MATMUL_SOURCE}
    mm.extra["instructions"] = MATMUL_INSTRUCTIONS
    add_line_samples(mm, "matmul.py", MATMUL_SAMPLES)
    add_line_samples(mm, "core.py", CORE_SAMPLES)
    sm = kernel_frame(attn, "softmax_kernel", "4096x1x1", 4, 1, 0, time_ns=248_000, count=10,
                      cache_key="9b1c02d7e5aa", bytes=671_088_640)
    sm.extra["source"] = {"file": "/work/examples/kernels/softmax.py", "first_line": 5,
                          "lines": ["@kernelc.jit", "def softmax_kernel(x_ptr, y_ptr, n_cols, BLOCK: kl.constexpr):",
                                    "    row = kl.program_id(0)", "    offs = kl.arange(0, BLOCK)",
                                    "    x = kl.load(x_ptr + row * n_cols + offs, mask=offs < n_cols, other=-float('inf'))",
                                    "    y = kl.exp(x - kl.max(x, axis=0))",
                                    "    kl.store(y_ptr + row * n_cols + offs, y / kl.sum(y, axis=0), mask=offs < n_cols)"]}
    torch_frame(attn, CUBLAS, time_ns=1_950_000, count=10)
    mlp = step.child("mlp")
    kernel_frame(mlp, "matmul_kernel", "2048x1x1", 8, 4, 128, time_ns=8_590_000, count=10,
                 cache_key="77e0aa31c9f2", flops16=5_497_558_138_880, bytes=3_019_898_880)
    kernel_frame(mlp, "gelu_kernel", "1024x1x1", 4, 1, 0, time_ns=926_000, count=10,
                 cache_key="c4d5e6f70812", bytes=2_684_354_560)
    opt = step.child("optimizer")
    kernel_frame(opt, "adam_kernel", "2048x1x1", 4, 1, 0, time_ns=10_200_000, count=10,
                 cache_key="0a1b2c3d4e5f", bytes=28_000_000_000, flops32=12_000_000_000)
    return root


def build_other() -> ProfileNode:
    """The "before" profile for diffs: another metric set (time, count, bytes; no flops), attention
    with a flash kernel instead of softmax, a slower attention matmul, no optimizer scope."""
    root = ProfileNode("ROOT")
    step = root.child("train_step")
    attn = step.child("attn")
    kernel_frame(attn, "matmul_kernel", "1024x1x1", 8, 3, 96, time_ns=2_600_000, count=10,
                 cache_key="3f2a9c4e1b7d", bytes=1_006_632_960)
    kernel_frame(attn, "flash_attn_kernel", "256x32x1", 8, 2, 160, time_ns=1_100_000, count=10,
                 cache_key="51fe77a0b3c9", bytes=805_306_368)
    torch_frame(attn, CUBLAS, time_ns=1_950_000, count=10)
    mlp = step.child("mlp")
    kernel_frame(mlp, "matmul_kernel", "2048x1x1", 8, 4, 128, time_ns=8_400_000, count=10,
                 cache_key="77e0aa31c9f2", bytes=3_019_898_880)
    kernel_frame(mlp, "gelu_kernel", "1024x1x1", 4, 1, 0, time_ns=1_180_000, count=10,
                 cache_key="c4d5e6f70812", bytes=2_684_354_560)
    return root


def build_python() -> ProfileNode:
    """A python-context profile: frames named "<file>:<line>@<function>" down to the kernels."""
    root = ProfileNode("ROOT")
    mod = root.child("/work/examples/train.py:88@<module>")
    step = mod.child("/work/examples/train.py:61@train_step")
    fwd = step.child("/work/examples/model.py:30@forward")
    kernel_frame(fwd, "matmul_kernel", "1024x1x1", 8, 3, 96, time_ns=2_290_000, count=10,
                 cache_key="3f2a9c4e1b7d", flops16=1_374_389_534_720, bytes=1_006_632_960)
    act = fwd.child("/work/examples/model.py:34@activation")
    kernel_frame(act, "gelu_kernel", "1024x1x1", 4, 1, 0, time_ns=926_000, count=10,
                 cache_key="c4d5e6f70812", bytes=2_684_354_560)
    bwd = step.child("/work/examples/train.py:64@backward")
    torch_frame(bwd, CUBLAS, time_ns=3_900_000, count=20)
    return root


# --- Proton stand-in ----------------------------------------------------------------------------
# Mirrors what Triton 3.6's proton writes for bench/make_proton_fixture.py's workload
# (proton.start(..., hook="triton"), shadow context): frames are {"name", "type": "function"},
# kernel frames carry "time (ns)", "count", "device_id" (string), "device_type", the launch hook
# renames a Triton kernel's frame to its launch_metadata "name" and adds flops<w>/bytes to it,
# the root holds 0 placeholders for the summable metrics, a metadata function that launches a
# kernel leaves a "__proton_launch_metadata" frame, and the file is nlohmann's dump(4) with
# sorted keys between two newlines.


def _pnode(name, metrics=None, children=()):
    return {"children": list(children), "frame": {"name": name, "type": "function"}, "metrics": metrics or {}}


def _kmetrics(time_ns, count, **extra):
    return {"count": count, "device_id": "0", "device_type": "CUDA", "time (ns)": time_ns, **extra}


def proton_stand_in() -> list:
    root = _pnode("ROOT", {"bytes": 0, "count": 0, "flops16": 0, "flops32": 0, "time (ns)": 0}, [
        _pnode("train_step", {}, [
            _pnode("torch_matmul", {}, [_pnode(CUBLAS, _kmetrics(61_344, 5))]),
            _pnode("triton_matmul", {}, [
                _pnode("matmul_512x512x512", _kmetrics(58_112, 5, bytes=7_864_320, flops16=1_342_177_280.0)),
            ]),
            _pnode("triton_add", {}, [
                _pnode("__proton_launch_metadata", {}, [
                    _pnode("void at::native::reduce_kernel<512, 1, at::native::ReduceOp<float, at::native::func_wrapper"
                           "<float>, unsigned int, float, 4, 4> >(at::native::ReduceOp<float, at::native::func_wrapper"
                           "<float>, unsigned int, float, 4, 4>)", _kmetrics(3_968, 1)),
                ]),
                _pnode("add_1048576", _kmetrics(42_304, 5, bytes=62_914_560, flops32=5_242_880.0)),
            ]),
        ]),
    ])
    return [root, {"CUDA": {"0": {"arch": "90", "bus_width": 5120, "clock_rate": 1980000,
                                  "memory_clock_rate": 2619000, "num_sms": 132}}}]


def write_bad_files() -> None:
    """Files for the error tests: truncated JSON, a Chrome trace (another format), empty."""
    with open(os.path.join(DATA, "kprof_small.hatchet")) as f:
        text = f.read()
    with open(os.path.join(DATA, "bad_truncated.hatchet"), "w") as f:
        f.write(text[: len(text) // 3])
    with open(os.path.join(DATA, "bad_trace.json"), "w") as f:
        json.dump({"traceEvents": [{"name": "matmul_kernel", "ph": "X", "ts": 0, "dur": 229, "pid": 0, "tid": 7}],
                   "displayTimeUnit": "ns"}, f, indent=1)
        f.write("\n")
    open(os.path.join(DATA, "bad_empty.hatchet"), "w").close()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--goldens", action="store_true", help="also rewrite data/expected/*.txt from the current viewer")
    ap.add_argument("--proton-stand-in", action="store_true",
                    help="(re)write the hand-made proton_small.hatchet even if one exists")
    args = ap.parse_args()
    os.makedirs(DATA, exist_ok=True)
    write_profile(os.path.join(DATA, "kprof_small.hatchet"), build_small(), H100)
    write_profile(os.path.join(DATA, "kprof_other.hatchet"), build_other(), H100)
    write_profile(os.path.join(DATA, "kprof_python.hatchet"), build_python(), H100)
    proton = os.path.join(DATA, "proton_small.hatchet")
    if args.proton_stand_in or not os.path.exists(proton):
        with open(proton, "w") as f:
            f.write("\n" + json.dumps(proton_stand_in(), indent=4, sort_keys=True) + "\n")
        print(f"wrote the Proton stand-in {proton}")
    write_bad_files()
    print(f"wrote fixtures in {DATA}")
    if args.goldens:
        sys.path.insert(0, HERE)
        import viewer_cases

        n = viewer_cases.write_goldens()
        print(f"wrote {n} expected outputs in {viewer_cases.EXPECTED}")


if __name__ == "__main__":
    main()
