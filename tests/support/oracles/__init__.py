"""The brute-force specifications the engines are tested against: plain Python, no index, no batching.

``patterns`` interprets pattern subscriptions event by event (docs/patterns.md
section 1.5); ``aggregates`` recomputes every aggregate and join subscription
from the whole table after each update (docs/aggregates.md).  Tests import them
as ``oracles.*`` (like ``naive``); a benchmark's ``--check`` run from the
checkout's root as ``tests.oracles.*``.  The package never imports them.
"""
