"""The built-in algorithms, registered in the order ``ALGORITHMS`` lists them (engine/algorithms/index.py).

An algorithm defined elsewhere registers itself the same way, from its own module.
"""

from __future__ import annotations

from .amkh import make_amkh
from .bitmaps import make_bitmaps
from .conjunction_index import DynamicIndex, StaticIndex, make_clustering
from .counting import make_counting
from .index import register
from .opindex import make_opindex
from .propagation import make_propagation

register("counting", make_counting)
register("propagation", make_propagation(False))
register("propagation-wp", make_propagation(True))
register("static", make_clustering(StaticIndex))
register("dynamic", make_clustering(DynamicIndex))
register("opindex", make_opindex)
register("bitmaps", make_bitmaps)
register("amkh", make_amkh)
