"""fp8h28's A/B at N 4096 (issue 27's fp8 cell at D=64 causal, judged per call): fp828's harness (``fp828/ab.py``:
fwd15's timing -- GPU time behind a sleep and the bench's per call, variants interleaved call by call, every output
checked) with the fp8 forward's host path as main had it (``mainpath.main_fp8``) against this tree's, each both through
the harness's key-order wrapper (fwd18's ``_with_key_order``: how fp828's R3 called the fp8 default) and called
directly with V^T already in key order; our fp16 pointer forward and cuDNN.

    python3 bench/experiments/fp8h28/ab_h28.py --out OUT.jsonl --seq 4096 [--reps 24] [--points 64,1 128,1]

Nothing here is a test.
"""
from __future__ import annotations

import importlib.util
import os
import statistics
import sys
import json

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))
sys.path[:0] = [ROOT, HERE]

_spec = importlib.util.spec_from_file_location("fp828_ab", os.path.join(ROOT, "bench", "experiments", "fp828", "ab.py"))
F28 = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(F28)
AB = F28.AB
import mainpath  # noqa: E402

KO = dict(key_order=True)
# (kinds end in 8: the harness checks those outputs against SDPA on the dequantised inputs)
VARIANTS = [F28.DEF8,  # fp8_ptr: this tree's call, through the key-order wrapper (R3's "fp8 default" harness)
            ("fp8_main", "main_wrapped8", KO), F28.P16, F28.CUDNN,
            ("fp8_direct", "new_direct8", KO), ("fp8_main_direct", "main_direct8", KO)]
AB.CANDIDATES = {(64, True): VARIANTS, (128, True): VARIANTS, (64, False): VARIANTS, (128, False): VARIANTS}

_setup = AB.setup


def setup(N, D, causal, names):
    make, ctx, err16, err8 = _setup(N, D, causal, names)
    probe = make("ptr8", {})  # lambda: A.attention_fp8(*fp8, **kw): its closure holds the harness's inputs
    cells = dict(zip(probe.__code__.co_freevars, (c.cell_contents for c in probe.__closure__)))
    fp8, A = cells["fp8"], cells["A"]
    q8, k8, v8t, qs, ks, vs, causal_, scale = fp8
    v8k = A.fp8_v_key_order(v8t)  # made once: the direct calls get V^T in key order as a caller keeps it
    direct = (q8, k8, v8k, qs, ks, vs, causal_, scale)
    import ab as F18  # fwd18's (on sys.path through fp827's ab): its key-order wrapper
    # the unwrapped attention_fp8 (fwd18 replaced A.attention_fp8 by its wrapper)
    wrap = A.attention_fp8
    new8 = dict(zip(wrap.__code__.co_freevars, (c.cell_contents for c in wrap.__closure__)))["fwd"]
    main8 = mainpath.main_fp8(A, first=new8)
    wrapped_main = F18._with_key_order(main8)

    def make2(kind, kw):
        if kind == "main_wrapped8":
            return lambda: wrapped_main(*fp8, **kw)
        if kind == "new_direct8":
            return lambda: new8(*direct, **kw)
        if kind == "main_direct8":
            return lambda: main8(*direct, **kw)
        return make(kind, kw)
    setup.main8 = main8
    return make2, ctx, err16, err8


AB.setup = setup


def ratios(path):
    rows = [json.loads(ln) for ln in open(path) if ln.strip()]
    out = []
    for r in rows:
        if "slept" in r:
            out.append(r)
    lines = []
    pts = {}
    for r in out:
        pts.setdefault((r["N"], r["D"], r["causal"]), {})[r["variant"]] = {k: statistics.median(r[k])
                                                                         for k in ("slept", "percall")}
    for (N, D, causal), med in pts.items():
        lines.append(f"== ratios N={N} D={D} causal={int(causal)} (median ms; slept = GPU time, percall = the bench's)")
        for name in sorted(med):
            m = med[name]
            lines.append(f"  {name:16s} slept {m['slept']:.4f} ms  percall {m['percall']:.4f} ms  percall-slept "
                         f"{(m['percall'] - m['slept']) * 1000:6.1f} us")
        for f8 in ("fp8_ptr", "fp8_main", "fp8_direct", "fp8_main_direct"):
            if f8 in med and "fp16_ptr" in med:
                lines.append(f"  {f8:16s} / fp16_ptr: slept {med['fp16_ptr']['slept'] / med[f8]['slept']:.3f}, "
                             f"percall {med['fp16_ptr']['percall'] / med[f8]['percall']:.3f}")
    return "\n".join(lines)


if __name__ == "__main__":
    rc = AB.main()
    if "--out" in sys.argv:
        print(ratios(sys.argv[sys.argv.index("--out") + 1]))
        print(f"main's plans kept their descriptor launch: {setup.main8.still_off() if hasattr(setup, 'main8') else '?'}")
    sys.exit(rc)
