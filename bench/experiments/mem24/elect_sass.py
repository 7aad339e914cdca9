"""The TMA copy predicate's two forms on GEMM loops fed by host descriptors (kernel arguments) and by descriptors
made in the kernel (``tl.make_tensor_descriptor``): registers and the k-loop's opcodes (the first loop that issues
HGMMAs) on sm_90a under ``KERNELC_TMA_ELECT=elect|tid|auto``, each form in its own process (the knob is read once).
After call R1 of session 24 found the ds backward's dQ GEMM (device descriptors) faster under elect, where
matmul_tma and matmul_persistent (host descriptors) are faster under tid (CPU; nothing timed here).

    PYTHONPATH=. python3 bench/experiments/mem24/elect_sass.py [--out results/elect_sass.json]
"""
import collections
import json
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.join(ROOT, "bench", "experiments", "mem23"))
KERNELS = ("dq_from_ds", "matmul_tma", "matmul_persistent", "matmul_descriptor_persistent", "matmul_fp8_tma")
MM = dict(BLOCK_SIZE_M=128, BLOCK_SIZE_N=128, BLOCK_SIZE_K=64, GROUP_SIZE_M=8)
FP8 = dict(BLOCK_SIZE_M=128, BLOCK_SIZE_N=256, BLOCK_SIZE_K=128, GROUP_SIZE_M=8)


def one(form, which):
    os.environ["KERNELC_TMA_ELECT"] = form
    os.environ["KERNELC_WARP_SPECIALIZE"] = "0"
    if which in ("dq_from_ds", "matmul_tma"):
        import dq_ds_sass
        return dq_ds_sass.one(form, which)
    import kernelc
    from tests.compiler.test_attention_kernels import _first_loop
    from examples.kernels import matmul_persistent as M
    if which == "matmul_fp8_tma":   # bench_kernels' fp8 row at 128x256x128 w8 s3 (descriptors made in the kernel)
        from examples.kernels import matmul_fp8 as F
        sig = {"a_ptr": "*fp8e4nv", "b_ptr": "*fp8e4nv", "c_ptr": "*bf16", "scale_a_ptr": "*fp32",
               "scale_b_ptr": "*fp32", "M": "i32", "N": "i32", "K": "i32", "stride_am": "i32", "stride_bn": "i32",
               "stride_cm": "i32"}
        ck = kernelc.compile(F.matmul_fp8_tma_kernel, sig, FP8, target="sm_90a", num_warps=8, num_stages=3,
                             divisibility={n: 16 for n in sig})
        # fp8 wgmma is QGMMA in SASS: the first loop holding one, as _first_loop finds HGMMA loops
        body = _first_loop(ck.asm["sass"].replace("QGMMA", "HGMMA"))
        c = collections.Counter(o.split()[0].split(".")[0] for o in body)
        return {"registers": ck.n_regs, "loop_instructions": len(body),
                **{k: c[k] for k in ("R2UR", "ELECT", "UTMALDG")}, "QGMMA": c["HGMMA"]}
    cx = dict(MM, NUM_SMS=132, WARP_SPECIALIZE=False)
    if which == "matmul_persistent":
        sig = {"a_desc": "tensordesc<fp16[128, 64]>", "b_desc": "tensordesc<fp16[64, 128]>",
               "c_desc": "tensordesc<fp16[128, 128]>", "M": "i32", "N": "i32", "K": "i32"}
        fn, div = M.matmul_persistent_kernel, {"a_desc": 16, "b_desc": 16, "c_desc": 16}
    else:
        sig = {"a_ptr": "*fp16", "b_ptr": "*fp16", "c_ptr": "*fp16", "M": "i32", "N": "i32", "K": "i32"}
        fn, div = M.matmul_descriptor_persistent_kernel, {n: 16 for n in sig}
    ck = kernelc.compile(fn, sig, cx, target="sm_90a", num_warps=4, num_stages=3, divisibility=div)
    body = _first_loop(ck.asm["sass"])
    c = collections.Counter(o.split()[0].split(".")[0] for o in body)
    return {"registers": ck.n_regs, "loop_instructions": len(body),
            **{k: c[k] for k in ("R2UR", "ELECT", "UTMALDG", "HGMMA")}}


def main(argv=None):
    if len(sys.argv) > 2 and sys.argv[1] == "--one":
        print(json.dumps(one(sys.argv[2], sys.argv[3])))
        return 0
    out = {}
    for which in KERNELS:
        for form in ("elect", "tid", "auto"):
            env = dict(os.environ, KERNELC_CACHE_DIR=f"/tmp/kc_m24_elect_{form}", PYTHONPATH=ROOT)
            r = subprocess.run([sys.executable, __file__, "--one", form, which], env=env, capture_output=True,
                               text=True)
            out.setdefault(which, {})[form] = json.loads(r.stdout.strip().splitlines()[-1]) if r.returncode == 0 \
                else {"error": r.stderr[-300:]}
            print(which, form, out[which][form], flush=True)
    if "--out" in sys.argv:
        with open(sys.argv[sys.argv.index("--out") + 1], "w") as f:
            json.dump(out, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
