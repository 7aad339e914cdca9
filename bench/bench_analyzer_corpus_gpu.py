"""The analyzer's corpus on the GPU with PC samples: ``bench_analyzer_corpus.py --gpu`` as a maintained
benchmark name (``python3 -m bench analyzer_corpus_gpu [--only ...] [--groups ...] [--modes ...]``, and
``bash scripts/gpu_check.sh analyzer_corpus_gpu``).  Results: bench/results/analyzer_corpus_gpu.json."""
from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bench.bench_analyzer_corpus import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main(["--gpu", *sys.argv[1:]]))
