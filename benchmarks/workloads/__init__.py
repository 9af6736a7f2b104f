"""The engine on other published workloads: OpIndex's, Wu and Yu's, range-heavy intervals, sparse catalogues, ``in`` and ``prefix``."""
