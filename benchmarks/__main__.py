"""``python -m benchmarks list``: every benchmark with its one-line description, grouped by folder.

The descriptions are the first lines of the modules' docstrings, read from the
source without importing it (a benchmark's imports can be heavy: Spark, numba).
A benchmark is a module that runs as ``python -m`` (it has a ``__main__``
block) in a folder below ``benchmarks/`` other than ``harness`` (the parts all
of them share); a folder's other modules are its shared parts, named after its
benchmarks.  ``suite`` runs the paper's figures in one command.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent
#: Folders whose modules are not benchmarks of their own.
NOT_BENCHMARKS = {"harness", "results"}


def summary(path: Path) -> str:
    """The first paragraph of a module's or package's docstring on one line ("" without one)."""
    doc = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8"))) or ""
    return " ".join(doc.strip().split("\n\n")[0].split())


def runnable(path: Path) -> bool:
    """Whether a module runs as ``python -m``: it has an ``if __name__ == "__main__":`` block."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return any(isinstance(node, ast.If) and "__main__" in ast.unparse(node.test) for node in tree.body)


def folders() -> list[Path]:
    """The folders of benchmarks, in name order."""
    return sorted(p for p in ROOT.iterdir()
                  if p.is_dir() and (p / "__init__.py").is_file() and p.name not in NOT_BENCHMARKS)


def modules(folder: Path) -> list[Path]:
    return sorted(p for p in folder.glob("*.py") if p.name != "__init__.py")


def benchmarks() -> dict[str, list[tuple[str, str]]]:
    """{folder: [(module, description), ...]} of the runnable modules, ``suite`` first under ``benchmarks``."""
    grouped = {"benchmarks": [("benchmarks.suite", summary(ROOT / "suite.py"))]}
    for folder in folders():
        grouped[folder.name] = [(f"benchmarks.{folder.name}.{p.stem}", summary(p)) for p in modules(folder) if runnable(p)]
    return grouped


def shared_parts(folder: str) -> list[str]:
    """The modules of ``folder`` that its benchmarks import rather than run."""
    return [p.stem for p in modules(ROOT / folder) if not runnable(p)]


def main(argv: list[str]) -> int:
    if argv != ["list"]:
        print("usage: python -m benchmarks list\n\n"
              "Lists every benchmark with its description; run one with python -m <module> --help.", file=sys.stderr)
        return 2
    for folder, listed in benchmarks().items():
        about = summary(ROOT / folder / "__init__.py") if folder != "benchmarks" else "the paper's figures in one run"
        print(f"{folder}/  {about}")
        width = max(len(m) for m, _ in listed)
        for module, description in listed:
            print(f"  {module:<{width}}  {description}")
        if folder != "benchmarks" and shared_parts(folder):
            print(f"  (shared parts, not run on their own: {', '.join(shared_parts(folder))})")
        print()
    print(f"harness/  {summary(ROOT / 'harness' / '__init__.py')}")
    print(f"  {', '.join(p.stem for p in modules(ROOT / 'harness'))}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
