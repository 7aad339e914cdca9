"""``python -m profiler.viewer`` runs ``kprof-viewer``."""

import sys

from .cli import main

sys.exit(main())
