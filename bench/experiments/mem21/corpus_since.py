"""Which of bench_kernels' kernels (scripts/ptx_corpus.py's 97, sm_90a and sm_80) compile to other PTX now than on
the trees issue 21's A/Bs against 766f1cd ran on: an A/B on a tree whose PTX for a group equals this tree's holds
for this tree (at the PTX level; the assembler's flags for kernels with dots have not changed since, see
docs/performance.md). (CPU.)

    (cd OLD && PYTHONPATH=$PWD python3 scripts/ptx_corpus.py record /tmp/old.json)   # per tree
    python3 bench/experiments/mem21/corpus_since.py NOW.json TAG=OLD.json ... [--out JSON]
"""
import collections
import json
import re
import sys


def norm(p: str) -> str:
    return re.sub(r"//[^\n]*|^\s*\.loc[^\n]*|^\s*\.file[^\n]*", "", p, flags=re.M)


def main(argv):
    out_path = None
    if "--out" in argv:
        i = argv.index("--out")
        out_path = argv[i + 1]
        del argv[i:i + 2]
    now = json.load(open(argv[0]))
    res = {}
    for spec in argv[1:]:
        tag, path = spec.split("=", 1)
        old = json.load(open(path))
        diff = sorted(k for k in now if norm(now[k]) != norm(old.get(k, "")))
        res[tag] = {"kernels": len(now), "differ": diff,
                    "differ_by_group": dict(collections.Counter(k.split("/")[0] for k in diff)),
                    "groups": dict(collections.Counter(k.split("/")[0] for k in now))}
        print(tag, len(diff), "differ:", res[tag]["differ_by_group"])
    if out_path:
        json.dump(res, open(out_path, "w"), indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
