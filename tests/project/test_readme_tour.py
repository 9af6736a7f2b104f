"""The README's five-minute tour, run as written against a real broker, so that it cannot rot.

The tour is the README's "A five-minute tour" section: its ``bash`` blocks are
run in order by one shell, with ``pubsub`` standing for this interpreter's
``python -m fastpubsub`` and ``PUBSUB_BOOTSTRAP_SERVERS`` pointing at the test
session's broker (the tour's own ``pubsub broker`` line is left out: the
fixture's broker stands in for it; its ``pubsub registry`` runs as written, on its own port 8081). A ``json`` block right after a ``bash``
block is what that block's last command prints: every line of it must be
printed, field for field (the events' timestamps aside, which are the time
of the run).
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
TOUR_HEADING = "## A five-minute tour"
BLOCK = re.compile(r"^```(\w*)\n(.*?)^```", re.S | re.M)
#: Fields that hold the time of the run, not of the tour.
VOLATILE = {"ts", "start_ts", "end_ts"}
#: Topics the services create, left by earlier tests of the session: the tour starts without them.
SERVICE_TOPICS = ("pubsub.changelog.patterns", "pubsub.table-schemas", "pubsub.tables.stock", "pubsub.changelog.tables.stock",
                  "pubsub.reformulated")
TIMEOUT = 420  # seconds for the whole tour: services start, numba kernels load from the cache


def tour_blocks(text: str) -> list[tuple[str, list[str]]]:
    """The tour's steps: (commands of a bash block, the JSON lines it prints), in order."""
    start = text.index(TOUR_HEADING)
    end = text.find("\n## ", start + len(TOUR_HEADING))
    section = text[start:end if end >= 0 else None]
    steps: list[tuple[str, list[str]]] = []
    previous_end = None
    for m in BLOCK.finditer(section):
        lang, body = m.group(1), m.group(2)
        if lang == "bash":
            steps.append((body, []))
        elif lang == "json" and steps and not steps[-1][1] and not section[previous_end:m.start()].strip():
            steps[-1][1].extend(line for line in body.splitlines() if line.strip())  # right after its bash block
        previous_end = m.end()
    return steps


def _stable(value):
    if isinstance(value, dict):
        return {k: _stable(v) for k, v in value.items() if k not in VOLATILE}
    if isinstance(value, list):
        return [_stable(v) for v in value]
    return value


def test_the_tour_is_found_and_shows_output():
    steps = tour_blocks(README.read_text(encoding="utf-8"))
    commands = [c for body, _ in steps for c in body.splitlines() if c.strip() and not c.startswith("#")]
    assert len(steps) >= 5, steps
    assert any(c.startswith("pubsub broker") for c in commands)
    assert sum(1 for _, expected in steps if expected) >= 4, "every subscription kind shows what it prints"
    for word in ("subscribe", "publish", "tail", "run", "patterns", "tables"):
        assert any(c.startswith(f"pubsub {word}") for c in commands), word


def _script(steps: list[tuple[str, list[str]]], outputs: Path) -> str:
    lines = ["set -e -o pipefail", f'pubsub() {{ "{sys.executable}" -m fastpubsub "$@"; }}']
    for i, (body, expected) in enumerate(steps):
        commands = [c for c in body.splitlines() if c.strip() and not c.lstrip().startswith("pubsub broker")]
        if not commands:
            continue
        for c in commands[:-1]:
            lines.append(c)
        last = commands[-1]
        if expected:
            lines.append(f"{{ {last}\n}} > {outputs / f'step{i}.out'}")
        else:
            lines.append(last)
    return "\n".join(lines) + "\n"


def _drop_service_topics(bootstrap: str) -> None:
    from fastpubsub.kafka import ClientFactory

    client = ClientFactory(bootstrap).admin()
    stale = [t for t in SERVICE_TOPICS if t in client.list_topics(timeout=10).topics]
    for future in (client.delete_topics(stale, operation_timeout=10).values() if stale else ()):
        future.result(10)
    deadline = time.monotonic() + 10
    while set(stale) & set(client.list_topics(timeout=10).topics) and time.monotonic() < deadline:
        time.sleep(0.1)


@pytest.mark.broker
def test_every_tour_command_runs_and_prints_what_the_readme_shows(bootstrap, tmp_path):
    _drop_service_topics(bootstrap)
    steps = tour_blocks(README.read_text(encoding="utf-8"))
    script = tmp_path / "tour.sh"
    script.write_text(_script(steps, tmp_path), encoding="utf-8")
    pythonpath = os.pathsep.join(p for p in (str(ROOT / "src"), os.environ.get("PYTHONPATH")) if p)
    env = {**os.environ, "PUBSUB_BOOTSTRAP_SERVERS": bootstrap, "PYTHONPATH": pythonpath}
    log = (tmp_path / "tour.log").open("w")
    proc = subprocess.Popen(["bash", str(script)], cwd=tmp_path, env=env, stdout=log, stderr=subprocess.STDOUT,
                            start_new_session=True)
    try:
        code = proc.wait(TIMEOUT)
    except subprocess.TimeoutExpired:
        code = None
    finally:
        # the services the tour left in the background: SIGTERM (each commits and exits), then SIGKILL
        for sig, grace in ((signal.SIGTERM, 30), (signal.SIGKILL, 0)):
            try:
                os.killpg(proc.pid, sig)
            except ProcessLookupError:
                break
            deadline = time.monotonic() + grace
            while time.monotonic() < deadline:
                try:
                    os.killpg(proc.pid, 0)
                except ProcessLookupError:
                    break
                time.sleep(0.5)
        log.close()
    output = (tmp_path / "tour.log").read_text(encoding="utf-8", errors="replace")
    assert code == 0, f"the tour {'timed out' if code is None else f'failed ({code})'}:\n{output[-4000:]}"
    for i, (_, expected) in enumerate(steps):
        if not expected:
            continue
        printed = [_stable(json.loads(line)) for line in (tmp_path / f"step{i}.out").read_text().splitlines()
                   if line.startswith("{")]
        for line in expected:
            assert _stable(json.loads(line)) in printed, f"the README shows {line}\nbut the tour printed {printed}"
