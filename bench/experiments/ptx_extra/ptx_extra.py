"""The PTX of the kernels ``scripts/ptx_corpus.py`` leaves out: the attention backward (dK/dV with and without
atomic dQ, dQ; sm_90a and sm_80, head dims 64/128, causal or not, at their default configurations) and the
FA3-order forward (4 and 8 warps): 32 kernels. For refactors that must not change generated code
(docs/schedule-ir.md, "Checking that nothing changed"):

    python3 bench/experiments/ptx_extra/ptx_extra.py BEFORE_CHECKOUT /tmp/before.json
    python3 bench/experiments/ptx_extra/ptx_extra.py AFTER_CHECKOUT /tmp/after.json
    python3 scripts/ptx_corpus.py compare /tmp/before.json /tmp/after.json

Source paths are normalised to /ROOT/ here already.
"""
import json
import os
import sys
import traceback


def record(root: str, out_path: str) -> None:
    root = os.path.abspath(root)
    sys.path.insert(0, root)
    os.chdir(root)
    import kernelc
    from examples.kernels import attention_bwd as B, attention_fa3 as F
    out = {}

    def C(key, k, sig, cx, **kw):
        div = {n: 16 for n in sig if sig[n].startswith(("*", "tensordesc"))}
        try:
            out[key] = kernelc.compile(k, sig, cx, divisibility=div, **kw).asm["ptx"]
        except Exception as e:  # recorded: a compile error must not change either
            out[key] = "ERROR: " + "".join(traceback.format_exception_only(type(e), e))
        out[key] = out[key].replace(root + "/", "/ROOT/")
        print(key, len(out[key]), flush=True)

    def sig_of(kernel, ptrs):
        s = {n: "i32" for n in kernel.arg_names if n.startswith(("stride", "dq_stride")) or n in ("H", "N_CTX")}
        s.update(ptrs, sm_scale="fp32")
        return {n: s[n] for n in kernel.arg_names if n in s}

    fp16 = {n: "*fp16" for n in ("Q", "K", "V", "DO", "DK", "DV")}
    stats = {"LSE": "*fp32", "Delta": "*fp32"}
    for tgt in ("sm_90a", "sm_80"):
        for D in (64, 128):
            for causal in (False, True):
                for atomic in (False, True):
                    c = B._cfg(B.ATOMIC_DKDV_CONFIGS if atomic else B.DKDV_CONFIGS, D, None)
                    s = sig_of(B.attn_bwd_dkdv_kernel, dict(fp16, **stats, DQ="*fp32" if atomic else "*fp16"))
                    C(f"dkdv/{tgt}/d{D}/c{causal}/a{atomic}", B.attn_bwd_dkdv_kernel, s,
                      dict(BLOCK_M=c["BLOCK_M"], BLOCK_N=c["BLOCK_N"], HEAD_DIM=D, CAUSAL=causal, ATOMIC_DQ=atomic),
                      target=tgt, num_warps=c["num_warps"], num_stages=c["num_stages"])
                c = B._cfg(B.DQ_CONFIGS, D, None)
                s = sig_of(B.attn_bwd_dq_kernel, dict(fp16, **stats, DQ="*fp16"))
                C(f"dq/{tgt}/d{D}/c{causal}", B.attn_bwd_dq_kernel, s,
                  dict(BLOCK_M=c["BLOCK_M"], BLOCK_N=c["BLOCK_N"], HEAD_DIM=D, CAUSAL=causal),
                  target=tgt, num_warps=c["num_warps"], num_stages=c["num_stages"])
    for D in (64, 128):
        for causal in (False, True):
            for w in (4, 8):
                s = {"sm_scale": "fp32", **{f"desc_{t}": f"tensordesc<fp16[128, {D}]>" for t in "qkvo"}, "N_CTX": "i32",
                     "QScale": "*fp32", "KScale": "*fp32", "VScale": "*fp32"}
                C(f"fa3/d{D}/c{causal}/w{w}", F.attn_fwd_fa3_kernel, s,
                  dict(BLOCK_M=128, BLOCK_N=128, HEAD_DIM=D, CAUSAL=causal, FP8=False), target="sm_90a", num_warps=w,
                  num_stages=2)
    with open(out_path, "w") as f:
        json.dump(out, f)
    print(f"{len(out)} kernels, {sum(v.startswith('ERROR') for v in out.values())} compile errors -> {out_path}")


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    record(sys.argv[1], os.path.abspath(sys.argv[2]))
