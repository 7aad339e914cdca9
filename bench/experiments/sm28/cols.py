"""mem21/variants.py with sm28's PTX edits (edits.py) added to its table: the same command line.

    python3 bench/experiments/sm28/cols.py [variants.py's arguments]          # GPU
    python3 bench/experiments/sm28/cols.py --check --kernel softmax_fwd_kernel --col ...   # CPU
"""
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "mem21"))
sys.path.insert(0, HERE)
import variants as V  # noqa: E402
import edits  # noqa: E402

edits.install()

if __name__ == "__main__":
    if "--check" in sys.argv:
        sys.exit(V.check(sys.argv[1:]))
    sys.exit(V.main(sys.argv[1:]))
