"""The matching algorithms, one module each, behind the :class:`~.index.Index` protocol.

* ``index``: what an algorithm implements, and the registry the matcher chooses from; ``builtin`` registers these:
* ``propagation``: one equality predicate as access key (Fabret et al., sections 2 and 6);
* ``counting``: the counting baseline (section 5);
* ``conjunction_index``: static and dynamic, filed under conjunctions of equalities (sections 3 and 4), with
  their paths: ``packed`` lists, ``direct`` predicate tests, the ``catchall`` list on bitmaps;
* ``bitmaps``: the bit-parallel path over value cells;
* ``amkh``: adaptive multiple key hashing (Wu & Yu);
* ``opindex``: OpIndex (Zhang, Chan and Tan).

Their shared kernels are in ``engine.kernels``, their stores in ``engine.structures``.
"""
