"""Registers and blocks per SM of every kernel of scripts/ptx_corpus.py (and tutorial 06's forward at its fp8
d64 pick, causal and not) under this process's options, on CPU (sm_90a builds only; issue #20, session 15).

    KERNELC_OCCUPANCY_STEP=all python3 bench/experiments/tut15/occupancy_survey.py OUT.json
    python3 bench/experiments/tut15/occupancy_survey.py --compare A.json B.json

Per kernel: registers, shared bytes, threads, blocks per SM, spills, whether the tile IR asks for the occupancy
step (``registers="occupancy_step"``). Nothing here is a test.
"""
import json
import os
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))
sys.path.insert(0, ROOT)
os.environ.setdefault("KERNELC_CACHE_DIR", tempfile.mkdtemp(prefix="occ_survey_"))


def describe(ck) -> dict:
    from cubintools.target import parse_target
    from kernelc.compiler.backend import ptxas as P
    tgt = parse_target("sm_90a")
    (entry, threads), = P.launch_bounds(ck.asm["ptx"]).items()
    res = ck.asm.get("cubin")
    from cubintools import inspect_cubin
    f = inspect_cubin(res).kernel(None)
    head = (ck.asm.get("tir_final") or ck.asm.get("tir") or "").split("\n", 1)[0]
    return {"regs": f.n_regs, "shared": ck.shared, "threads": threads, "spill_bytes": f.frame_size,
            "blocks": P.blocks_per_sm(f.n_regs, threads, ck.shared, tgt.limits),
            "marked": "registers='occupancy_step'" in head}


def main(argv):
    if argv[0] == "--compare":
        a, b = json.load(open(argv[1])), json.load(open(argv[2]))
        for k in a:
            if k in b and (a[k].get("regs"), a[k].get("blocks")) != (b[k].get("regs"), b[k].get("blocks")):
                print(f"{k:50s} {a[k]['regs']:4d} r {a[k]['blocks']:2d} b -> {b[k]['regs']:4d} r {b[k]['blocks']:2d} b"
                      f"  spill {b[k]['spill_bytes']}")
        return 0
    import kernelc
    real = kernelc.compile
    out = {}

    def spy(*a, **kw):
        ck = real(*a, **kw)
        tgt = kw.get("target") or "sm_90a"
        if tgt == "sm_90a":
            try:
                d = describe(ck)
            except Exception as e:  # a kernel this survey cannot read stays out
                d = {"error": str(e)[:200]}
            spy.last = d
        else:
            spy.last = None
        return ck

    kernelc.compile = spy
    import scripts.ptx_corpus as pc
    rec = tempfile.mktemp(suffix=".json")
    orig_print = print

    def capture(*a, **kw):  # record() prints "key len" after each compile
        if a and isinstance(a[0], str) and getattr(spy, "last", None) is not None:
            out[a[0]] = spy.last
            spy.last = None
        orig_print(*a, **kw)

    pc.print = capture
    pc.record(rec)
    json.dump(out, open(argv[0], "w"), indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
