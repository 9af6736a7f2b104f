"""Which numba kernels compile while a service runs: after ``pubsub warmup`` none should (``services.warmup``)."""

from __future__ import annotations

import logging
import threading
import time
from typing import Callable

from numba.core import event as numba_event


class CompileWatch(numba_event.Listener):
    """Counts the kernels numba compiles (not those loaded from its cache) while installed.

    ``on_compile(name, count)`` is called as each compilation starts (the
    helpers a kernel calls are compiled with it and count too).
    """

    def __init__(self, on_compile: Callable[[str, int], None] | None = None) -> None:
        self.compiled = 0
        self._on_compile = on_compile
        self._registered = False

    def on_start(self, ev) -> None:
        self.compiled += 1
        if self._on_compile is not None:
            self._on_compile(getattr(ev.data["dispatcher"].py_func, "__qualname__", "?"), self.compiled)

    def on_end(self, ev) -> None:
        pass

    def __enter__(self) -> "CompileWatch":
        if not self._registered:
            numba_event.register("numba:compile", self)
            self._registered = True
        return self

    def __exit__(self, *exc) -> None:
        if self._registered:
            numba_event.unregister("numba:compile", self)
            self._registered = False


class WarmUp:
    """A task's warm-up (``Task.warm_up``: the kernels it needs, loaded or compiled) on a thread of its own, started
    at once; :meth:`compiled` waits for it and says how many kernels it compiled.

    A start waits on round trips to the brokers (record limits, the
    transactional producer, the topics, the statistics, the group), which
    leave the interpreter idle: the kernels load meanwhile instead of after
    them.
    """

    def __init__(self, warm_up: Callable[[Callable[..., None]], int], on_compile: Callable[..., None]) -> None:
        self._compiled: int | None = None
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, args=(warm_up, on_compile), name="warm-up", daemon=True)
        self._thread.start()

    def _run(self, warm_up: Callable[[Callable[..., None]], int], on_compile: Callable[..., None]) -> None:
        try:
            self._compiled = warm_up(on_compile)
        except BaseException as exc:  # noqa: BLE001 -- raised by compiled(), on the thread that waits for it
            self._error = exc

    def compiled(self) -> int:
        self._thread.join()
        if self._error is not None:
            raise self._error
        return self._compiled or 0


class Kernels:
    """A task's kernels through a service's life: the warm-up started on its thread (:meth:`warm_up`), waited for
    with each compiled kernel logged, a line a second at most (:meth:`wait`), and kernels compiled later (first use
    of a code path) logged too, so that a slow batch is never a silent one."""

    def __init__(self, log: logging.Logger, beat: Callable[[], None]) -> None:
        self.log, self._beat = log, beat
        self.compiled = 0  # numba kernels this run compiled (0 when all came from the cache)
        self._warming: WarmUp | None = None
        self._late = CompileWatch(self._compiled_late)
        self._logged = 0.0  # when the warm-up's last "compiling numba kernels" line was logged

    def warm_up(self, task_warm_up: Callable[[Callable[..., None]], int]) -> None:
        self._warming = WarmUp(task_warm_up, self._compiling)

    def wait(self) -> None:
        """Wait for the warm-up's kernels, from numba's cache or compiled; from then on later compiles are logged."""
        started = time.monotonic()
        self.compiled = compiled = self._warming.compiled()
        waited = time.monotonic() - started
        if compiled:
            self.log.info("kernels ready (%d compiled, the start waited %.1fs for them; `pubsub warmup` compiles "
                          "them once per installation)", compiled, waited)
        else:
            self.log.info("kernels ready (from numba's cache, the start waited %.1fs for them)", waited)
        self._late.__enter__()

    def close(self) -> None:
        self._late.__exit__()

    def _compiling(self, step: int, steps: int, name: str, kernel: str, count: int) -> None:
        """A kernel of the warm-up starts compiling (on the warm-up's thread): logged, a line a second at most."""
        self._beat()
        if time.monotonic() - self._logged >= 1.0 or count == 1:
            self._logged = time.monotonic()
            self.log.info("compiling numba kernels: step %d/%d (%s), %d compiled so far (%s)", step, steps, name,
                          count, kernel)

    def _compiled_late(self, kernel: str, count: int) -> None:
        self.compiled += 1
        self.log.info("compiling numba kernel %s (its first use since installation; `pubsub warmup` compiles it "
                      "ahead)", kernel)
