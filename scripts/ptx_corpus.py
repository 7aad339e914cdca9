"""PTX of a fixed corpus, for refactors that must not change generated code (docs/schedule-ir.md).

    python3 scripts/ptx_corpus.py record OUT.json     # the example kernels at their benchmark configurations
    python3 -m pytest -q -p scripts.ptx_record tests/compiler/test_warp_specialize.py ...  # + test kernels
        (PTX_RECORD_OUT=OUT.json: every kernel the tests compile, keyed by test id)
    python3 scripts/ptx_corpus.py compare BEFORE.json AFTER.json   # exit 1 on any difference

Compiles on CPU (no GPU). Kernels that fail to compile (e.g. out of shared memory on a target) are
recorded with their error text, which must not change either. Source paths in the PTX's debug info are
normalised to the repository root, so two checkouts compare equal.
"""
import difflib
import json
import os
import sys
import traceback

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def record(path):
    sys.path.insert(0, ROOT)
    import kernelc
    from examples.kernels import (attention, attention_tma, layernorm, matmul, matmul_fp8, matmul_persistent,
                                  matmul_tma, softmax, vector_add)
    out = {}

    def C(key, k, sig, cx, **kw):
        div = kw.pop("divisibility", None) or {n: 16 for n in sig}
        try:
            out[key] = kernelc.compile(k, sig, cx, divisibility=div, **kw).asm["ptx"]
        except Exception as e:
            out[key] = "ERROR: " + "".join(traceback.format_exception_only(type(e), e))
        print(key, len(out[key]), flush=True)

    def cfgs(mod):
        return [(dict(c.kwargs), c.num_warps, c.num_stages) for c in mod.get_configs()]

    def P(t):
        return "*" + t

    for tgt in ("sm_90a", "sm_80"):
        for dt in ("fp16", "bf16"):
            sig = dict(a_ptr=P(dt), b_ptr=P(dt), c_ptr=P(dt), M="i32", N="i32", K="i32", stride_am="i32",
                       stride_ak="i32", stride_bk="i32", stride_bn="i32", stride_cm="i32", stride_cn="i32")
            for i, (cx, w, s) in enumerate(cfgs(matmul)):
                C(f"matmul/{tgt}/{dt}/{i}", matmul.matmul_kernel, sig, cx, target=tgt, num_warps=w, num_stages=s,
                  equal_to_1=("stride_ak", "stride_bn", "stride_cn"))
        sig = dict(a_ptr=P("fp16"), b_ptr=P("fp16"), c_ptr=P("fp16"), M="i32", N="i32", K="i32",
                   stride_am="i32", stride_ak="i32", stride_bk="i32", stride_bn="i32", stride_cm="i32", stride_cn="i32")
        masked = {k: v for k, v in matmul.MASKED_DEFAULT_CONFIG.items() if k.isupper()}
        C(f"matmul_masked/{tgt}", matmul.matmul_masked_kernel, sig, masked,
          target=tgt, num_warps=8, num_stages=3, equal_to_1=("stride_ak", "stride_bn", "stride_cn"))
        names = attention.attn_fwd_kernel.arg_names
        asig = {n: "i32" for n in names if n.startswith("stride") or n in ("H", "N_CTX")}
        asig.update(Q="*fp16", K="*fp16", V="*fp16", Out="*fp16", sm_scale="fp32")
        asig = {n: asig[n] for n in attention.attn_fwd_kernel.arg_names if n in asig}
        for causal in (False, True):
            for D in (64, 128):
                C(f"attention/{tgt}/c{causal}/d{D}", attention.attn_fwd_kernel, asig,
                  dict(BLOCK_M=128, BLOCK_N=64, HEAD_DIM=D, CAUSAL=causal), target=tgt, num_warps=4, num_stages=2,
                  equal_to_1=("stride_qk", "stride_kk", "stride_vk", "stride_ok"))
        C(f"softmax/{tgt}", softmax.softmax_kernel,
          dict(output_ptr="*fp32", input_ptr="*fp32", input_row_stride="i32", output_row_stride="i32",
               n_rows="i32", n_cols="i32"), dict(BLOCK_SIZE=4096, num_stages=2), target=tgt, num_warps=8)
        C(f"layernorm/{tgt}", layernorm.layer_norm_fwd_kernel,
          dict(X="*fp16", Y="*fp16", W="*fp16", B="*fp16", Mean="*fp32", Rstd="*fp32", stride="i32", N="i32",
               eps="fp32"), dict(BLOCK_SIZE=8192), target=tgt, num_warps=8)
        C(f"vector_add/{tgt}", vector_add.add_kernel,
          dict(x_ptr="*fp32", y_ptr="*fp32", output_ptr="*fp32", n_elements="i32"), dict(BLOCK_SIZE=1024),
          target=tgt, num_warps=4)

    tgt = "sm_90a"
    fp8 = dict(a_ptr="*fp8e4nv", b_ptr="*fp8e4nv", c_ptr="*fp16", scale_a_ptr="*fp32", scale_b_ptr="*fp32",
               M="i32", N="i32", K="i32")
    fsig = dict(fp8, stride_am="i32", stride_ak="i32", stride_bk="i32", stride_bn="i32", stride_cm="i32",
                stride_cn="i32")
    ftsig = dict(fp8, stride_am="i32", stride_bn="i32", stride_cm="i32")
    unit = ("stride_ak", "stride_bk", "stride_cn")
    for i, (cx, w, s) in enumerate(cfgs(matmul_fp8)):
        C(f"matmul_fp8/{i}", matmul_fp8.matmul_fp8_kernel, fsig, cx, target=tgt, num_warps=w, num_stages=s,
          equal_to_1=unit)
        C(f"matmul_fp8_tma/{i}", matmul_fp8.matmul_fp8_tma_kernel, ftsig, cx, target=tgt, num_warps=w, num_stages=s)
    C("matmul_fp8/sm_89", matmul_fp8.matmul_fp8_kernel, fsig, cfgs(matmul_fp8)[3][0], target="sm_89", num_warps=4,
      num_stages=4, equal_to_1=unit)
    for i, (cx, w, s) in enumerate(cfgs(matmul_tma)):
        bm, bn, bk = cx["BLOCK_SIZE_M"], cx["BLOCK_SIZE_N"], cx["BLOCK_SIZE_K"]
        sig = {"a_desc": f"tensordesc<fp16[{bm}, {bk}]>", "b_desc": f"tensordesc<fp16[{bk}, {bn}]>",
               "c_desc": f"tensordesc<fp16[{bm}, {bn}]>", "M": "i32", "N": "i32", "K": "i32"}
        C(f"matmul_tma/{i}", matmul_tma.matmul_tma_kernel, sig, cx, target=tgt, num_warps=w, num_stages=s)
        C(f"matmul_tma/sm_80/{i}", matmul_tma.matmul_tma_kernel, sig, cx, target="sm_80", num_warps=w, num_stages=s)
    for i, (cx, w, s) in enumerate(cfgs(matmul_persistent)):
        bm, bn, bk = cx["BLOCK_SIZE_M"], cx["BLOCK_SIZE_N"], cx["BLOCK_SIZE_K"]
        sig = {"a_desc": f"tensordesc<fp16[{bm}, {bk}]>", "b_desc": f"tensordesc<fp16[{bk}, {bn}]>",
               "c_desc": f"tensordesc<fp16[{bm}, {bn}]>", "M": "i32", "N": "i32", "K": "i32"}
        psig = dict(a_ptr="*fp16", b_ptr="*fp16", c_ptr="*fp16", M="i32", N="i32", K="i32")
        for ws in (False, True):
            cxx = dict(cx, NUM_SMS=132, WARP_SPECIALIZE=ws)
            C(f"persistent/{i}/ws{ws}", matmul_persistent.matmul_persistent_kernel, sig, cxx, target=tgt,
              num_warps=w, num_stages=s)
            C(f"desc_persistent/{i}/ws{ws}", matmul_persistent.matmul_descriptor_persistent_kernel, psig, cxx,
              target=tgt, num_warps=w, num_stages=s)
    for causal in (False, True):
        for D, w in ((64, 4), (128, 8), (64, 8)):
            desc = f"tensordesc<fp16[128, {D}]>"
            sig = {"sm_scale": "fp32", "desc_q": desc, "desc_k": desc, "desc_v": desc, "desc_o": desc, "N_CTX": "i32"}
            for st in (2, 3):
                C(f"attention_tma/c{causal}/d{D}/w{w}/s{st}", attention_tma.attn_fwd_tma_kernel, sig,
                  dict(BLOCK_M=128, BLOCK_N=128, HEAD_DIM=D, CAUSAL=causal), target=tgt, num_warps=w, num_stages=st)
    with open(path, "w") as f:
        json.dump(out, f)
    print(f"{len(out)} kernels, {sum(v.startswith('ERROR') for v in out.values())} compile errors -> {path}")


def _text(v):
    v = v if isinstance(v, str) else (v or {}).get("ptx") or ""
    return v.replace(ROOT + "/", "/ROOT/")


def compare(a_path, b_path, root_a=None, root_b=None):
    a, b = json.load(open(a_path)), json.load(open(b_path))
    norm = lambda s, r: _text(s).replace((r or ROOT) + "/", "/ROOT/")  # noqa: E731
    diff = [k for k in a if k not in b or norm(a[k], root_a) != norm(b[k], root_b)]
    print(f"{len(a)} kernels before, {len(b)} after, {len(diff)} differ")
    for k in diff[:5]:
        print("==", k)
        before, after = norm(a[k], root_a).splitlines(), norm(b.get(k), root_b).splitlines()
        print("\n".join(list(difflib.unified_diff(before, after, lineterm="", n=1))[:20]))
    return 1 if diff else 0


if __name__ == "__main__":
    if len(sys.argv) >= 3 and sys.argv[1] == "record":
        record(sys.argv[2])
    elif len(sys.argv) >= 4 and sys.argv[1] == "compare":
        # optional: the checkout roots the two files were recorded in (to normalise debug-info paths)
        sys.exit(compare(sys.argv[2], sys.argv[3], *sys.argv[4:6]))
    else:
        sys.exit(__doc__)
