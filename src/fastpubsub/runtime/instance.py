"""A stable transactional id per processor instance.

A processor killed inside a transaction leaves it open until the broker's
``transaction.timeout.ms`` aborts it (60 s here): meanwhile read_committed consumers of its output stall at the last
stable offset, and the group's offsets for those partitions stay pending.  The next producer
that calls ``init_transactions`` with the *same* ``transactional.id`` ends it.
So a restarted instance must reuse its predecessor's id while concurrent
instances must not share one: each instance takes the lowest free slot number
on its host, held by an exclusive lock on a file that the OS releases when the
process dies, and uses ``<group>-<hostname>-<slot>``.
"""

from __future__ import annotations

import fcntl
import socket
import tempfile
from pathlib import Path
from typing import IO

LOCK_DIR = Path(tempfile.gettempdir()) / "pubsub-instance-locks"


class InstanceSlot:
    """Holds the slot's lock for the life of the process (or until :meth:`release`)."""

    def __init__(self, group_id: str, max_slots: int = 1024) -> None:
        LOCK_DIR.mkdir(parents=True, exist_ok=True)
        safe_group = "".join(c if c.isalnum() or c in "-_." else "_" for c in group_id)
        for slot in range(max_slots):
            handle: IO = open(LOCK_DIR / f"{safe_group}.{slot}.lock", "a")
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                handle.close()
                continue
            self.slot, self._handle = slot, handle
            self.transactional_id = f"{group_id}-{socket.gethostname()}-{slot}"
            return
        raise RuntimeError(f"no free instance slot for group {group_id!r} among {max_slots} on this host")

    def release(self) -> None:
        if not self._handle.closed:
            fcntl.flock(self._handle, fcntl.LOCK_UN)
            self._handle.close()
