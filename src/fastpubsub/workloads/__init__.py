"""Workload generators for tests, benchmarks and the demo: seeded, vectorised, in the engine's columnar form.

* ``fabret``: Fabret et al.'s generator (section 6.1, Table 1) and its presets W0-W6;
* ``sparse``: sparse, high-dimensional workloads (OpIndex's synthetic data, an e-commerce catalogue);
* ``intervals``: range-heavy workloads (the interval workload, Wu & Yu's section 3).

They feed the engine and are no part of it: this package imports the engine, never the other way round.
"""

from .fabret import PRESETS, generate_events, generate_subscriptions
from .sparse import SPARSE_PRESETS, SparseSpec, generate_sparse_events, generate_sparse_subscriptions

__all__ = [
    "PRESETS", "generate_events", "generate_subscriptions",
    "SPARSE_PRESETS", "SparseSpec", "generate_sparse_events", "generate_sparse_subscriptions",
]
