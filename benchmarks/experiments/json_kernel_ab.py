"""The JSON kernel of another git revision beside this tree's, in one process, on citylots-like lines.

    python -m benchmarks.experiments.json_kernel_ab [--base-ref main] [--kinds exact,arrays] [--events 50000] [--rounds 4]
        [--ours-first]

The base revision's ``wire/json_kernel.py`` is loaded as a module of its own (``git show``); per kind of
``benchmarks.peers.citylots``, alternating rounds time the kernel alone (``decode_json`` on batches of 1,000 lines
with the kind's wanted paths) and the whole fastpubsub side of ``benchmarks.peers.event_ruler``
(``run_fastpubsub``, ``decode_events``' kernel swapped), after checking both kernels give the same output and the
planted counts.  Prints the best of the rounds per side, and their median, with the load average.

The kernel compiled first in the process can run faster than an identical one compiled after it (an A/A run,
``--base-ref HEAD``, shows by how much): the base's is compiled first unless ``--ours-first``; run both ways and
compare each side in the same place.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]


def load_base(ref: str):
    """``wire/json_kernel.py`` at ``ref`` as a module (its relative imports made absolute)."""
    text = subprocess.run(["git", "-C", str(ROOT), "show", f"{ref}:src/fastpubsub/wire/json_kernel.py"],
                          check=True, capture_output=True, text=True).stdout
    text = text.replace("from .", "from fastpubsub.wire.")
    path = Path(tempfile.mkdtemp(prefix="json-kernel-base-")) / "json_kernel_base.py"
    path.write_text(text)
    spec = importlib.util.spec_from_file_location("json_kernel_base", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--base-ref", default="main")
    ap.add_argument("--kinds", default="exact,prefix-ignore-case,numeric,arrays")
    ap.add_argument("--events", type=int, default=50_000)
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("--ours-first", action="store_true", help="compile this tree's kernel before the base's")
    args = ap.parse_args(argv)

    from benchmarks.peers import citylots, event_ruler
    from fastpubsub.engine import Matcher
    from fastpubsub.services.events.decode import ReferencedAttributes
    from fastpubsub.wire import event_decoder, json_kernel
    from fastpubsub.wire.eventruler import rule_to_subscription

    base = load_base(args.base_ref)
    n = args.events
    lines = citylots.generate(n, 0).lines
    batches = [event_decoder.concatenated(lines[i:i + 1000]) for i in range(0, n, 1000)]
    swapped = event_decoder.decode_json
    print(f"load average at the start: {'%.2f, %.2f, %.2f' % os.getloadavg()}", flush=True)

    def kernel(module, wanted):
        out = []
        t = time.perf_counter()
        for buf, starts, ends in batches:
            out.append(module.decode_json(buf, starts, ends, np.ones(len(starts), bool), wanted))
        return time.perf_counter() - t, out

    try:
        for kind in args.kinds.split(","):
            patterns = [r.pattern for r in citylots.kind_rules(kind)]
            matcher = Matcher("dynamic")
            for i, p in enumerate(patterns):
                matcher.add(i, rule_to_subscription(p))
            matcher.flush()
            wanted = ReferencedAttributes(lambda: matcher)()
            compiled = [kernel(module, wanted)[1] for module in ([json_kernel, base] if args.ours_first else
                                                                 [base, json_kernel])]
            for (d1, p1, n1), (d2, p2, n2) in zip(*compiled):
                assert np.array_equal(d1, d2) and n1 == n2, kind
                assert all(np.array_equal(a, b, equal_nan=a.dtype.kind == "f") for a, b in zip(p1, p2)), kind
            times: dict[str, dict[str, list[float]]] = {"kernel": {"base": [], "ours": []},
                                                        "whole": {"base": [], "ours": []}}
            for r in range(args.rounds):
                sides = [("base", base), ("ours", json_kernel)]
                for name, module in sides if r % 2 == 0 else sides[::-1]:
                    times["kernel"][name].append(kernel(module, wanted)[0] / n * 1e6)
                    event_decoder.decode_json = module.decode_json
                    res = event_ruler.run_fastpubsub(lines, patterns, 1000, 1 if r == 0 else 0)
                    event_ruler.check(name, kind, res["counts"], citylots.planted_counts(kind, n))
                    times["whole"][name].append(1e6 / res["events_per_s"])
            shown = {part: {side: f"{min(v):.2f} (median {float(np.median(v)):.2f})" for side, v in sides_.items()}
                     for part, sides_ in times.items()}
            print(f"{kind}: µs per event, best of the rounds, kernel base {shown['kernel']['base']} ours "
                  f"{shown['kernel']['ours']}; whole side base {shown['whole']['base']} ours {shown['whole']['ours']} "
                  f"(load average {'%.2f, %.2f, %.2f' % os.getloadavg()})", flush=True)
    finally:
        event_decoder.decode_json = swapped
    return 0


if __name__ == "__main__":
    sys.exit(main())
