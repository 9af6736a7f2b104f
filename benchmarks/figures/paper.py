"""The values Fabret et al. (SIGMOD 2001) print in section 6.2, beside which ours are shown.

Their machine: one Pentium (i686) at 500 MHz, 1 GB RAM, Linux (section
6.1); timings taken in the workload generator's process, inter-process
communication included.  The figures themselves are plots without printed
values; only what the text states is here.  Keys are (figure, series, x).
"""

from __future__ import annotations

MACHINE = "single-CPU Pentium i686 at 500 MHz, 1 GB RAM (section 6.1)"

# Figure 3(a), section 6.2.1: events/s with 6,000,000 W0 subscriptions.
FIG3A_EVENTS_PER_S = {
    ("counting", 6_000_000): 1.1,
    ("propagation", 6_000_000): 124.0,
    ("propagation-wp", 6_000_000): 196.0,
    ("dynamic", 6_000_000): 602.0,
}

# Same configuration: time to find the matching subscriptions once the
# satisfied predicates are known (phase 2), ms per event; phase 1 took 1.3 ms
# for every algorithm.
PHASE2_MS = {"dynamic": 0.1, "propagation-wp": 3.53}
PHASE1_MS = 1.3

# Figure 4, section 6.2.2 (3M subscriptions at equilibrium, 50 changes/s):
# events/s in the last two hours, and the end-to-start ratio of no-change.
FIG4_FINAL_EVENTS_PER_S = {("W3-W4", "dynamic"): 350.0, ("W3-W4", "no-change"): 200.0}
FIG4_NO_CHANGE_END_RATIO = {"W3-W4": 0.5, "W5-W6": 0.8}


def fig3a(algorithm: str, n: int) -> float | None:
    return FIG3A_EVENTS_PER_S.get((algorithm, n))
