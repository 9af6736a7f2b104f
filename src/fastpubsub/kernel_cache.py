"""Where numba keeps fastpubsub's compiled kernels: a directory per package folder, named by its path inside the
package, so that every installation of the same sources shares them.

numba's own locator for ``NUMBA_CACHE_DIR`` names a folder's cache by a hash of its absolute path, so a second
virtual environment, a reinstalled wheel or a moved checkout compiles every kernel again (minutes on two cores),
though its sources are byte for byte the same.  The cache directory (``fastpubsub.numba_cache_dir``) already
carries a digest of the package's paths and sources, and numba checks each kernel against a content hash of its
file: naming the folders by their place in the package is enough to share what is the same and to keep apart what
is not.  Files outside the package (a user's own kernels) go to numba's usual locators.
"""

from __future__ import annotations

import os

from numba.core import config
from numba.core.caching import UserProvidedCacheLocator

PACKAGE = os.path.dirname(os.path.abspath(__file__))


class PackageCacheLocator(UserProvidedCacheLocator):
    """numba's ``NUMBA_CACHE_DIR`` locator, the folder named by its path inside the package."""

    def __init__(self, py_func, py_file):  # numba's signature
        super().__init__(py_func, py_file)
        self._cache_path = os.path.join(config.CACHE_DIR, package_subpath(py_file))

    @classmethod
    def from_function(cls, py_func, py_file):
        if not config.CACHE_DIR or not inside_package(py_file):
            return None
        return super().from_function(py_func, py_file)


def inside_package(py_file: str) -> bool:
    return os.path.abspath(py_file).startswith(PACKAGE + os.sep)


def package_subpath(py_file: str) -> str:
    """``engine/kernels/scan.py`` -> ``fastpubsub.engine.kernels``: one flat folder per package folder."""
    folder = os.path.relpath(os.path.dirname(os.path.abspath(py_file)), os.path.dirname(PACKAGE))
    return folder.replace(os.sep, ".")


def install() -> None:
    """Put the locator first in numba's list (numba asks each in turn; the first that takes a file wins).  A list
    the user gave (``NUMBA_CACHE_LOCATOR_CLASSES``) is left as it is."""
    from numba.core import caching

    impl = getattr(caching, "CacheImpl", None) or getattr(caching, "_CacheImpl")  # renamed in numba 0.61
    if not config.CACHE_LOCATOR_CLASSES and PackageCacheLocator not in impl._locator_classes:
        impl._locator_classes.insert(0, PackageCacheLocator)
