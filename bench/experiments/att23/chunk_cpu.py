"""ds's key-chunk kernels compiled on CPU for sm_90a at D=128 (the dK/dV kernel with KEY0 / DS_ROWS, the chunk GEMM)
beside ds's own: registers, spills, shared memory. Writes results/chunk_kernels_cpu.json.

    PYTHONPATH=. python3 bench/experiments/att23/chunk_cpu.py
"""
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(HERE))))

from tests.compiler.test_attention_kernels import B, P, _compile, compile_dkdv_ds  # noqa: E402


def main():
    rows = []
    dkdv_sig = dict(Q=P("fp16"), K=P("fp16"), V=P("fp16"), DO=P("fp16"), DK=P("fp16"), DV=P("fp16"), DQ=P("fp16"),
                    LSE=P("fp32"), Delta=P("fp32"), sm_scale="fp32", stride_z="i32", stride_h="i32", stride_m="i32",
                    stride_k="i32", dq_stride_z="i32", dq_stride_h="i32", dq_stride_m="i32", H="i32", N_CTX="i32")
    gemm_sig = dict(DST=P("fp16"), K=P("fp16"), DQ=P("fp16"), sm_scale="fp32", stride_z="i32", stride_h="i32",
                    stride_m="i32", stride_k="i32", H="i32", N_CTX="i32")
    for causal in (False, True):
        ws = int(B.DS_WS.get((128, causal), 0))
        cx = dict(HEAD_DIM=128, CAUSAL=causal, ATOMIC_DQ=False, STORE_DS=True, EVEN_M=True, WS=ws)
        kernels = [
            ("dkdv ds", _compile(B.attn_bwd_dkdv_kernel, dkdv_sig, cx, B._cfg(B.DS_DKDV_CONFIGS, 128, None),
                                 ("stride_k",))),
            ("dkdv ds, key chunk", _compile(B.attn_bwd_dkdv_kernel, dict(dkdv_sig, KEY0="i32", DS_ROWS="i32"), cx,
                                            B._cfg(B.DS_DKDV_CONFIGS, 128, None), ("stride_k",))),
            ("dq gemm", _compile(B.attn_bwd_dq_from_ds_kernel, gemm_sig, dict(HEAD_DIM=128, CAUSAL=causal),
                                 B._cfg(B.DQ_FROM_DS_CONFIGS, 128, None), ("stride_k",))),
            ("dq gemm, key chunk", _compile(B.attn_bwd_dq_from_ds_chunk_kernel,
                                            dict(gemm_sig, DQA=P("fp32"), KEY0="i32", KEYS="i32"),
                                            dict(HEAD_DIM=128, CAUSAL=causal),
                                            B._cfg(B.DQ_FROM_DS_CONFIGS, 128, None), ("stride_k",))),
        ]
        for name, ck in kernels:
            rows.append(dict(kernel=name, causal=causal, regs=ck.n_regs, spills=ck.n_spills, shared=ck.shared,
                             dots=sorted({d["engine"] for d in ck.reports["dots"]})))
            print(rows[-1], flush=True)
    os.makedirs(os.path.join(HERE, "results"), exist_ok=True)
    json.dump(dict(target="sm_90a", head_dim=128, rows=rows), open(os.path.join(HERE, "results",
                                                                               "chunk_kernels_cpu.json"), "w"),
              indent=1)


if __name__ == "__main__":
    main()
