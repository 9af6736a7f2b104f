"""fastpubsub: a content-based publish/subscribe stream processor on Kafka.

The sub-packages are the architecture, and imports run one way, top to bottom
(checked by import-linter, contracts in pyproject.toml; every module: docs/design/layout.md):

* ``cli``: the ``pubsub`` command (``python -m fastpubsub``);
* ``services``: the event processor, the pattern service and the table service, each a task of the runtime;
  ``stats_job``: the Spark statistics job (the two never import each other);
* ``runtime``: the one host loop the services run in: restore, batches, commits, replay, ``/metrics``;
* ``kafka``: every Kafka client from one factory, delivery, dead letters, queue bounds, admin, the embedded brokers;
* ``wire``: what travels on the topics (Avro schemas as package data, codecs, decoders, topic names);
* ``patterns``, ``aggregates``: the pattern and aggregate engines, and ``state``, their restorable state (no Kafka);
* ``language``: the subscription text languages; ``workloads``: the workload generators;
* ``engine``: the matcher library (no Kafka, no Spark); its ``__init__`` is its public API.
"""

import os
import sys

__version__ = "0.1.0"


def _layout() -> str:
    """A short digest of the package's module paths and sources.

    numba's cache index refers to types by module path, and checks only the stamp of a kernel's own file, while a
    kernel compiles in the njit functions it calls from other modules: an edit to one of those would otherwise
    leave callers compiled against the old code (a wrong result or a crash, not a recompilation).
    """
    import hashlib

    root = os.path.dirname(os.path.abspath(__file__))
    paths = sorted(os.path.relpath(os.path.join(d, f), root) for d, _, files in os.walk(root)
                   for f in files if f.endswith(".py"))
    digest = hashlib.sha1("\n".join(paths).encode())
    for path in paths:
        with open(os.path.join(root, path), "rb") as f:
            digest.update(f.read())
    return digest.hexdigest()[:8]


def numba_cache_dir() -> str:
    """Where numba keeps fastpubsub's compiled kernels: ``NUMBA_CACHE_DIR`` if set, else a user cache directory.

    The default, ``$XDG_CACHE_HOME/fastpubsub/<version>-<layout>/numba`` (``~/.cache/...``),
    lies outside site-packages, so that reinstalling the same version keeps
    the kernels ``pubsub warmup`` compiled (numba checks each kernel against
    a hash of its source file), and a read-only installation still gets a
    cache.  ``<version>`` carries a digest of the package's module paths: numba pickles the types a kernel
    takes by module path, so a cache written before a module moved would fail to load, not merely miss.  Set before numba is imported, as numba reads it then.
    """
    if "NUMBA_CACHE_DIR" not in os.environ:
        base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
        os.environ["NUMBA_CACHE_DIR"] = os.path.join(base, "fastpubsub", f"{__version__}-{_layout()}", "numba")
        if "numba" in sys.modules:  # imported before fastpubsub: its configuration has already been read
            from numba.core import config

            config.CACHE_DIR = config.CACHE_DIR or os.environ["NUMBA_CACHE_DIR"]
    return os.environ["NUMBA_CACHE_DIR"]


numba_cache_dir()

from . import kernel_cache  # noqa: E402 - after numba_cache_dir: numba reads NUMBA_CACHE_DIR when imported

kernel_cache.install()
