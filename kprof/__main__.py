"""``python -m kprof [options] script.py [args...]`` (also installed as ``kprof``)."""
import sys

from profiler.cli import main

if __name__ == "__main__":
    sys.exit(main())
