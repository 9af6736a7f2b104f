"""The numba kernel of the pattern engine: one batch of a partition's events, in offset order.

Cayuga's per-event algorithm (EDBT 2006 section 3.2; the index design recovered
from its source, docs/patterns.md section 3): the Fabret matcher has already
said, per event, which nodes' static correlation holds (the affected nodes) and
which nodes' static post-selection holds; this kernel probes the live
instances of the affected nodes through a hash index on their bound values
(the dynamic index), evaluates the dynamic predicates, creates, advances and
kills instances, and writes witnesses.

Instance state is a structure of arrays with a free list; instances sit in
doubly linked lists, one per index key, found through an open-addressing hash
table.  Expiry (``within``) uses a 4-ary heap with lazy deletion.  The kernels
read named containers of arrays, as the matcher's do: the compiled automata
(:class:`AutomatonArrays`), the instance store (:class:`InstanceArrays`), the
event batch (:class:`BatchArrays`), the working buffers, the changes and the
witness rows.  The kernel runs without numba's reference-counting runtime (see
``process_kernel``).  Every buffer is sized by the caller from a bound checked
at each event: when a bound does not hold the kernel returns the index of the
event it stopped at, before touching it, and the caller grows the arrays and
resumes.

By concern: ``layout`` (constants and containers), ``lists`` (the dynamic index), ``heap`` (expiry),
``predicates`` (atoms, captures, aggregates), ``instances`` (an instance's life), ``starts`` (new instances)
and ``process`` (the batch).  The engine reads the package as one namespace (``from . import kernel as K``).
"""

from .layout import (A_LEFT, A_RIGHT, A_WIDTH, EMPTY, FN_AVG, FN_COUNT, FN_MAX, FN_MIN, FN_SUM, GROUP_BASE, H_ARITH,
                     H_AUX, H_IDX, H_KIND, H_OP, H_STATIC, MODE_DYNAMIC, MODE_NONE, MODE_STATIC, OP_FOLD, OP_NEXT,
                     OP_START, R_PI_DYN, R_PI_REST, R_PI_STATIC, R_THETA_DYN, R_THETA_REST, R_THETA_STATIC, R_UNTIL,
                     SRC_AGG, SRC_CONST, SRC_DUR, SRC_EVENT, SRC_INST, ST_AFFECTED, ST_BATCH, ST_CALL, ST_COMPLETED,
                     ST_DIRTY, ST_EXPIRED, ST_FOLDLIVE, ST_FREE, ST_HEAP, ST_KEYS, ST_KILLED, ST_LISTS, ST_LIVE,
                     ST_PROBES, ST_REFUSED, ST_SINK, ST_SIZE, ST_STARTED, ST_TOMB, ST_TRACK, ST_WIT, ST_WM, STEP_BASE,
                     STRIDE, AutomatonArrays, BatchArrays, ChangeArrays, GroupArrays, InstanceArrays, KernelScratch,
                     WitnessArrays)
from .lists import rebuild_lists
from .heap import HEAP_BASE, heap_push
from .instances import drop_pattern
from .starts import argsort_stable, group_starts
from .process import process_kernel
