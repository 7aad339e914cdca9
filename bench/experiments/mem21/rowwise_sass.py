"""bench_kernels' row-wise kernels (vector_add, softmax, layernorm) at the configs their wrappers launch for the
bench's sizes, compiled for sm_90a by the tree at $TREE: registers, a hash of the SASS text (addresses dropped)
and its length, as JSON. Two trees with equal hashes build the same code, so an A/B measured on one holds for the
other. (CPU.)

    TREE=/path/to/tree PYTHONPATH=/path/to/tree python3 bench/experiments/mem21/rowwise_sass.py
"""
import hashlib, json, sys, os
root = os.environ["TREE"]; sys.path.insert(0, root)
from kernelc.compat import install; install()
import kernelc
from examples.kernels import softmax, layernorm, vector_add
from cubintools.sass import disassemble
import re
out = {}
def C(key, k, sig, cx, nw):
    ck = kernelc.compile(k, sig, cx, target="sm_90a", num_warps=nw, divisibility={n: 16 for n in sig})
    s = disassemble(ck.asm["cubin"], line_info=False)
    s = "\n".join(re.sub(r"/\*[0-9a-f]+\*/", "", l).strip() for l in s.splitlines() if "SASS" not in l)
    out[key] = (ck.n_regs, hashlib.sha1(s.encode()).hexdigest()[:12], len(s.splitlines()))
sm = dict(output_ptr="*fp32", input_ptr="*fp32", input_row_stride="i32", output_row_stride="i32", n_rows="i32", n_cols="i32")
C("softmax 4096", softmax.softmax_kernel, sm, dict(BLOCK_SIZE=4096, num_stages=2), 16)
C("softmax 1024", softmax.softmax_kernel, sm, dict(BLOCK_SIZE=1024, num_stages=2), 4)
C("layernorm 8192", layernorm.layer_norm_fwd_kernel, dict(X="*fp16", Y="*fp16", W="*fp16", B="*fp16", Mean="*fp32", Rstd="*fp32", stride="i32", N="i32", eps="fp32"), dict(BLOCK_SIZE=8192), 8)
C("vector_add 1024", vector_add.add_kernel, dict(x_ptr="*fp32", y_ptr="*fp32", output_ptr="*fp32", n_elements="i32"), dict(BLOCK_SIZE=1024), 4)
print(json.dumps(out))
