"""The user docs (README.md, docs/**/*.md) describe the product: no run diary, no dead link, no made-up command.

The documentation site is built strictly here (``-m docs`` selects it), and
the sources' docstrings and comments say what and why, never a measured figure.
"""

from __future__ import annotations

import ast
import io
import os
import re
import shutil
import subprocess
import sys
import tokenize
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]

#: A newcomer's page and a report, not manuals (the user guide and the design notes hold the rest).
MAX_LINES = {"README.md": 250, "docs/benchmarks.md": 700}

#: How the work went belongs in git history, not in the docs.
NARRATION = {
    "a session number": re.compile(r"\b[Ss]ession \d"),
    "an issue number": re.compile(r"\b[Ii]ssue #?\d+"),
    "a clock time": re.compile(r"\b\d\d:\d\d(?:[–-]\d\d:\d\d)? UTC\b"),
    # (a peer's version, ``github.com/owner/repo@<commit>``, is a version, not history)
    "a commit hash": re.compile(r"(?<!@)\b(?=[0-9a-f]*[a-f])(?=[0-9a-f]*\d)[0-9a-f]{7,40}\b"),
    "a tally of runs": re.compile(r"\b(?:in|from) (?:two|three|four|five|six|seven|\d) (?:alternating |later )?runs\b"
                                  r"|\((?:two|three|four|five|six|seven) runs\)|\b(?:a|the) second run\b"),
    "versions tried": re.compile(r"\bversions? (?:\w+ ){0,3}tried\b"),
}

LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")
FENCE = re.compile(r"^```.*?^```", re.S | re.M)
INLINE = re.compile(r"`([^`]+)`")
MODULE_COMMAND = re.compile(r"python -m ((?:benchmarks|fastpubsub)(?:\.\w+)*)(.*)", re.S)
BENCH_COMMAND = re.compile(r"python -m benchmarks\.suite((?: [a-z0-9]+)+)")


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
            if flag != "--help" and not re.search(rf"""["'/]{re.escape(flag)}["'/]""", code):  # click: "--x/--no-x"
                bad.append(f"{module} {flag}: no such option")
    assert not bad, f"{doc.name} cites commands that do not exist: {bad}"


@pytest.mark.parametrize("doc", DOCS, ids=_ids(DOCS))
def test_every_pubsub_bench_figure_exists(doc):
    from benchmarks.suite import bench_cmd

    choices = set(next(p for p in bench_cmd.params if p.name == "figures").type.choices)
    bad = [word for command in _commands(doc.read_text(encoding="utf-8"))
           for m in BENCH_COMMAND.finditer(command) for word in m.group(1).split() if word not in choices]
    assert not bad, f"{doc.name} cites `python -m benchmarks.suite` figures that do not exist: {bad}"


#: ``[the processor](../processor.md), "Sharding"``: a link to a page, then the title of a section of it.
LINKED_SECTION = re.compile(r'\]\(((?:\.\./)?(?:[\w-]+/)*[\w-]+\.md)(?:#[\w-]+)?\)[,\s]*\(?"([^"]+)"')
SECTION_REFERENCE = re.compile(r'(?:docs/)?((?:[a-z_-]+/)*[a-z_-]+\.md)[,\s]*\(?"([^"]+)"')


@pytest.mark.parametrize("doc", DOCS, ids=_ids(DOCS))
def test_every_section_a_doc_names_exists(doc):
    """``docs/benchmarks.md, "Current figures"`` or ``[the report](benchmarks.md), "Current figures"``: the quoted
    title is a heading or a bold lead-in of that file."""
    bad = []
    for file, title in SECTION_REFERENCE.findall(doc.read_text(encoding="utf-8")):
        target = ROOT / "docs" / file
        title = " ".join(title.split())
        if not target.is_file():
            bad.append(f"{file}: no such file")
        elif not any(title in line for line in target.read_text(encoding="utf-8").splitlines()
                     if line.startswith("#") or "**" in line):
            bad.append(f'{file}, "{title}": no such section')
    for file, title in LINKED_SECTION.findall(doc.read_text(encoding="utf-8")):
        target = (doc.parent / file).resolve()
        title = " ".join(title.split())
        if target.is_file() and not any(title in line for line in target.read_text(encoding="utf-8").splitlines()
                                        if line.startswith("#") or "**" in line):
            bad.append(f'{file}, "{title}": no such section')
    assert not bad, f"{doc.name} names sections that do not exist: {bad}"


#: A page cited by the sources, the tests or the benchmarks (``docs/processor.md``), and the section a quoted title
#: after it names (``docs/processor.md, "Batches and commits"``, ``docs/guide/security.md ("ACLs")``).
CITED_DOC = re.compile(r'\bdocs/((?:[\w-]+/)*[\w-]+\.md)(?:(?:[,\s]+\(?|\()"([^"]+)")?')
CITING = sorted(p for folder in ("src", "tests", "benchmarks") for p in (ROOT / folder).rglob("*")
                if p.suffix in (".py", ".md") and "corpus" not in p.parts)


def test_every_doc_the_code_cites_exists():
    """Pages move: a docstring, comment or error message that names a page or a section of one names what is there."""
    bad = []
    for path in CITING:
        for m in CITED_DOC.finditer(path.read_text(encoding="utf-8")):
            page, title = ROOT / "docs" / m.group(1), m.group(2) and " ".join(m.group(2).split())
            if not page.is_file():
                bad.append(f"{path.relative_to(ROOT)}: {m.group(0)!r}: no such page")
            elif title and not any(title in line for line in page.read_text(encoding="utf-8").splitlines()
                                   if line.startswith("#") or "**" in line):
                bad.append(f"{path.relative_to(ROOT)}: {m.group(0)!r}: no such section")
    assert not bad, "citations of docs that do not exist:\n" + "\n".join(bad)


def test_the_index_links_every_page():
    """docs/index.md is where a reader starts: every page of the site is one link away."""
    index = ROOT / "docs" / "index.md"
    linked = {(index.parent / target.split("#", 1)[0]).resolve() for target in LINK.findall(index.read_text("utf-8"))}
    pages = {page.resolve() for page in (ROOT / "docs").rglob("*.md")} - {index.resolve()}
    assert not pages - linked, f"docs/index.md does not link {sorted(str(p.relative_to(ROOT)) for p in pages - linked)}"


@pytest.mark.parametrize("name", sorted(MAX_LINES))
def test_a_doc_stays_within_its_length(name):
    lines = (ROOT / name).read_text(encoding="utf-8").count("\n")
    assert lines <= MAX_LINES[name], f"{name} has {lines} lines, at most {MAX_LINES[name]}: move detail to the docs site"


def _mkdocs_build(config: Path, site: Path) -> subprocess.CompletedProcess:
    """``mkdocs build --strict`` of ``config``; the API and CLI pages are read from this checkout's sources."""
    pythonpath = os.pathsep.join(p for p in (str(ROOT / "src"), os.environ.get("PYTHONPATH")) if p)
    env = {**os.environ, "PYTHONPATH": pythonpath, "NO_MKDOCS_2_WARNING": "1"}
    return subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--config-file", str(config),
                           "--site-dir", str(site)], cwd=config.parent, env=env, capture_output=True, text=True,
                          timeout=300)


@pytest.mark.docs
def test_the_docs_site_builds_strictly(tmp_path):
    """`make docs`: broken links, missing anchors, pages outside the nav and API references that do not resolve fail."""
    result = _mkdocs_build(ROOT / "mkdocs.yml", tmp_path / "site")
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-6000:]
    html = (tmp_path / "site" / "reference" / "cli" / "index.html").read_text(encoding="utf-8")
    assert "pubsub run" in html and "--bootstrap-servers" in html, "the CLI reference lists the commands and options"
    html = (tmp_path / "site" / "reference" / "engine" / "index.html").read_text(encoding="utf-8")
    assert "match_encoded" in html, "the API reference holds the Matcher's methods"


@pytest.mark.docs
def test_the_strict_build_fails_on_a_broken_link(tmp_path):
    """The strict build is what catches broken links: a copy of the site with one is refused."""
    copy = tmp_path / "copy"
    shutil.copytree(ROOT / "docs", copy / "docs")
    shutil.copy(ROOT / "mkdocs.yml", copy / "mkdocs.yml")
    (copy / "src").symlink_to(ROOT / "src")
    index = copy / "docs" / "index.md"
    index.write_text(index.read_text(encoding="utf-8") + "\n[gone](guide/no-such-page.md)\n", encoding="utf-8")
    result = _mkdocs_build(copy / "mkdocs.yml", tmp_path / "site")
    assert result.returncode != 0 and "no-such-page.md" in result.stderr, result.stderr[-3000:]


#: A measured figure: a time per operation, a rate, a speed-up, a share of time or a load average.
MEASURED = re.compile(
    r"\d[\d,.]*\s*(?:ns|µs|us)\b(?!\w)"                      # 56 ns, 1.45 µs
    r"|\d[\d,.]*\s*(?:events|records|subscriptions|adds|removes|updates|notifications)/s\b"  # 82,645 events/s
    r"|\d[\d,.]*\s+events per (?:CPU )?second"                 # 537,951 events per CPU second
    r"|\bcosts? (?:\w+ )?\d+[x×] "                               # costs numba 10x here
    r"|\d[\d.]*\s*[x×]\s+(?:faster|slower|as fast|the)"         # 3× faster
    r"|\d[\d.]*\s*%\s+(?:faster|slower|of (?:its|the) (?:matching|time|cpu))"   # 8% faster, 6% of its matching
    r"|\bload(?: average)? \d"                                 # load 0.6
    r"|\bmeasured(?: with| at|:)?\s+[\d,.]+"                   # measured 7 per 200,000
    r"|\b(?:took|costs?|cost)\s+(?:about\s+)?[\d,.]+\s*(?:s|ms)\b",  # took 1.2 s
    re.IGNORECASE)


def _docstrings_and_comments(path: Path):
    """(line, text) of every docstring and comment of a source file."""
    source = path.read_text(encoding="utf-8")
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
                    and isinstance(body[0].value.value, str):
                yield body[0].lineno, body[0].value.value
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if tok.type == tokenize.COMMENT:
            yield tok.start[0], tok.string


SOURCES = sorted((ROOT / "src").rglob("*.py"))


def test_the_figure_pattern_finds_measured_figures():
    for text in ("about 50 ns for an empty slice", "1.45 µs per W0 event", "82,645 events/s while busy",
                 "3× faster than dynamic", "at 1M 32 was 8% faster",
                 "537,951 against 359,949 events per CPU second", "which costs numba 10x here", "(load 0.6)", "measured 7 per 200,000"):
        assert MEASURED.search(text), text
    for text in ("RUN_MIN (256) entries", "every 30 s", "the 5 % of the rarest", "section 3.2", "width 30 %"):
        assert not MEASURED.search(text), text


def test_no_measured_figure_in_docstrings_or_comments():
    """Docstrings and comments say what and why; measured figures belong in docs/benchmarks.md, with their command."""
    found = [f"{path.relative_to(ROOT)}:{line}: {m.group(0)!r}" for path in SOURCES
             for line, text in _docstrings_and_comments(path) for m in MEASURED.finditer(text)]
    assert not found, "measured figures in docstrings or comments (move them to docs/benchmarks.md):\n" + "\n".join(found)


def test_the_readme_layout_names_every_package_of_the_tree():
    """The README's layout block lists exactly the folders under src/fastpubsub/, and on its tests/ line the folders
    of tests/ that are not named for one of them."""
    text = (ROOT / "README.md").read_text()
    block = text.split("## Layout", 1)[1].split("```", 2)[1]
    tests_line = next(line for line in block.splitlines() if line.startswith("tests/"))
    block = block.replace(tests_line, "")
    named = set(re.findall(r"\b([a-z_]+)/", block)) - {"src", "fastpubsub"}
    folders = {p.name for p in (ROOT / "src/fastpubsub").iterdir() if p.is_dir() and (p / "__init__.py").exists()}
    engine = {p.name for p in (ROOT / "src/fastpubsub/engine").iterdir() if p.is_dir() and (p / "__init__.py").exists()}
    assert named - engine == folders, f"README layout names {sorted(named - engine - folders)} that do not exist " \
                                      f"and misses {sorted(folders - named)}"
    assert named & engine <= engine
    test_folders = {p.name for p in (ROOT / "tests").iterdir() if p.is_dir() and (p / "__init__.py").exists()}
    assert set(re.findall(r"\b([a-z_]+)/", tests_line)) - {"tests"} == test_folders - folders
    assert test_folders & folders, "tests/ mirrors the package's folders"


LAYOUT = ROOT / "docs" / "design" / "layout.md"
LAYOUT_NAME = re.compile(r"[\w.]+(?:/[\w.]+)*(?:/|\.py)")


def _layout_block(first_line: str) -> str:
    """The fenced block of docs/design/layout.md whose first line is ``first_line``."""
    blocks = [block.split("\n", 1)[1].rsplit("\n", 1)[0] for block in FENCE.findall(LAYOUT.read_text(encoding="utf-8"))]
    return next(block for block in blocks if block.startswith(first_line + "\n"))


def _layout_paths(block: str) -> set[str]:
    """The paths an indented tree names: a line's leading ``name/`` or ``name.py`` tokens, under the folder of the
    nearest line above it that is indented less."""
    paths: set[str] = set()
    folders: list[tuple[int, str]] = []
    for line in block.splitlines():
        indent = len(line) - len(line.lstrip())
        names = []
        for token in line.split():
            if not LAYOUT_NAME.fullmatch(token):
                break
            names.append(token)
        if not names:
            continue
        while folders and folders[-1][0] >= indent:
            folders.pop()
        parent = folders[-1][1] if folders else ""
        for name in names:
            paths.add((parent + name).rstrip("/"))
            if name.endswith("/"):
                folders.append((indent, parent + name))
    return paths


def test_the_layout_page_names_every_folder_and_module_of_the_package():
    """docs/design/layout.md's tree of src/fastpubsub/ holds exactly its folders and its modules (a folder's line
    stands for its __init__.py)."""
    named = _layout_paths(_layout_block("src/fastpubsub/"))
    package = ROOT / "src" / "fastpubsub"
    real = {"src/fastpubsub"} | {str(p.relative_to(ROOT)) for p in package.rglob("*")
                                 if "__pycache__" not in p.parts and (p.is_dir() or p.suffix == ".py")
                                 and not (p.name == "__init__.py" and p.parent != package)}
    assert not named - real, f"docs/design/layout.md names what is not in the tree: {sorted(named - real)}"
    assert not real - named, f"docs/design/layout.md does not name {sorted(real - named)}"


@pytest.mark.parametrize("folder", ["tests", "benchmarks"])
def test_the_layout_page_names_every_folder_of_the_tests_and_the_benchmarks(folder):
    named = {path.split("/")[1] for path in _layout_paths(_layout_block(f"{folder}/")) if "/" in path}
    real = {p.name for p in (ROOT / folder).iterdir()
            if p.is_dir() and p.name != "__pycache__" or p.name in named and p.is_file()}
    assert named == real, f"docs/design/layout.md's {folder}/ names {sorted(named - real)} that do not exist " \
                          f"and misses {sorted(real - named)}"
