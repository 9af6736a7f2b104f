"""The user docs (README.md, docs/*.md) describe the product: no run diary, no dead link, no made-up command."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]

#: How the work went belongs in git history, not in the docs.
NARRATION = {
    "a session number": re.compile(r"\b[Ss]ession \d"),
    "an issue number": re.compile(r"\b[Ii]ssue #?\d+"),
    "a clock time": re.compile(r"\b\d\d:\d\d(?:[–-]\d\d:\d\d)? UTC\b"),
    "a commit hash": re.compile(r"\b(?=[0-9a-f]*[a-f])(?=[0-9a-f]*\d)[0-9a-f]{7,40}\b"),
}

LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")
FENCE = re.compile(r"^```.*?^```", re.S | re.M)
INLINE = re.compile(r"`([^`]+)`")
MODULE_COMMAND = re.compile(r"python -m ((?:benchmarks|fastpubsub)(?:\.\w+)*)(.*)", re.S)
BENCH_COMMAND = re.compile(r"pubsub bench((?: [a-z0-9]+)+)")


def _ids(paths):
    return [str(p.relative_to(ROOT)) for p in paths]


def _commands(text: str) -> list[str]:
    """Commands quoted in a doc: inline code spans (they may wrap lines) and the lines of fenced blocks."""
    fenced = FENCE.findall(text)
    spans = INLINE.findall(FENCE.sub("", text))
    return [" ".join(s.split()) for s in spans] + [line for block in fenced for line in block.splitlines()]


def _module_source(module: str) -> str | None:
    """The source a ``python -m`` module's options can be declared in (a package: all of it), or None."""
    base = ROOT / ("benchmarks" if module.split(".")[0] == "benchmarks" else "src/fastpubsub")
    path = base.joinpath(*module.split(".")[1:])
    if path.with_suffix(".py").is_file():
        return path.with_suffix(".py").read_text(encoding="utf-8")
    if (path / "__main__.py").is_file():
        shared = list((ROOT / "src/fastpubsub/cli").glob("*.py")) if module.startswith("fastpubsub") else []
        return "\n".join(f.read_text(encoding="utf-8") for f in [*path.rglob("*.py"), *shared])
    return None


@pytest.mark.parametrize("doc", DOCS, ids=_ids(DOCS))
def test_a_doc_tells_no_history(doc):
    text = doc.read_text(encoding="utf-8")
    found = [f"{what}: {m.group(0)!r} (line {text.count(chr(10), 0, m.start()) + 1})"
             for what, pattern in NARRATION.items() for m in pattern.finditer(text)]
    assert not found, f"{doc.name} narrates how the work went: " + "; ".join(found)


@pytest.mark.parametrize("doc", DOCS, ids=_ids(DOCS))
def test_every_relative_link_and_image_exists(doc):
    text = FENCE.sub("", doc.read_text(encoding="utf-8"))
    missing = []
    for target in LINK.findall(text):
        if re.match(r"[a-z]+:", target) or target.startswith("#"):
            continue
        path = (doc.parent / target.split("#", 1)[0]).resolve()
        if not path.exists():
            missing.append(target)
    assert not missing, f"{doc.name} links to files that do not exist: {missing}"


@pytest.mark.parametrize("doc", DOCS, ids=_ids(DOCS))
def test_every_python_m_command_names_a_module_and_its_options(doc):
    bad = []
    for command in _commands(doc.read_text(encoding="utf-8")):
        m = MODULE_COMMAND.search(command)
        if not m:
            continue
        module, rest = m.group(1), m.group(2)
        if rest.startswith(".<"):  # a placeholder: python -m benchmarks.<name>
            continue
        code = _module_source(module)
        if code is None:
            bad.append(f"{module}: no such module")
            continue
        rest = re.split(r"[|;&#)]", rest, maxsplit=1)[0]
        for flag in re.findall(r"(?<![\w-])--[a-z][a-z0-9-]*", rest):
            if flag != "--help" and f'"{flag}"' not in code and f"'{flag}'" not in code:
                bad.append(f"{module} {flag}: no such option")
    assert not bad, f"{doc.name} cites commands that do not exist: {bad}"


@pytest.mark.parametrize("doc", DOCS, ids=_ids(DOCS))
def test_every_pubsub_bench_figure_exists(doc):
    from fastpubsub.cli.bench import bench_cmd

    choices = set(next(p for p in bench_cmd.params if p.name == "figures").type.choices)
    bad = [word for command in _commands(doc.read_text(encoding="utf-8"))
           for m in BENCH_COMMAND.finditer(command) for word in m.group(1).split() if word not in choices]
    assert not bad, f"{doc.name} cites `pubsub bench` figures that do not exist: {bad}"


SECTION_REFERENCE = re.compile(r'(?:docs/)?([a-z_]+\.md)[,\s]*\(?"([^"]+)"')


@pytest.mark.parametrize("doc", DOCS, ids=_ids(DOCS))
def test_every_section_a_doc_names_exists(doc):
    """``docs/benchmarks.md, "Restarts"``: the quoted title is a heading or a bold lead-in of that file."""
    bad = []
    for file, title in SECTION_REFERENCE.findall(doc.read_text(encoding="utf-8")):
        target = ROOT / "docs" / file
        title = " ".join(title.split())
        if not target.is_file():
            bad.append(f"{file}: no such file")
        elif not any(title in line for line in target.read_text(encoding="utf-8").splitlines()
                     if line.startswith("#") or "**" in line):
            bad.append(f'{file}, "{title}": no such section')
    assert not bad, f"{doc.name} names sections that do not exist: {bad}"
