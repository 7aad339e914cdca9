"""``python3 -m kernelc.options --markdown``: the options table as Markdown."""
import sys

from . import main

sys.exit(main())
