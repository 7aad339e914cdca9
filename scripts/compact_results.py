"""Keep the committed benchmark results small: gzip the big ones that no script reads.

Why: every device call copies the whole working tree, and the copy (tree plus carried wheels) is capped at
64 MiB. Results are history (read by people, cited from docs/), so a big JSON or log is gzipped in place
(`X.json` -> `X.json.gz`, read back with `zcat`) and the docs' references to it are rewritten. A file that a
tracked script or test names (its path inside its results folder appears in a .py/.sh file) stays plain,
because that script reads it.

    python scripts/compact_results.py            # list what would be compacted
    python scripts/compact_results.py --apply    # gzip them, rewrite references in *.md, stage with git
"""
from __future__ import annotations

import argparse
import gzip
import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MIN_BYTES = 128 * 1024
_RESULTS = re.compile(r"^bench/(?:results|experiments/[^/]+/results)/")


def _tracked(*patterns: str) -> list[str]:
    out = subprocess.run(["git", "ls-files", "-z", "--", *patterns], cwd=ROOT, capture_output=True, check=True)
    return [p for p in out.stdout.decode().split("\0") if p]


def _inside_results(path: str) -> str:
    """The path relative to its results folder (what a reader script names)."""
    return _RESULTS.sub("", path)


def candidates(min_bytes: int = MIN_BYTES) -> list[str]:
    """Tracked result files of at least ``min_bytes`` that are not gzipped and that no tracked script names."""
    big = [p for p in _tracked("bench") if _RESULTS.match(p) and not p.endswith(".gz")
           and os.path.isfile(os.path.join(ROOT, p)) and os.path.getsize(os.path.join(ROOT, p)) >= min_bytes]
    if not big:
        return []
    code = "\n".join(open(os.path.join(ROOT, p), errors="replace").read()
                     for p in _tracked("*.py", "*.sh") if os.path.isfile(os.path.join(ROOT, p)))
    return [p for p in big if _inside_results(p) not in code]


def _rewrite_references(done: list[str]) -> list[str]:
    changed = []
    names = sorted({_inside_results(p) for p in done}, key=len, reverse=True)
    pat = re.compile("(" + "|".join(re.escape(n) for n in names) + r")(?!\.gz)(?![\w.-])")
    for md in _tracked("*.md"):
        path = os.path.join(ROOT, md)
        text = open(path).read()
        new = pat.sub(r"\1.gz", text)
        if new != text:
            with open(path, "w") as f:
                f.write(new)
            changed.append(md)
    return changed


def compact(paths: list[str]) -> None:
    for p in paths:
        src = os.path.join(ROOT, p)
        with open(src, "rb") as f:
            data = f.read()
        tmp = src + ".gz.tmp"
        with open(tmp, "wb") as f:
            f.write(gzip.compress(data, compresslevel=9, mtime=0))
        os.replace(tmp, src + ".gz")
    subprocess.run(["git", "rm", "-q", "--cached", "--", *paths], cwd=ROOT, check=True)
    for p in paths:
        os.remove(os.path.join(ROOT, p))
    docs = _rewrite_references(paths)
    subprocess.run(["git", "add", "--", *[p + ".gz" for p in paths], *docs], cwd=ROOT, check=True)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--apply", action="store_true", help="gzip the files and rewrite the docs' references")
    ap.add_argument("--min-bytes", type=int, default=MIN_BYTES)
    a = ap.parse_args(argv)
    todo = candidates(a.min_bytes)
    total = sum(os.path.getsize(os.path.join(ROOT, p)) for p in todo)
    for p in todo:
        print(f"{os.path.getsize(os.path.join(ROOT, p)):>10}  {p}")
    print(f"{len(todo)} file(s), {total / 2**20:.1f} MiB uncompressed")
    if a.apply and todo:
        compact(todo)
    return 0


if __name__ == "__main__":
    sys.exit(main())
