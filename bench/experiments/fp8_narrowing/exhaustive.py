"""Every fp32 bit pattern through the LLVM IR that codegen/fp8.py emits for a cvt pair (fp32 -> e5m2 / e4m3fn,
any value: the overflow and the NaN-sign fix-ups), run on the host with tests/compiler/fp8_ir_eval.py's model of
the PTX instructions, value x in the low byte and ~x in the high byte, against compiler/fp8_reference.py.
Nothing here is a test (about 40 minutes on one core; the unit tests run the dense boundary sweep):

    PYTHONPATH=. python3 bench/experiments/fp8_narrowing/exhaustive.py

2026-11-27 (branch fp8c): 0 mismatches in 2^32 x 2 bytes x 2 formats (docs/attention.md, "fp8 narrowing at
Triton's cost")."""
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))))
import numpy as np
from kernelc.compiler.codegen import fp8 as CG
from kernelc.compiler.codegen.emitter import Emitter
from kernelc.compiler import fp8_reference as REF
from kernelc.language.dtypes import FP8_FORMATS, dtype
from tests.compiler import fp8_ir_eval as EV
U64 = np.uint64
progs = {}
for name in ("fp8e5", "fp8e4nv"):
    e = Emitter("t", "t.py", 1); e.capability = (9, 0)
    y0, y1 = CG.cast_pair(e, dtype("fp32"), dtype(name), "%a", "%b")
    progs[name] = (list(e.body), y0, y1)
step = 1 << 22
bad = {n: 0 for n in progs}
t0 = time.time()
for start in range(0, 1 << 32, step):
    x = np.arange(start, start + step, dtype=np.uint64)
    x1 = (~x) & U64(0xFFFFFFFF)
    for name, (body, y0, y1) in progs.items():
        env = EV.run(body, {"%a": ("float", x), "%b": ("float", x1)})
        fmt = FP8_FORMATS[name]
        w0 = REF.encode(x.astype(np.uint32).view(np.float32), fmt)
        w1 = REF.encode(x1.astype(np.uint32).view(np.float32), fmt)
        b = int((env[y0][1].astype(np.uint8) != w0).sum() + (env[y1][1].astype(np.uint8) != w1).sum())
        if b:
            i = np.nonzero(env[y0][1].astype(np.uint8) != w0)[0][:3]
            print("BAD", name, b, [hex(int(x[k])) for k in i], flush=True)
        bad[name] += b
    if start % (1 << 28) == 0:
        print(f"{start >> 22}/1024 chunks, {time.time() - t0:.0f} s, mismatches {bad}", flush=True)
print("done: every fp32 bit pattern, both bytes, mismatches", bad, f"{time.time() - t0:.0f} s", flush=True)
