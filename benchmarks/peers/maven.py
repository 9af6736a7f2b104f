"""Building a peer's jar with Maven: once, then again only when its sources change (``~/.m2`` keeps the
dependencies, so a rebuild works offline)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Callable, Iterable


def build(project: Path, jar: Path, extra_sources: Iterable[Path] = (), progress: Callable[[str], None] = print) -> Path:
    """``jar``, built by ``mvn package`` in ``project`` when it is missing or older than the pom, the project's
    ``src`` or ``extra_sources`` (files the build packs from elsewhere)."""
    sources = [project / "pom.xml", *project.joinpath("src").rglob("*"), *extra_sources]
    if jar.exists() and jar.stat().st_mtime >= max(p.stat().st_mtime for p in sources):
        return jar
    mvn = shutil.which("mvn")
    if mvn is None:
        raise RuntimeError(f"Maven (mvn) builds {jar.name}; it is not on PATH")
    progress(f"building {jar.name} (mvn -q -f {project / 'pom.xml'} package)")
    subprocess.run([mvn, "-q", "-f", str(project / "pom.xml"), "package"], check=True)
    return jar
