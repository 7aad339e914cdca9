"""Every Triton name that docs/triton-compat.md records as supported (kernelc/compat/triton_supported.json,
written by scripts/triton_compat.py from the real wheel) must stay present in kernelc."""
import json
import os

import kernelc.compat
from kernelc.compat import resolve as _resolve

SNAPSHOT = os.path.join(os.path.dirname(kernelc.compat.__file__), "triton_supported.json")


def test_snapshot_names_resolve(alias):
    with open(SNAPSHOT) as f:
        snap = json.load(f)
    assert snap["triton_version"] == kernelc.compat.TRITON_VERSION
    gone = []
    for mod, names in snap["modules"].items():
        for n in names:
            try:
                _resolve(f"{mod}.{n}")
            except (ImportError, AttributeError) as e:
                gone.append(f"{mod}.{n}: {type(e).__name__}")
    for path in snap["host_api"]:
        try:
            _resolve(path)
        except (ImportError, AttributeError) as e:
            gone.append(f"{path}: {type(e).__name__}")
    assert not gone, "names recorded as supported are missing:\n" + "\n".join(gone)
    assert len(snap["modules"]["triton.language"]) > 100  # the snapshot is the real list, not a stub
