"""GPU: each column's output against the shipped build's, element for element (the edits called exact must give
the same bits), and both against Triton's.

    python3 bench/experiments/sm28/exact.py --out PATH [--col TAG=own+EDIT...] ROW...
"""
import argparse
import json
import os
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.join(ROOT, "bench", "experiments", "mem20"))
import cols  # noqa: E402,F401
import variants as V  # noqa: E402


def main(argv):
    ap = argparse.ArgumentParser()
    ap.add_argument("rows", nargs="+")
    ap.add_argument("--col", action="append", default=[])
    ap.add_argument("--out", required=True)
    a = ap.parse_args(argv)
    import torch
    import builds as B
    import asm_matrix as A
    A.TRITON_PTXAS = B.triton_ptxas()
    from bench.bench_memory_bound import _env, cases, column_env, kernelc_variant
    from bench.common import triton_twin
    from examples.kernels import memory_bound as K
    T = triton_twin("memory_bound")
    root = tempfile.mkdtemp(prefix="sm28-exact-")
    table = cases()
    res = []
    for r in a.rows:
        for name in [n for n in table if n.startswith(r)]:
            make, call, _ref, _nb = table[name]
            with _env(column_env(root, "kernelc")):
                args = make()
                base = call(K, *[x.clone() for x in args])
            tri = call(T, *[x.clone() for x in args])
            row = {"row": name, "cols": {}}
            for spec in a.col:
                rtag, recipe, edits, env = V.parse_col(spec)
                only, tag = V.col_rows(rtag)
                if only is not None and not name.startswith(only):
                    continue
                try:
                    M = kernelc_variant(f"x_{tag}")
                    # one disk cache for the columns without knobs: the same build, edited apart
                    with _env(column_env(root, tag if env else "noknobs", env)):
                        call(M, *[x.clone() for x in args])
                    for kn, kf in vars(M).items():
                        if hasattr(kf, "arg_names") and getattr(kf, "_cuda_state", {}).get("cache"):
                            V.load_build(kf, recipe, edits)
                    out = call(M, *[x.clone() for x in args])
                    torch.cuda.synchronize()
                    d = (out.float() - base.float()).abs()
                    row["cols"][tag] = {"edits": edits, "n_differ_from_shipped": int((out != base).sum().item()),
                                        "max_abs_vs_shipped": d.max().item(),
                                        "max_abs_vs_triton": (out.float() - tri.float()).abs().max().item(),
                                        "n_differ_from_triton": int((out != tri).sum().item()),
                                        "nan": int(torch.isnan(out).sum().item())}
                except Exception as e:
                    row["cols"][tag] = {"error": f"{type(e).__name__}: {str(e)[:300]}"}
                print(name, tag, row["cols"][tag], flush=True)
                with open(a.out, "w") as f:   # after every column: a process cut short keeps what it did
                    json.dump(res + [row], f, indent=1)
            row["shipped_n_differ_from_triton"] = int((base != tri).sum().item())
            res.append(row)
    with open(a.out, "w") as f:
        json.dump(res, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
