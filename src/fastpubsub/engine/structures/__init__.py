"""The engine's stores, flat arrays with their numba kernels: hash tables (``hashtable``), dense ids
(``idpool``), the predicate table and phase 1 (``predicates``), access keys (``access_keys``), the cluster
arena (``cluster_store``), the prefix-only subscriptions (``prefix_groups``) and the tables of byte strings by
their hash (``byte_table``)."""
