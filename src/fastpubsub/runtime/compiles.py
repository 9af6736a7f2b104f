"""Which numba kernels compile while a service runs: after ``pubsub warmup`` none should (``services.warmup``)."""

from __future__ import annotations

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
