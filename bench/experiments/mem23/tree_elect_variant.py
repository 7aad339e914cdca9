"""A copy of a source tree whose TMA-issuing predicate (codegen/tma.py ``elected``) is built another way, for a
one-process A/B against the shipped ``elect.sync`` per call (mem22/ab_one_process.py --tree NAME=DEST):

- ``tid0``: ``tid == 32 w`` (as before adf0175f; mem22/tree_elect_tid0.py);
- ``hoist``: warp 0's ``elect.sync`` evaluated once, at the kernel's entry (all threads converged), and that one
  predicate reused by every copy; other warps' elections stay per call.

    python3 bench/experiments/mem23/tree_elect_variant.py {tid0|hoist} SRC DEST
"""
import os
import shutil
import sys

OLD = '''    e = lw.e
    pair = e.call("{ i32, i1 }", "llvm.nvvm.elect.sync", [("i32", "-1")])
    leader = e.val(f"extractvalue {{ i32, i1 }} {pair}, 1")
    return e.val(f"and i1 {e.val(f'icmp eq i32 {lw.warp}, {warp}')}, {leader}")'''
NEW = {
    "tid0": '''    return lw.e.val(f"icmp eq i32 {lw.tid}, {warp * 32}")   # tree_elect_variant.py tid0''',
    "hoist": '''    if warp == 0 and getattr(lw, "elect_w0", None):   # tree_elect_variant.py hoist
        return lw.elect_w0
''' + OLD,
}
ENTRY_OLD = '''        self.tid = tid
'''
ENTRY_NEW = '''        self.tid = tid
        pair = e.call("{ i32, i1 }", "llvm.nvvm.elect.sync", [("i32", "-1")])   # tree_elect_variant.py hoist
        leader = e.val(f"extractvalue {{ i32, i1 }} {pair}, 1")
        self.elect_w0 = e.val(f"and i1 {e.val(f'icmp eq i32 {self.warp}, 0')}, {leader}")
'''


def patch(path, old, new):
    text = open(path).read()
    if text.count(old) != 1:
        raise SystemExit(f"{path}: not the form this patch expects")
    open(path, "w").write(text.replace(old, new))


def main(kind, src, dest):
    if os.path.exists(dest):
        shutil.rmtree(dest)
    shutil.copytree(src, dest, ignore=shutil.ignore_patterns(".ext", ".git", "__pycache__", "bench", "docs", "tests",
                                                             ".wheels", "shared"))
    cg = os.path.join(dest, "kernelc", "compiler", "codegen")
    patch(os.path.join(cg, "tma.py"), OLD, NEW[kind])
    if kind == "hoist":
        patch(os.path.join(cg, "lowering.py"), ENTRY_OLD, ENTRY_NEW)
    print(f"{dest}: elected() patched ({kind})")


if __name__ == "__main__":
    main(*sys.argv[1:4])
