"""A content-addressed disk cache of nvJitLink's results (cubin + info log), keyed by what decides them.

The kernel cache (runtime/cache.py) is keyed by the kernel's source and options; this one by the exact PTX, the
nvJitLink options and nvJitLink's version, so the same PTX is assembled once whatever asked for it: a test suite
whose tests each get their own kernel cache, the candidate builds of the register policies, sharded dry runs.
Off unless ``KERNELC_CUBIN_CACHE_DIR`` names a folder. An entry that does not read back whole is ignored and
written again; writes are atomic, so concurrent processes can share a folder.
"""
from __future__ import annotations

import hashlib
import os
import tempfile
from typing import Optional, Sequence, Tuple

_MAGIC = b"kernelc-cubin-cache 1\n"


def cache_dir() -> Optional[str]:
    from ...options import get
    root = get("KERNELC_CUBIN_CACHE_DIR")
    if not root or str(root).strip().lower() in ("off", "0", "none", "no", "false"):
        return None
    return str(root)


def key(data: bytes, opts: Sequence[str], version: Tuple[int, ...], name: str) -> str:
    h = hashlib.sha256()
    for part in (repr(tuple(version)), "\0".join(opts), name):
        h.update(part.encode())
        h.update(b"\0")
    h.update(data)
    return h.hexdigest()


def _path(root: str, k: str) -> str:
    return os.path.join(root, k[:2], k + ".bin")


def read(root: str, k: str) -> Optional[Tuple[bytes, str]]:
    """(cubin, info log) stored under ``k``, or None (absent, torn or foreign)."""
    try:
        with open(_path(root, k), "rb") as f:
            blob = f.read()
    except OSError:
        return None
    head = _MAGIC + k.encode() + b"\n"
    if not blob.startswith(head):
        return None
    rest = blob[len(head):]
    try:
        n_cubin, n_info, digest, rest = rest.split(b"\n", 3)
        n_cubin, n_info = int(n_cubin), int(n_info)
    except ValueError:
        return None
    if len(rest) != n_cubin + n_info or hashlib.sha256(rest).hexdigest().encode() != digest:
        return None
    try:
        return rest[:n_cubin], rest[n_cubin:].decode("utf-8")
    except UnicodeDecodeError:
        return None


def write(root: str, k: str, cubin: bytes, info: str) -> None:
    body = cubin + info.encode("utf-8")
    blob = (_MAGIC + k.encode() + b"\n" + f"{len(cubin)}\n{len(body) - len(cubin)}\n".encode()
            + hashlib.sha256(body).hexdigest().encode() + b"\n" + body)
    path = _path(root, k)
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path), prefix=".tmp-")
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(blob)
            os.replace(tmp, path)
        except BaseException:
            try:
                os.unlink(tmp)
            except OSError:
                pass
            raise
    except OSError:
        pass   # a cache that cannot be written costs only the next assembly
