"""Everything that decides *where* subscriptions are filed (Fabret et al., sections 3 and 4).

* ``statistics``: the event statistics (mu, nu) the model reads, from a snapshot or collected online;
* ``constants``: schema width, packed schemas, the safety margin;
* ``model``: the cost model of equation 3.1 (:class:`~.model.CostModel`) and its saved calibration;
* ``calibration``: ``python -m fastpubsub.engine.costmodel.calibration [--save]`` measures the constants here;
* ``probabilities``: nu and mu from the event statistics, and when to adopt online statistics;
* ``greedy``: the static configuration of section 3.2 and the best clustering instance;
* ``maintenance``: the dynamic algorithm of section 4.

The index (engine/algorithms/conjunction_index.py) applies the decisions; this package
reads it only through its methods.
"""
