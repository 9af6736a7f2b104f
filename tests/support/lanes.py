"""A folder's lane: its conftest.py names one marker, and every test collected under the folder carries it.

``make test`` selects lanes by marker (conftest.py at the root lists them), so a file's folder says what it costs;
a folder whose files differ in cost marks none and leaves the markers to its tests.
"""

from __future__ import annotations

from typing import Callable

import pytest


def lane(marker: str) -> Callable[[pytest.Item], None]:
    """A ``pytest_itemcollected`` hook for a folder's conftest.py: pytest calls a conftest's hooks with the items
    under its own folder only."""
    mark = getattr(pytest.mark, marker)

    def pytest_itemcollected(item: pytest.Item) -> None:
        item.add_marker(mark)

    return pytest_itemcollected
