"""Synthetic PC-sampling test data, shaped exactly like CUPTI's, for kernels compiled on the CPU.

The real test data (``tests/pcsampling/data/*.json``, written on the GPU by ``record_fixture.py``)
has the same layout; until it exists, and alongside it, the CPU tests use this: the kernelc matmul
and softmax compiled for sm_90a, records with function-relative pc offsets (multiples of 16) drawn
per SASS instruction with stall reasons that fit the opcode, stall reasons by CUPTI index with a
scrambled 40-entry names table (both families, the ``_not_issued`` one filled too, so a reader that
counts both is caught), two launches of the matmul, a cuBLAS-like kernel without code, and a pc
past the end of the matmul (no line).

``expected`` is computed from nvdisasm's per-instruction lines (``Instr.file``/``Instr.line``), not
from the source map that attribution uses, so the tests cross-check the two.
"""

from __future__ import annotations

import base64
import os
import zlib

import numpy as np

from fake_cupti import REASONS, sm90_like_table
from profiler.pcsampling.attribution import SampleTable, kernel_source
from profiler.pcsampling.fixture import dump

MATMUL_CONSTEXPRS = dict(BLOCK_SIZE_M=128, BLOCK_SIZE_N=128, BLOCK_SIZE_K=64, GROUP_SIZE_M=8, ACTIVATION="")
MATMUL_SIG = {"a_ptr": "*fp16", "b_ptr": "*fp16", "c_ptr": "*fp16", "M": "i32", "N": "i32", "K": "i32",
              "stride_am": "i32", "stride_ak": "i32", "stride_bk": "i32", "stride_bn": "i32", "stride_cm": "i32",
              "stride_cn": "i32"}
SOFTMAX_SIG = {"output_ptr": "*fp32", "input_ptr": "*fp32", "input_row_stride": "i32", "output_row_stride": "i32",
               "n_rows": "i32", "n_cols": "i32"}
CUBLAS_NAME = "sm90_xmma_gemm_f16f16_f16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1_execute_segment_k_off_kernel__5x_cublas"


def compile_kernels():
    """``{name: (CompiledKernel, JITFunction)}`` for the matmul and the softmax (sm_90a, CPU)."""
    import kernelc
    from examples.kernels.matmul import matmul_kernel
    from examples.kernels.softmax import softmax_kernel
    mm = kernelc.compile(matmul_kernel, MATMUL_SIG, MATMUL_CONSTEXPRS, target="sm_90a", num_warps=8, num_stages=3,
                         equal_to_1=("stride_ak", "stride_bn", "stride_cn"))
    sm = kernelc.compile(softmax_kernel, SOFTMAX_SIG, dict(BLOCK_SIZE=4096, num_stages=2), target="sm_90a",
                         num_warps=16)
    return {mm.name: (mm, matmul_kernel), sm.name: (sm, softmax_kernel)}


def _weights(op: str) -> dict[str, float]:
    if op.startswith(("LDGSTS", "LDG")):
        return {"long_scoreboard": 8, "lg_throttle": 2, "selected": 1}
    if "GMMA" in op or "HMMA" in op:
        return {"math_pipe_throttle": 6, "gmma": 3, "selected": 2, "wait": 1}
    if op.startswith(("LDS", "LDSM")):
        return {"short_scoreboard": 4, "mio_throttle": 2, "selected": 1}
    if op.startswith(("BAR", "SYNCS")):
        return {"barrier": 6, "selected": 0.5}
    if op.startswith(("STG", "STS", "RED", "ATOM")):
        return {"lg_throttle": 3, "selected": 1}
    if op.startswith(("MUFU", "SHFL")):
        return {"short_scoreboard": 3, "selected": 1}
    return {"wait": 1, "selected": 1, "not_selected": 0.5}


def _records(instrs, function, crc, corr, rng, scale, index_of):
    out, truth = [], {}
    for ins in instrs:
        if rng.random_sample() < 0.15:
            continue  # not every instruction is sampled
        stalls = []
        for reason, w in _weights(ins.opcode).items():
            n = int(rng.poisson(w * scale))
            if n:
                stalls.append([index_of[reason], n])
                if reason != "selected":  # the _not_issued family: a subset, must not be counted
                    stalls.append([index_of[reason + "_not_issued"], n // 2])
        stalls = [s for s in stalls if s[1]]
        if not stalls:
            continue
        out.append({"function": function, "pc": ins.pc, "correlation_id": corr, "cubin_crc": crc,
                    "function_index": 0, "stalls": stalls})
        if ins.line:
            key = (os.path.basename(ins.file), ins.line)
            truth[key] = truth.get(key, 0) + sum(n for i, n in stalls if i in index_of["_counted"])
    return out, truth


def build(seed: int = 0) -> tuple[dict, dict]:
    """The synthetic test-data object and ``{name: (CompiledKernel, JITFunction)}``."""
    rng = np.random.RandomState(seed)
    table = sm90_like_table()
    index_of: dict = {}
    for idx, name in table:
        short = name.split("_stalled_", 1)[1]
        index_of[short] = idx
    index_of["_counted"] = {idx for idx, name in table if not name.endswith("_not_issued")}
    kernels = compile_kernels()
    records, kernel_entries, expected = [], [], {}
    corr = 11
    for name, (ck, jit) in kernels.items():
        instrs = [i for i in ck.artifacts.instructions if i.function == name]
        crc = zlib.crc32(ck.asm["cubin"])
        truth: dict = {}
        for _launch in range(2 if name == "matmul_kernel" else 1):
            recs, t = _records(instrs, name, crc, corr, rng, 3.0, index_of)
            records += recs
            for k, v in t.items():
                truth[k] = truth.get(k, 0) + v
            corr += 1
        kernel_entries.append({"name": name, "cubin_crc": crc, "cache_key": None,
                               "cubin_b64": base64.b64encode(ck.asm["cubin"]).decode(),
                               "source": kernel_source(jit)})
        top = sorted(((f, ln, n) for (f, ln), n in truth.items()), key=lambda t: (-t[2], t[0], t[1]))
        expected[name] = {"top_lines": [list(t) for t in top[:10]]}
    # A pc past the end of the matmul: no instruction, no line.
    mm_instrs = [i for i in kernels["matmul_kernel"][0].artifacts.instructions if i.function == "matmul_kernel"]
    records.append({"function": "matmul_kernel", "pc": (mm_instrs[-1].pc + 16 * 64), "correlation_id": 11,
                    "cubin_crc": zlib.crc32(kernels["matmul_kernel"][0].asm["cubin"]), "function_index": 0,
                    "stalls": [[index_of["wait"], 5], [index_of["selected"], 2]]})
    expected["matmul_kernel"]["unattributed"] = 7
    # A library kernel without code: per-kernel totals only.
    for k in range(40):
        records.append({"function": CUBLAS_NAME, "pc": 16 * k, "correlation_id": corr, "cubin_crc": 0xDEAD,
                        "function_index": 3, "stalls": [[index_of["math_pipe_throttle"], 4], [index_of["selected"], 1],
                                                        [index_of["math_pipe_throttle_not_issued"], 2]]})
    stall_names = dict(table)
    t = SampleTable.from_records(records, stall_names)
    obj = dump(t, kernel_entries, info={"period": 10, "device": "synthetic (CPU)"},
               description="synthetic: kernelc matmul + softmax compiled for sm_90a on the CPU", synthetic=True,
               expected=expected)
    assert REASONS  # the fake's reason list is the one used here
    return obj, kernels
