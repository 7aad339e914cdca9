"""``triton.profiler.context`` (Proton): the scope depth of the calling thread."""
from __future__ import annotations

from typing import Optional

from profiler import context as _context


def depth(session: Optional[int] = 0) -> Optional[int]:
    """How many scopes are open on this thread (kprof's scopes are per thread, not per session)."""
    return len(_context.local.ctx.stack)
