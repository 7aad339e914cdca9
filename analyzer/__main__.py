"""``python -m analyzer`` = ``kprof-analyze``."""
import sys

from .cli import main

sys.exit(main())
