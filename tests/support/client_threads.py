"""The threads of the Kafka clients in this process, so that a test module that leaves a client open is caught.

A confluent-kafka client runs native librdkafka threads (``rdk:main``, one ``rdk:broker...`` per broker connection)
until it is closed or freed; a kafka-python client runs Python threads of its own.  A test that leaves a client
referenced (a fixture, a service never stopped, a thread never joined) or held only by a reference cycle keeps
those threads, and a test process accumulates hundreds of them over the broker lane: each one polls its brokers,
costs memory, and keeps reconnecting to brokers the tests have stopped.  ``conftest.py`` compares the counts before
and after every module.
"""

from __future__ import annotations

import collections
import gc
import os
import threading
import time

#: Clients a module may leave running: two at most, so that a fault test's producers abandoned inside a call that
#: never returned (``kafka.delivery``) are tolerated, and a client left by every test of a module is not.  Counted
#: by client, not by thread: a librdkafka client runs one ``rdk:main`` and a thread per broker it knows.
LEFT_BEHIND_BOUND = 2
#: Seconds a closing client is given to end its threads (a service stopped at the end of a test may be closing one).
GRACE = 5.0


def client_threads() -> collections.Counter[str]:
    """Threads of Kafka clients by name: librdkafka's native ones (``/proc/self/task/*/comm`` starts with ``rdk:``)
    and kafka-python's (their code is in the ``kafka`` package)."""
    names: collections.Counter[str] = collections.Counter()
    for task in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{task}/comm") as f:
                name = f.read().strip()
        except OSError:  # ended meanwhile
            continue
        if name.startswith("rdk:"):
            names[name] += 1
    for thread in threading.enumerate():
        code = getattr(thread, "_target", None) or type(thread).run
        if getattr(code, "__module__", "").split(".")[0] == "kafka":
            names[f"kafka-python {thread.name}"] += 1
    return names


def clients(threads: collections.Counter[str]) -> int:
    """Clients among ``threads``: one ``rdk:main`` per librdkafka client, and each kafka-python thread as one."""
    return threads["rdk:main"] + sum(n for name, n in threads.items() if name.startswith("kafka-python"))


def left_behind(before: collections.Counter[str], bound: int = LEFT_BEHIND_BOUND,
                grace: float = GRACE) -> collections.Counter[str]:
    """The client threads running now that were not running ``before``, once unreachable clients are collected
    and closing ones have had up to ``grace`` seconds to end (waiting no longer once at most ``bound`` clients are left)."""
    deadline = time.monotonic() + grace
    while True:
        gc.collect()  # a client held only by a cycle (a callback that refers back to its owner) is freed here
        new = client_threads() - before
        if (clients(new) <= bound and (bound or not new)) or time.monotonic() > deadline:
            return new
        time.sleep(0.1)
