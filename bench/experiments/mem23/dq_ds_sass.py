"""attention_bwd's ds dQ GEMM (attn_bwd_dq_from_ds_kernel, D=128, DQ_FROM_DS_CONFIGS: 128x64 w8 s3) and matmul_tma
(fp16 128x128x64 w4 s3, no warp specialisation) compiled for sm_90a under each KERNELC_TMA_ELECT form: registers and
the opcodes of the k-loop (the first loop that issues HGMMAs). Written after session 23's final call, to see whether
the auto rule (thread 0 for one-dot TMA loops) gives the ds dQ GEMM what it gave matmul_tma (CPU; nothing timed).

    PYTHONPATH=. python3 bench/experiments/mem23/dq_ds_sass.py [--out results/dq_ds_sass_elect.json]
"""
import collections
import json
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
sys.path.insert(0, ROOT)


def one(form, which):
    os.environ["KERNELC_TMA_ELECT"] = form
    os.environ["KERNELC_WARP_SPECIALIZE"] = "0"
    import kernelc
    from tests.compiler.test_attention_kernels import P, _compile, _first_loop
    if which == "dq_from_ds":
        from examples.kernels import attention_bwd as B
        sig = dict(DST=P("fp16"), K=P("fp16"), DQ=P("fp16"), sm_scale="fp32", stride_z="i32", stride_h="i32",
                   stride_m="i32", stride_k="i32", H="i32", N_CTX="i32")
        ck = _compile(B.attn_bwd_dq_from_ds_kernel, sig, dict(HEAD_DIM=128, CAUSAL=False),
                      B._cfg(B.DQ_FROM_DS_CONFIGS, 128, None), ("stride_k",))
    else:
        from examples.kernels import matmul_tma as M
        sig = {"a_desc": "tensordesc<fp16[128, 64]>", "b_desc": "tensordesc<fp16[64, 128]>",
               "c_desc": "tensordesc<fp16[128, 128]>", "M": "i32", "N": "i32", "K": "i32"}
        ck = kernelc.compile(M.matmul_tma_kernel, sig, dict(BLOCK_SIZE_M=128, BLOCK_SIZE_N=128, BLOCK_SIZE_K=64,
                                                            GROUP_SIZE_M=8), target="sm_90a", num_warps=4,
                             num_stages=3, divisibility={"a_desc": 16, "b_desc": 16, "c_desc": 16})
    body = _first_loop(ck.asm["sass"])
    c = collections.Counter(o.split()[0].split(".")[0] for o in body)
    return {"registers": ck.n_regs, "loop_instructions": len(body),
            **{k: c[k] for k in ("R2UR", "ELECT", "UTMALDG", "HGMMA")}}


def main(argv=None):
    if len(sys.argv) > 2 and sys.argv[1] == "--one":   # one form a process: the knob is read once
        print(json.dumps(one(sys.argv[2], sys.argv[3])))
        return 0
    out = {}
    for which in ("dq_from_ds", "matmul_tma"):
        for form in ("elect", "tid", "auto"):
            env = dict(os.environ, KERNELC_CACHE_DIR=f"/tmp/kc_dqds_{form}", PYTHONPATH=ROOT)
            r = subprocess.run([sys.executable, __file__, "--one", form, which], env=env, capture_output=True,
                               text=True, check=True)
            out.setdefault(which, {})[form] = json.loads(r.stdout.strip().splitlines()[-1])
            print(which, form, out[which][form])
    if "--out" in sys.argv:
        with open(sys.argv[sys.argv.index("--out") + 1], "w") as f:
            json.dump(out, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
