"""fastpubsub: a content-based publish/subscribe stream processor on Kafka.

The sub-packages are the architecture, and imports run one way, top to bottom
(checked by import-linter, contracts in pyproject.toml):

* ``cli``: the ``pubsub`` command (``python -m fastpubsub``);
* ``processor``: the service, a batch flowing inputs -> decode -> match -> encode -> deliver;
  ``stats_job``: the Spark statistics job (the two never import each other);
* ``kafka``: every Kafka client from one factory, delivery, dead letters, queue bounds, topics;
* ``wire``: what travels on the topics (Avro schemas as package data, codecs, topic names);
* ``language``: the subscription text language;
* ``engine``: the matcher library (no Kafka, no Spark); its ``__init__`` is its public API.
"""

import os
import sys

__version__ = "0.1.0"


def numba_cache_dir() -> str:
    """Where numba keeps fastpubsub's compiled kernels: ``NUMBA_CACHE_DIR`` if set, else a user cache directory.

    The default, ``$XDG_CACHE_HOME/fastpubsub/<version>/numba`` (``~/.cache/...``),
    lies outside site-packages, so that reinstalling the same version keeps
    the kernels ``pubsub warmup`` compiled (numba checks each kernel against
    a hash of its source file), and a read-only installation still gets a
    cache.  Set before numba is imported, as numba reads it then.
    """
    if "NUMBA_CACHE_DIR" not in os.environ:
        base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
        os.environ["NUMBA_CACHE_DIR"] = os.path.join(base, "fastpubsub", __version__, "numba")
        if "numba" in sys.modules:  # imported before fastpubsub: its configuration has already been read
            from numba.core import config

            config.CACHE_DIR = config.CACHE_DIR or os.environ["NUMBA_CACHE_DIR"]
    return os.environ["NUMBA_CACHE_DIR"]


numba_cache_dir()
