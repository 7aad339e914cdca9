"""A copy of a source tree whose TMA copies are driven from ``tid == 0`` (warp ``w``: ``tid == 32 w``) instead of
warp 0's ``elect.sync`` lane: codegen/tma.py's ``elected`` as it was before adf0175f, for a one-process A/B of
that change alone (ab_one_process.py --tree tid0=DEST). On CPU its matmul_tma bf16 128x128 w4 s3 SASS has 2
R2UR and 9 BRA.U.ANY, as 766f1cd's (the shipped: 54 and 0).

    python3 bench/experiments/mem22/tree_elect_tid0.py SRC DEST
"""
import os
import shutil
import sys

OLD = '''    e = lw.e
    pair = e.call("{ i32, i1 }", "llvm.nvvm.elect.sync", [("i32", "-1")])
    leader = e.val(f"extractvalue {{ i32, i1 }} {pair}, 1")
    return e.val(f"and i1 {e.val(f'icmp eq i32 {lw.warp}, {warp}')}, {leader}")'''
NEW = '''    return lw.e.val(f"icmp eq i32 {lw.tid}, {warp * 32}")   # tree_elect_tid0.py'''


def main(src, dest):
    if os.path.exists(dest):
        shutil.rmtree(dest)
    shutil.copytree(src, dest, ignore=shutil.ignore_patterns(".ext", ".git", "__pycache__", "bench", "docs", "tests",
                                                             ".wheels", "shared"))
    p = os.path.join(dest, "kernelc", "compiler", "codegen", "tma.py")
    text = open(p).read()
    if text.count(OLD) != 1:
        raise SystemExit("elected() is not the form this patch expects")
    open(p, "w").write(text.replace(OLD, NEW))
    print(f"{dest}: elected() patched")


if __name__ == "__main__":
    main(*sys.argv[1:3])
