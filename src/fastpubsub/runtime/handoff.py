"""Items of an iterator made on a thread of their own and handed over in order (a rebuild's read and decode stage).

A rebuild reads the subscriptions topic, decodes it in chunks and bulk-loads
each chunk into the matcher, in the order of the records (a later record of an
id replaces or removes an earlier one).  The loading has to stay on the
processor's thread, in order; reading and decoding the next chunk does not:
librdkafka fetches on its own threads, and the decoder's numba kernel (like
the cost model's assignment inside the bulk load) runs without the GIL.  So
:class:`Handoff` runs the read-and-decode iterator on a thread and hands its
chunks over one by one, at most ``depth`` ahead (memory: a chunk of a million
subscriptions' records is a few tens of MB).  Every chunk is handed over once,
in the order made; an exception of the iterator is raised by the consumer in
its place; :meth:`close` stops the thread and closes the iterator (so that it
runs its ``finally``: the rebuild's readers are closed there).
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from typing import Callable, Generic, Iterator, TypeVar

T = TypeVar("T")
log = logging.getLogger(__name__)

_DONE = object()


class _Failed:
    def __init__(self, exc: BaseException) -> None:
        self.exc = exc


class Handoff(Generic[T]):
    """Iterate ``make(stopped)`` on a thread; iterating this object yields its items in order.

    ``make`` gets a ``stopped()`` callable that turns true once the consumer
    has closed the hand-off (an iterator that blocks should look at it).
    ``idle`` is called about every ``beat`` seconds while the consumer waits
    for the next item (the processor's liveness heartbeat).
    """

    def __init__(self, make: Callable[[Callable[[], bool]], Iterator[T]], depth: int = 2,
                 idle: Callable[[], None] = lambda: None, beat: float = 1.0, name: str = "handoff") -> None:
        if depth < 1:
            raise ValueError(f"depth must be at least 1, got {depth}")
        self._queue: queue.Queue = queue.Queue(maxsize=depth)
        self._closed = threading.Event()
        self._idle, self._beat = idle, beat
        self._source = make(self._closed.is_set)
        self._finished = False
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def _put(self, item: object) -> bool:
        while not self._closed.is_set():
            try:
                self._queue.put(item, timeout=0.1)
                return True
            except queue.Full:
                continue
        return False

    def _run(self) -> None:
        try:
            for item in self._source:
                if not self._put(item):
                    break
            else:
                self._put(_DONE)
        except BaseException as exc:  # handed to the consumer, raised there
            self._put(_Failed(exc))
        finally:
            close = getattr(self._source, "close", None)
            if close is not None:
                close()

    def __iter__(self) -> Iterator[T]:
        while not self._finished:
            try:
                item = self._queue.get(timeout=self._beat)
            except queue.Empty:
                self._idle()
                continue
            if item is _DONE:
                self._finished = True
                return
            if isinstance(item, _Failed):
                self._finished = True
                raise item.exc
            yield item

    def close(self, timeout: float = 30.0) -> None:
        """Stop making items (those made and not taken are dropped) and wait for the thread to end.

        The wait is bounded: a reader stuck in a call that does not look at ``stopped()`` must not hang the
        processor's stop (the thread is a daemon; a warning says it was left behind)."""
        self._closed.set()
        deadline = time.monotonic() + timeout
        while self._thread.is_alive():
            if time.monotonic() > deadline:
                log.warning("%s: its thread did not end within %.0fs of close(); left behind", self._thread.name,
                            timeout)
                return
            try:
                while True:
                    self._queue.get_nowait()
            except queue.Empty:
                pass
            self._thread.join(timeout=0.1)

    def __enter__(self) -> "Handoff[T]":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
