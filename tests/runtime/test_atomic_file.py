"""A file replaced whole or not at all (``runtime.atomic_file``), in a directory others may write to."""

from __future__ import annotations

import stat

import pytest

from fastpubsub.runtime.atomic_file import write_atomically


def test_links_planted_at_the_predictable_names_are_neither_followed_nor_overwritten(tmp_path):
    victim = tmp_path / "victim"
    victim.write_bytes(b"not yours")
    shared = tmp_path / "shared"
    shared.mkdir()
    target = shared / "statistics.json"
    for name in ("statistics.json.tmp", ".statistics.json.tmp", "statistics.json"):
        (shared / name).symlink_to(victim)
    write_atomically(target, [b"new ", memoryview(b"content")], mode=0o644)
    assert victim.read_bytes() == b"not yours"
    assert not target.is_symlink() and target.read_bytes() == b"new content"
    assert stat.S_IMODE(target.stat().st_mode) == 0o644


def test_a_failed_write_leaves_the_old_file_and_no_temporary_one(tmp_path):
    target = tmp_path / "processor.snapshot"
    write_atomically(target, [b"old"])
    assert stat.S_IMODE(target.stat().st_mode) == 0o600

    def parts():
        yield b"half"
        raise OSError("disk full")

    with pytest.raises(OSError, match="disk full"):
        write_atomically(target, parts())
    assert target.read_bytes() == b"old" and [p.name for p in tmp_path.iterdir()] == ["processor.snapshot"]
