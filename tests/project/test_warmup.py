"""Compiling ahead: `pubsub warmup`, the compile watch, the kernel cache's place and its clearing.

A warm-up from an empty cache (a minute or two) is exercised by
tests/project/test_packaging.py, on a fresh installation, as a user runs it; there
every service's start and first batches then compile nothing
(tests/support/first_batches.py).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import numba
import pytest
from click.testing import CliRunner

import fastpubsub
from fastpubsub.cli import main
from fastpubsub.runtime.compiles import WarmUp
from fastpubsub.services import warmup


def test_the_kernel_cache_defaults_to_a_user_cache_directory_keyed_by_version_and_layout(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "NUMBA_CACHE_DIR"}
    env["XDG_CACHE_HOME"] = str(tmp_path)
    code = "import fastpubsub, numba.core.config as c; print(fastpubsub.numba_cache_dir()); print(c.CACHE_DIR)"
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True).stdout
    expected = str(tmp_path / "fastpubsub" / f"{fastpubsub.__version__}-{fastpubsub._layout()}" / "numba")
    assert out.split() == [expected, expected]
    env["NUMBA_CACHE_DIR"] = str(tmp_path / "mine")  # a user's choice wins
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True).stdout
    assert out.split() == [str(tmp_path / "mine")] * 2


def test_the_layout_digest_changes_when_a_module_moves(tmp_path, monkeypatch):
    """numba's cache refers to types by module path: a moved module must lead to another cache directory."""
    package = tmp_path / "pkg"
    (package / "a").mkdir(parents=True)
    (package / "a" / "m.py").write_text("")
    monkeypatch.setattr(fastpubsub, "__file__", str(package / "__init__.py"))
    before = fastpubsub._layout()
    (package / "b").mkdir()
    (package / "a" / "m.py").rename(package / "b" / "m.py")
    assert fastpubsub._layout() != before


def test_the_layout_digest_changes_when_a_module_changes(tmp_path, monkeypatch):
    """A kernel compiles in the njit functions it calls from other modules, and numba checks only its own file:
    an edit anywhere must lead to another cache directory, or callers would run the old callee."""
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "helper.py").write_text("def f(x):\n    return x\n")
    monkeypatch.setattr(fastpubsub, "__file__", str(package / "__init__.py"))
    before = fastpubsub._layout()
    assert fastpubsub._layout() == before
    (package / "helper.py").write_text("def f(x):\n    return x + 1\n")
    assert fastpubsub._layout() != before


def test_the_compile_watch_counts_compilations_not_cache_hits():
    seen = []

    @numba.njit
    def twice(x):
        return 2 * x

    with warmup.CompileWatch(lambda name, count: seen.append((name, count))) as watch:
        twice(1)
        twice(2)  # compiled already
        twice(1.5)  # a new signature
    twice(3j)  # not watched any more
    assert watch.compiled == 2
    assert [name for name, _ in seen] == [twice.py_func.__qualname__] * 2


def test_a_warm_up_on_a_thread_of_its_own_hands_back_what_it_compiled_or_what_it_raised():
    seen = []

    def warm(on_compile):
        seen.append(threading.current_thread().name)
        on_compile(1, 5, "matching", "scan", 1)
        return 1

    started = WarmUp(warm, lambda *args: seen.append(args))
    assert started.compiled() == 1 and started.compiled() == 1
    assert seen == ["warm-up", (1, 5, "matching", "scan", 1)]

    def broken(on_compile):
        raise OSError("the cache directory is not writable")

    with pytest.raises(OSError, match="not writable"):
        WarmUp(broken, print).compiled()


def test_a_warm_up_runs_every_step_and_reports_progress():
    steps = []
    report = warmup.warm_up(("dynamic",), warmup.STEPS, on_step=lambda i, n, name: steps.append((i, n, name)))
    assert steps == [(i + 1, len(warmup.STEPS), name) for i, name in enumerate(warmup.STEPS)]
    again = warmup.warm_up(("dynamic",), warmup.PROCESSOR_STEPS)
    assert again.compiled == 0 and again.steps == len(warmup.PROCESSOR_STEPS) and report.steps == len(warmup.STEPS)


def test_bad_algorithms_and_steps_are_refused():
    with pytest.raises(ValueError, match="unknown algorithm"):
        warmup.warm_up(("fastest",))
    with pytest.raises(ValueError, match="unknown warm-up step"):
        warmup.warm_up(("dynamic",), ("everything",))


def test_clearing_deletes_only_compiled_kernels_of_this_installation(tmp_path, monkeypatch):
    monkeypatch.setattr(warmup.numba_config, "CACHE_DIR", str(tmp_path))
    ours = [d for d in warmup.cache_directories() if str(d).startswith(str(tmp_path))]
    assert len(ours) >= 8  # one per package folder (engine, wire, processor, ...)
    for d in ours[:3]:
        d.mkdir(parents=True)
        (d / "k.py312.nbi").write_bytes(b"i")
        (d / "k.py312.1.nbc").write_bytes(b"c")
        (d / "keep.txt").write_text("not a kernel")
    other = tmp_path / "someone_else"
    other.mkdir()
    (other / "x.nbi").write_bytes(b"i")
    monkeypatch.setattr(warmup, "cache_directories", lambda: ours)  # leave the checkout's __pycache__ alone
    assert warmup.clear_cache() == 6
    assert all((d / "keep.txt").exists() and not list(d.glob("*.nb?")) for d in ours[:3])
    assert (other / "x.nbi").exists()


def test_the_command_validates_its_options_and_says_where_the_cache_is():
    runner = CliRunner()
    bad = runner.invoke(main, ["warmup", "--algorithm", "fastest"])
    assert bad.exit_code == 2 and "'fastest' is not one of" in bad.output
    bad = runner.invoke(main, ["warmup", "--runs", "-1"])
    assert bad.exit_code == 2 and "-1 is not in the range x>=0" in bad.output
    done = subprocess.run([sys.executable, "-m", "fastpubsub", "warmup"], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    assert f"numba cache: {fastpubsub.numba_cache_dir()}" in done.stderr
    assert "warmup: every kernel was already in the cache for dynamic in" in done.stdout
    assert f"{len(warmup.STEPS)}/{len(warmup.STEPS)}" in done.stderr  # the progress bar's last state


def test_kernels_are_cached_by_their_folder_inside_the_package_so_every_installation_of_the_same_sources_shares_them():
    """numba's own locator names a folder's cache by a hash of its absolute path: a second venv or a reinstalled
    wheel would compile every kernel again.  Ours names it by the folder's place in the package."""
    from numba.core import caching

    from fastpubsub import kernel_cache
    from fastpubsub.engine.kernels import scan

    kernel = next(getattr(scan, n) for n in dir(scan) if hasattr(getattr(scan, n), "_cache"))
    locator = caching.FunctionCache(kernel.py_func)._impl._locator  # what numba builds for a cached kernel
    assert isinstance(locator, kernel_cache.PackageCacheLocator)
    assert locator.get_cache_path() == os.path.join(warmup.numba_config.CACHE_DIR, "fastpubsub.engine.kernels")
    assert kernel_cache.package_subpath("/elsewhere/site-packages/x.py") != "fastpubsub.engine.kernels"
    assert kernel_cache.package_subpath(os.path.join(kernel_cache.PACKAGE, "wire", "k.py")) == "fastpubsub.wire"
    assert not kernel_cache.inside_package("/elsewhere/site-packages/x.py")  # a user's kernels: numba's locators


def test_two_processes_run_every_step_and_report_each_in_one_count():
    """``processes=2``: the second process's steps (the pattern and table services) reach the callbacks as the
    first's do, in one count (the cache is warm here, as after ``make install``: nothing compiles)."""
    steps = []
    report = warmup.warm_up(("dynamic",), ("event decoder", "pattern service", "table service"), processes=2,
                            on_step=lambda i, n, name: steps.append((i, n, name)))
    assert [i for i, _, _ in steps] == [1, 2, 3] and {n for _, n, _ in steps} == {3}
    assert sorted(name for _, _, name in steps) == ["event decoder", "pattern service", "table service"]
    assert report.steps == 3 and report.compiled == 0


def test_a_second_process_that_fails_fails_the_warm_up():
    with pytest.raises(RuntimeError, match="the second process failed: ValueError"):
        warmup.warm_up(("dynamic",), ("subscription decoder", "maintenance"), runs=-1, processes=2)
