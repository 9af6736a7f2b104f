"""The benchmarks' index: ``python -m benchmarks list`` names every benchmark with its docstring's first line,
benchmarks/README.md names every one, the commands their docstrings quote exist, and results/runs holds raw JSON."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
BENCH = ROOT / "benchmarks"
COMMAND = re.compile(r"python -m (benchmarks(?:\.\w+)*)")


def _modules() -> list[Path]:
    return sorted(p for p in BENCH.rglob("*.py") if "results" not in p.relative_to(BENCH).parts)


def _runnable(path: Path) -> bool:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return any(isinstance(node, ast.If) and "__main__" in ast.unparse(node.test) for node in tree.body)


def _name(path: Path) -> str:
    return ".".join(path.relative_to(ROOT).with_suffix("").parts)


def test_every_module_has_a_docstring():
    missing = [_name(p) for p in _modules() if not ast.get_docstring(ast.parse(p.read_text(encoding="utf-8")))]
    assert not missing, f"benchmark modules without a docstring: {missing}"


def test_list_names_every_runnable_benchmark_with_its_description():
    done = subprocess.run([sys.executable, "-m", "benchmarks", "list"], cwd=ROOT, capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0, done.stderr
    listed = {}
    for line in done.stdout.splitlines():
        m = re.match(r"  (benchmarks\.[\w.]+)\s+(.+)$", line)
        if m:
            listed[m.group(1)] = m.group(2)
    expected = {_name(p): p for p in _modules()
                if _runnable(p) and p.parent != BENCH / "harness" and p.name != "__main__.py"}
    assert set(listed) == set(expected), (f"missing: {sorted(set(expected) - set(listed))}; "
                                          f"not benchmarks: {sorted(set(listed) - set(expected))}")
    for module, path in expected.items():
        first = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8"))).split("\n\n")[0]
        assert listed[module] == " ".join(first.split()), module
    assert "harness/" in done.stdout and "benchmarks.harness" not in done.stdout  # shared parts, not benchmarks


def test_the_readme_names_every_benchmark():
    readme = (BENCH / "README.md").read_text(encoding="utf-8")
    unnamed = [_name(p) for p in _modules() if _runnable(p) and p.parent != BENCH / "harness"
               and p.name != "__main__.py" and f"`{_name(p)}`" not in readme]
    assert not unnamed, f"benchmarks/README.md does not name {unnamed}"


def test_every_python_m_benchmarks_command_names_a_module():
    """In benchmarks/README.md, benchmarks/peers/README.md and every module's source (its docstring's examples)."""
    texts = [BENCH / "README.md", BENCH / "peers" / "README.md", *_modules()]
    bad = []
    for path in texts:
        for module in COMMAND.findall(path.read_text(encoding="utf-8")):
            target = ROOT.joinpath(*module.split("."))
            if not (target.with_suffix(".py").is_file() or (target / "__main__.py").is_file()):
                bad.append(f"{path.relative_to(ROOT)}: {module}")
    assert not bad, f"commands naming no module: {bad}"


def test_results_runs_hold_raw_json_only():
    runs = BENCH / "results" / "runs"
    tracked = subprocess.run(["git", "ls-files", str(runs)], cwd=ROOT, capture_output=True, text=True).stdout.split()
    other = [f for f in tracked if not f.endswith((".json", ".jsonl"))]
    assert not other, f"benchmarks/results/runs holds more than dated JSON: {other}"
    loose = [f for f in subprocess.run(["git", "ls-files", str(BENCH / "results")], cwd=ROOT, capture_output=True,
                                       text=True).stdout.split() if not f.startswith("benchmarks/results/runs/")]
    assert not loose, f"files in benchmarks/results outside runs/: {loose}"
