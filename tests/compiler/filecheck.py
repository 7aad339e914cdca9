"""A small FileCheck for golden IR tests: ``CHECK:``, ``CHECK-NEXT:``, ``CHECK-NOT:`` lines matched in
order against IR text. A pattern is literal text except ``{{regex}}`` and ``[[NAME:regex]]``
(captures a value name) / ``[[NAME]]`` (reuses it)."""
import re


def _pattern(text, env):
    out, i = [], 0
    for m in re.finditer(r"\{\{(.*?)\}\}|\[\[(\w+)(?::(.*?))?\]\]", text):
        out.append(re.escape(text[i:m.start()]))
        if m.group(1) is not None:
            out.append(f"(?:{m.group(1)})")
        elif m.group(3) is not None:
            out.append(f"(?P<{m.group(2)}>{m.group(3)})")
        else:
            out.append(re.escape(env[m.group(2)]))
        i = m.end()
    out.append(re.escape(text[i:]))
    return re.compile("".join(out))


def filecheck(ir: str, checks: str) -> None:
    """Raise AssertionError naming the first check that fails."""
    lines = ir.splitlines()
    env, pos, nots = {}, 0, []
    for raw in checks.strip().splitlines():
        kind, _, pat = raw.strip().partition(":")
        pat = pat.strip()
        if kind == "CHECK-NOT":
            nots.append(pat)
            continue
        rx = _pattern(pat, env)
        span = range(pos, min(pos + 1, len(lines))) if kind == "CHECK-NEXT" else range(pos, len(lines))
        hit = next(((i, m) for i in span for m in [rx.search(lines[i])] if m), None)
        if hit is None:
            raise AssertionError(f"{kind}: {pat!r} not found after line {pos}:\n" + "\n".join(lines[pos:pos + 40]))
        i, m = hit
        for n in nots:
            for j in range(pos, i):
                if _pattern(n, env).search(lines[j]):
                    raise AssertionError(f"CHECK-NOT: {n!r} matched line {j}: {lines[j]}")
        nots = []
        env.update({k: v for k, v in m.groupdict().items() if v is not None})
        pos = i + 1
    for n in nots:
        for j in range(pos, len(lines)):
            if _pattern(n, env).search(lines[j]):
                raise AssertionError(f"CHECK-NOT: {n!r} matched line {j}: {lines[j]}")
