"""The memory-bound set's 14 row kernels (bench_memory_bound's specialisations: mem20/asm_matrix.py's CASES), compiled
for sm_90a by the tree at $TREE: registers and a hash of the SASS text (addresses dropped), as JSON. Two trees with
equal hashes build the same code, so a row timed on one holds for the other. (CPU.)

    TREE=/path/to/tree PYTHONPATH=/path/to/tree python3 bench/experiments/mem21/mb_sass.py
"""
import hashlib
import json
import os
import re
import sys

root = os.environ["TREE"]
sys.path.insert(0, root)
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "mem20"))
from asm_matrix import CASES  # noqa: E402
from kernelc.compat import install  # noqa: E402

install()
from cubintools.sass import disassemble  # noqa: E402
from examples.kernels import memory_bound as K  # noqa: E402
from kernelc.compiler.compiler import compile as kcompile  # noqa: E402

out = {}
for kname, (sig_s, cx, nw) in CASES.items():
    sig = dict(p.split("=") for p in sig_s.split(","))
    ck = kcompile(getattr(K, kname), sig, cx, "sm_90a", nw, 3,
                  divisibility={n: 16 for n, t in sig.items() if t.startswith("*") or t in ("i32", "i64")})
    s = disassemble(ck.asm["cubin"], line_info=False)
    s = "\n".join(re.sub(r"/\*[0-9a-f]+\*/", "", ln).strip() for ln in s.splitlines())
    out[kname] = [ck.n_regs, hashlib.sha1(s.encode()).hexdigest()[:12]]
print(json.dumps(out))
