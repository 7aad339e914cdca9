"""CPU (sm_90a): the fused backward kernel (``attn_bwd_fused_kernel``, D=64 non-causal: issue 27's 0.852 of cuDNN at
N 16384) at its default config and at FlashAttention-3-like shapes (128 keys a program over two warpgroups, 64 queries
a step): registers, spills, shared memory, programs an SM, and per MMA loop the HGMMA shapes, waits and SASS a trip.

    python3 bench/experiments/att20/fused_cpu.py [--json OUT]

Nothing here is a test.
"""
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))
sys.path[:0] = [ROOT, os.path.join(ROOT, "bench", "experiments", "tutorial_gaps")]

from bwd06_sass import blocks_per_sm, mma_loops  # noqa: E402

NOWS = {"KERNELC_WARP_SPECIALIZE": "none"}
# name, (BLOCK_M1, BLOCK_N1), (BLOCK_M2, BLOCK_N2), warps, stages, compile knobs
CONFIGS = [
    ("default (32, 64) / (64, 64) w4 s3", (32, 64), (64, 64), 4, 3, {}),
    ("(64, 128) / (128, 64) w8 s2", (64, 128), (128, 64), 8, 2, {}),
    ("(32, 128) / (128, 64) w8 s2", (32, 128), (128, 64), 8, 2, {}),
    ("(64, 128) / (128, 64) w8 s2, no producer warps", (64, 128), (128, 64), 8, 2, NOWS),
    ("(32, 128) / (128, 64) w8 s3, no producer warps", (32, 128), (128, 64), 8, 3, NOWS),
    ("(64, 64) / (64, 64) w4 s2", (64, 64), (64, 64), 4, 2, {}),
]


def compile_fused(c1, c2, w, s, D=64, causal=False, **cx):
    import kernelc
    from examples.kernels import attention_bwd as B
    P = lambda t: "*" + t  # noqa: E731
    sig = dict(Q=P("fp16"), K=P("fp16"), V=P("fp16"), DO=P("fp16"), DK=P("fp16"), DV=P("fp16"), DQ=P("fp16"),
               LSE=P("fp32"), Delta=P("fp32"), sm_scale="fp32", stride_z="i32", stride_h="i32", stride_m="i32",
               stride_k="i32", H="i32", N_CTX="i32")
    const = dict(BLOCK_M1=c1[0], BLOCK_N1=c1[1], BLOCK_M2=c2[0], BLOCK_N2=c2[1], HEAD_DIM=D, CAUSAL=causal,
                 DQ_DESC=B.FUSED_DQ_DESC.get(D, False), EVEN_M=True, TAIL=B.FUSED_TAIL.get(D),
                 KV_REGS=B.FUSED_KV_REGS.get((D, causal), 0))
    const.update(cx)
    return kernelc.compile(B.attn_bwd_fused_kernel, sig, const, target="sm_90a", num_warps=w, num_stages=s,
                           divisibility={n: 16 for n in sig}, equal_to_1=("stride_k",))


def main():
    rows = []
    for name, c1, c2, w, s, knobs in CONFIGS:
        saved = {k: os.environ.get(k) for k in knobs}
        os.environ.update(knobs)
        try:
            ck = compile_fused(c1, c2, w, s)
            loops = mma_loops(ck.asm["sass"])
            row = dict(config=name, regs=ck.n_regs, spills=ck.n_spills, smem=ck.shared, warps=ck.launch_warps,
                       per_sm=blocks_per_sm(ck.n_regs, ck.shared, warps=ck.launch_warps)["blocks"],
                       loops=[dict(total=lp["total"], hgmma=lp["HGMMA_shapes"], waits=lp["DEPBAR_args"])
                              for lp in loops])
        except Exception as e:  # noqa: BLE001
            row = dict(config=name, error=f"{type(e).__name__}: {e}"[:300])
        finally:
            for k, v in saved.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v
        rows.append(row)
        print(json.dumps(row), flush=True)
    if "--json" in sys.argv:
        with open(sys.argv[sys.argv.index("--json") + 1], "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
