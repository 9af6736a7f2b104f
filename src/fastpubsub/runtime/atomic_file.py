"""A file replaced whole or not at all, safely in a directory others may write to.

The new content goes to a temporary file in the same directory, created
exclusively under a random name (``mkstemp``: ``O_CREAT|O_EXCL|O_NOFOLLOW``),
so that a link planted there, under any name, is neither followed
nor overwritten; it is fsynced, renamed over the target (a link at the target
is itself replaced, not what it points to), and the directory is fsynced, so
that a crash or a power cut leaves the old file or the new one.  The
processor's snapshots and the statistics job's output file are written so.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Iterable


def write_atomically(target: str | Path, parts: Iterable[bytes | memoryview], mode: int = 0o600) -> None:
    """Replace ``target`` with the concatenation of ``parts`` (written in order, none copied together); the new
    file has ``mode`` (private unless told otherwise)."""
    target = Path(target)
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
    try:
        os.fchmod(fd, mode)
        with os.fdopen(fd, "wb") as f:
            for part in parts:
                f.write(part)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    fd = os.open(target.parent, os.O_RDONLY)
    try:
        os.fsync(fd)  # the rename itself survives a power cut
    finally:
        os.close(fd)
