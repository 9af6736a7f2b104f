"""The package's folders are its architecture: imports run one way only, and no modules import each other.

The contracts live in pyproject.toml (``[tool.importlinter]``):

    cli > services | stats_job > runtime > kafka > wire > language | workloads > engine

(``services`` and ``stats_job`` independent of each other, as are ``language`` and ``workloads``), the engine, the
wire formats and the subscription language free of Kafka and Spark, ``benchmarks/`` outside the package (nothing
in it imports them), and the oracles in the tests (the package never imports ``tests/``).
``lint-imports`` checks them; this test runs it, shows that it does fail on a
broken contract, and checks on the import graph (grimp, which import-linter is
built on) that no group of modules imports itself round in a cycle.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import grimp

ROOT = Path(__file__).resolve().parents[2]
LINT_IMPORTS = Path(sys.executable).parent / "lint-imports"


def lint_imports(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(LINT_IMPORTS), "--no-cache", *args], cwd=ROOT, capture_output=True, text=True, timeout=300)


def test_the_contracts_of_pyproject_hold():
    done = lint_imports()
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Contracts: " in done.stdout and " broken" in done.stdout and "0 broken" in done.stdout, done.stdout


def test_lint_imports_fails_on_a_broken_contract(tmp_path):
    """The check can fail: a contract the code does break (the processor does import the engine) is reported."""
    config = tmp_path / "broken.toml"
    config.write_text("""
[tool.importlinter]
root_packages = ["fastpubsub"]

[[tool.importlinter.contracts]]
name = "an upside-down layering"
type = "layers"
layers = ["fastpubsub.engine", "fastpubsub.services"]
""")
    done = lint_imports("--config", str(config))
    assert done.returncode != 0 and "BROKEN" in done.stdout and "fastpubsub.services" in done.stdout, done.stdout


def _cycles(graph: grimp.ImportGraph) -> list[list[str]]:
    """Strongly connected groups of more than one module (Tarjan), i.e. modules that import each other, directly or round."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph.find_modules_directly_imported_by(v):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                out.append(sorted(group))

    for module in sorted(graph.modules):
        if module not in index:
            visit(module)
    return out


def test_no_modules_import_each_other():
    graph = grimp.build_graph("fastpubsub", cache_dir=None)
    assert len(graph.modules) > 50
    assert _cycles(graph) == []


def test_the_cycle_check_finds_a_cycle(tmp_path, monkeypatch):
    for name, body in {"a": "from pkg import b\n", "b": "from pkg import c\n", "c": "import pkg.a\n", "d": "import pkg.a\n"}.items():
        (tmp_path / "pkg").mkdir(exist_ok=True)
        (tmp_path / "pkg" / f"{name}.py").write_text(body)
    (tmp_path / "pkg" / "__init__.py").write_text("")
    monkeypatch.syspath_prepend(str(tmp_path))
    assert _cycles(grimp.build_graph("pkg", cache_dir=None)) == [["pkg.a", "pkg.b", "pkg.c"]]
