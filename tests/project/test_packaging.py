"""The published package works: the wheel holds every runtime file, and a plain install runs the demo from anywhere.

A real install, not an editable one: the wheel is built from this checkout
(``pip wheel --no-deps .``), installed into a new virtual environment (its
dependencies from the package index or pip's cache), and ``pubsub demo`` is
run from a directory that has nothing to do with the checkout, so nothing can
be read from the source tree by accident (the Avro schemas are package data).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SRC = ROOT / "src"

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    """Built from a copy of what the build reads, so that no build/ left in the checkout can add stale modules."""
    out, source = tmp_path_factory.mktemp("wheel"), tmp_path_factory.mktemp("source")
    shutil.copytree(SRC, source / "src", ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, source / name)
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--quiet", str(source), "-w", str(out)],
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    [path] = out.glob("fastpubsub-*.whl")
    print(f"\nwheel built in {time.monotonic() - started:.1f}s: {path.name}")
    return path


def runtime_files() -> set[str]:
    """Every file the package needs at run time: its modules and its schemas."""
    return {str(p.relative_to(SRC)) for pattern in ("*.py", "*.avsc") for p in (SRC / "fastpubsub").rglob(pattern)
            if "__pycache__" not in p.parts}


def test_the_wheel_holds_every_runtime_file_and_nothing_else_at_the_top(wheel):
    names = set(zipfile.ZipFile(wheel).namelist())
    files = runtime_files()
    assert any(f.endswith("wire/schemas/subscription.avsc") for f in files) and len(files) > 60
    assert files - names == set()
    assert {n for n in names if n.endswith(".py")} == {f for f in files if f.endswith(".py")}  # nothing stale either
    tops = {n.split("/")[0] for n in names if not n.split("/")[0].endswith(".dist-info")}
    assert tops == {"fastpubsub"}  # no engine/, processor/, benchmarks/ colliding in site-packages
    metadata = next(n for n in names if n.endswith(".dist-info/entry_points.txt"))
    assert "pubsub = fastpubsub.cli:main" in zipfile.ZipFile(wheel).read(metadata).decode()


@pytest.mark.timeout(1200)
def test_a_plain_install_runs_the_demo_from_an_unrelated_directory(wheel, tmp_path):
    """Installed as the README says (pip install, then `pubsub warmup`): the wheel finds every kernel the checkout's
    own warmup compiled (one cache per version and sources, whatever the installation: kernel_cache), the first
    demo compiles nothing and matches its first events within 30 s of the processor's launch; nor do the event
    processor's rebuild of 150,000 subscriptions, first batches, changes and snapshot, the pattern service's and
    the table service's batches and restores compile a kernel (tests/support/first_batches.py).  A warmup into an empty
    cache is what `make install` runs on every fresh machine."""
    env_dir, elsewhere = tmp_path / "env", tmp_path / "elsewhere"
    elsewhere.mkdir()
    started = time.monotonic()
    subprocess.run([sys.executable, "-m", "venv", str(env_dir)], check=True, timeout=300)
    done = subprocess.run([str(env_dir / "bin" / "python"), "-m", "pip", "install", "--quiet", str(wheel)],
                          capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stdout + done.stderr
    installed = time.monotonic() - started
    clean_env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV", "NUMBA_CACHE_DIR")}
    # the checkout's kernels in the user's cache first (seconds when `make install` has run), as a user who
    # tried the checkout before installing the wheel would have them
    ours = subprocess.run([sys.executable, "-m", "fastpubsub", "warmup"], cwd=ROOT, env=clean_env,
                          capture_output=True, text=True, timeout=900)
    assert ours.returncode == 0, ours.stdout[-3000:] + ours.stderr[-3000:]
    warmup = subprocess.run([str(env_dir / "bin" / "pubsub"), "warmup"], cwd=elsewhere, env=clean_env,
                            capture_output=True, text=True, timeout=900)
    assert warmup.returncode == 0, warmup.stdout[-3000:] + warmup.stderr[-3000:]
    assert "every kernel was already in the cache for dynamic" in warmup.stdout, warmup.stdout
    cache = re.search(r"^numba cache: .*$", ours.stderr, re.M)
    assert cache and cache.group(0) in warmup.stderr.splitlines(), warmup.stderr  # one directory for both
    print(f"\nwarmup: {warmup.stdout.strip()}")
    demo = subprocess.run([str(env_dir / "bin" / "pubsub"), "demo", "--subscriptions", "2000", "--events", "500",
                           "--no-stats"], cwd=elsewhere, env=clean_env, capture_output=True, text=True, timeout=600)
    print(f"\ninstalled in {installed:.1f}s, demo in {time.monotonic() - started - installed:.1f}s")
    assert demo.returncode == 0, demo.stdout[-3000:] + demo.stderr[-3000:]
    # the W0 and hand-written ones, and dave's on the registered topic's nested fields: a plain install has the
    # registry client and its Avro serializer (the demo's registered topic), nothing to add
    assert re.search(r"^  subscriptions +2,004 +\(processor holds 2,004\)", demo.stdout, re.M), demo.stdout
    assert re.search(r"^  registered orders +\d+ +on shop\.orders; (\d+) matched on nested fields \(expected \1\)",
                     demo.stdout, re.M), demo.stdout
    assert re.search(r"^  events +500 ", demo.stdout, re.M), demo.stdout
    assert "processor and broker stopped" in demo.stdout
    start = re.search(r"^    processor start .*\(numba kernels from the cache\); first events committed ([\d.]+)s",
                      demo.stdout, re.M)
    assert start and float(start.group(1)) < 30, demo.stdout
    location = subprocess.run([str(env_dir / "bin" / "python"), "-c", "import fastpubsub; print(fastpubsub.__file__)"],
                              cwd=elsewhere, env=clean_env, capture_output=True, text=True, check=True).stdout
    assert str(env_dir) in location and str(ROOT) not in location
    # every service's start and first batches (tests/support/first_batches.py, which draws its workloads from the tests'
    # generators, hence pytest and hypothesis, added after the demo): numba compiles nothing, all from the cache
    done = subprocess.run([str(env_dir / "bin" / "python"), "-m", "pip", "install", "--quiet", "pytest", "hypothesis"],
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    first = subprocess.run([str(env_dir / "bin" / "python"), str(Path(__file__).resolve().parents[1] / "support" / "first_batches.py")],
                           cwd=elsewhere, env=clean_env, capture_output=True, text=True, timeout=300)
    assert first.returncode == 0, first.stderr[-3000:]
    assert json.loads(first.stdout) == {"pubsub run": [], "pubsub patterns": [], "pubsub tables": []}
