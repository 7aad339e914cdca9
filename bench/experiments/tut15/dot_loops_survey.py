"""Which of the examples' attention kernels KERNELC_STEP_DOT_LOOPS changes, on CPU (sm_90a, nvJitLink): registers,
blocks per SM and spills with the rule on and off, at the bench's configs (tests/compiler/test_attention_kernels.py's
compile helpers). Nothing here is a test.

    python3 bench/experiments/tut15/dot_loops_survey.py [OUT.json]
"""
import json
import os
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))
sys.path.insert(0, ROOT)
os.environ.setdefault("KERNELC_CACHE_DIR", tempfile.mkdtemp(prefix="dot_loops_survey_"))


def cases():
    from tests.compiler import test_attention_kernels as T
    out = {}
    for D in (64, 128):
        for causal in (True, False):
            out[f"attn_fwd_lse d{D} c{int(causal)}"] = lambda D=D, c=causal: T.compile_fwd(D, c)
            out[f"attn_fwd_lse fp8 d{D} c{int(causal)}"] = lambda D=D, c=causal: T.compile_fwd(D, c, fp8=True)
            out[f"bwd_dkdv d{D} c{int(causal)}"] = lambda D=D, c=causal: T.compile_dkdv(D, c)
            out[f"bwd_dkdv_ds d{D} c{int(causal)}"] = lambda D=D, c=causal: T.compile_dkdv_ds(D, c)
            out[f"bwd_dq d{D} c{int(causal)}"] = lambda D=D, c=causal: T.compile_dq(D, c)
    return out


def main(argv):
    from cubintools.target import parse_target
    from kernelc.compiler.backend import ptxas as P
    lim = parse_target("sm_90a").limits
    res = {}
    for name, fn in cases().items():
        row = {}
        for on in ("1", "0"):
            os.environ["KERNELC_STEP_DOT_LOOPS"] = on
            try:
                ck = fn()
                (entry, threads), = P.launch_bounds(ck.asm["ptx"]).items()
                row[on] = dict(regs=ck.n_regs, spills=ck.n_spills, blocks=P.blocks_per_sm(ck.n_regs, threads,
                                                                                          ck.shared, lim),
                               marked="registers='occupancy_step'" in ck.asm["tir"].splitlines()[0])
            except Exception as e:
                row[on] = {"error": str(e)[:200]}
        res[name] = row
        flag = "" if row["1"] == row["0"] else "  <- changes"
        print(f"{name:28s} on {row['1']}  off {row['0']}{flag}", flush=True)
    if argv:
        json.dump(res, open(argv[0], "w"), indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
