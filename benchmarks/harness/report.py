"""What every benchmark run leaves behind: a CSV, a markdown table to paste into docs/benchmarks.md, a PNG.

Figures are drawn with matplotlib's Agg backend (no display needed).  The
machine and its load at the time (``/proc/loadavg``) go into every markdown
file: the development machine is shared, and a figure without its load
cannot be compared with a rerun.
"""

from __future__ import annotations

import csv
import json
import os
import platform
import time
from pathlib import Path
from typing import Any, Iterable, Sequence

#: Where runs write their raw results by default; a run worth keeping is filed under ``runs/`` with its date.
RESULTS = Path(__file__).resolve().parents[1] / "results"


def machine() -> str:
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next(line.split(":", 1)[1].strip() for line in f if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    try:
        with open("/proc/meminfo") as f:
            mem = f"{int(f.readline().split()[1]) / 2**20:.0f} GiB RAM"
    except OSError:
        mem = "? RAM"
    return f"{cpu}, {os.cpu_count()} CPUs, {mem}, Python {platform.python_version()}"


def load_average(when: bool = False) -> str:
    """The ``uptime`` load averages (1, 5, 15 min), and with ``when`` the UTC time.

    A figure's section goes into docs/benchmarks.md as it is, and the docs give no
    clock times (tests/project/test_docs.py): only the run's report.md says when it ran.
    """
    try:
        with open("/proc/loadavg") as f:
            load = ", ".join(f.read().split()[:3])
    except OSError:
        load = "?"
    at = f" at {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}" if when else ""
    return f"load average {load}{at}"


def load_numbers() -> str:
    """The load averages (1, 5, 15 min) alone, as a row's field: ``"1.02 0.98 0.91"``."""
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def write_json(data: Any, path: Path | str) -> None:
    """A run's results as indented JSON, its directory made first."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=1) + "\n")


def write_csv(rows: Sequence[dict[str, Any]], path: Path) -> None:
    columns: list[str] = []
    for row in rows:
        columns += [k for k in row if k not in columns]
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, columns)
        w.writeheader()
        w.writerows(rows)


def fmt(value: Any) -> str:
    if value is None or value == "":
        return "–"
    if isinstance(value, float):
        if value >= 100:
            return f"{value:,.0f}"
        return f"{value:.3g}"
    if isinstance(value, int):
        return f"{value:,}"
    return str(value)


def markdown_table(rows: Iterable[dict[str, Any]], columns: Sequence[tuple[str, str]]) -> str:
    """``columns``: (key, header) pairs."""
    lines = ["| " + " | ".join(h for _, h in columns) + " |", "|" + "---|" * len(columns)]
    lines += ["| " + " | ".join(fmt(r.get(k)) for k, _ in columns) + " |" for r in rows]
    return "\n".join(lines)


def line_plot(path: Path, series: dict[str, tuple[list[float], list[float]]], *, title: str, xlabel: str,
              ylabel: str, logy: bool = False, paper: dict[str, tuple[list[float], list[float]]] | None = None) -> None:
    """One line per series; the paper's printed values as hollow markers of the same colour."""
    fig, (ax,) = subplots(1)
    colours = {}
    for name, (xs, ys) in series.items():
        (line,) = ax.plot(xs, ys, marker="o", label=name)
        colours[name] = line.get_color()
    for name, (xs, ys) in (paper or {}).items():
        ax.plot(xs, ys, linestyle="none", marker="s", markerfacecolor="none", markersize=9,
                color=colours.get(name, "black"), label=f"{name} (paper, 2001)")
    if logy:
        ax.set_yscale("log")
    ax.set_title(title)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    save(fig, path)


def subplots(n: int, width: float = 7.0):
    """A figure of ``n`` axes side by side, drawn off-screen (Agg)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, n, figsize=(width * n if n > 1 else width, 4.5), squeeze=False)
    return fig, list(axes[0])


def save(fig, path: Path) -> None:
    import matplotlib.pyplot as plt

    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def write_markdown(path: Path, title: str, command: str, body: str) -> str:
    text = (f"### {title}\n\n* **Command:** `{command}`\n* **Machine:** {machine()}; {load_average()}\n\n{body}\n")
    path.write_text(text)
    return text
