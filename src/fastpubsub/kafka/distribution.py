"""Where the Apache Kafka jars come from: a user's unpacked distribution, or Maven Central through ``pom.xml``.

``pubsub broker`` (and so the demo and the tests) runs the real Apache Kafka, not a look-alike: what users run in
production is what exactly-once, compaction and fencing are proven on.  The server needs only its jars and a Java
runtime, so instead of a 120 MB download of the binary distribution the package carries a small ``pom.xml`` naming
the server, the console tools and log4j2's SLF4J binding, and Maven copies their runtime jars once per Kafka
version into ``$XDG_CACHE_HOME/fastpubsub/kafka-<version>/libs`` (``~/.cache/...``), outside the checkout, so a
new clone or a reinstall finds them there.

A user who already unpacked Apache Kafka points ``--kafka-home DIR`` (or ``FASTPUBSUB_KAFKA_HOME``) at it and its
``libs/`` is used as it is.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

#: Environment variable naming an unpacked Apache Kafka distribution (its ``libs/`` is used).
KAFKA_HOME_ENV = "FASTPUBSUB_KAFKA_HOME"


class MissingTool(RuntimeError):
    """``java`` or ``mvn`` is not installed: the message says what to install."""


def pom_text() -> str:
    return resources.files(__package__).joinpath("pom.xml").read_text()


def pinned_version() -> str:
    """The Apache Kafka version ``pom.xml`` pins."""
    match = re.search(r"<kafka\.version>([^<]+)</kafka\.version>", pom_text())
    assert match, "pom.xml names no kafka.version"
    return match.group(1)


def cache_root() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "fastpubsub"


@dataclass(frozen=True)
class Distribution:
    """A directory of Apache Kafka jars and the version they are."""

    libs: Path
    version: str

    @property
    def classpath(self) -> str:
        return str(self.libs / "*")

    def java(self, main: str, *args: str, heap: str | None = None, properties: dict[str, str] | None = None,
             argfile: Path | None = None) -> list[str]:
        """The command line running ``main`` of these jars.

        With ``argfile``, ``main`` and ``args`` go into that file (readable by its owner only) and the command line
        names only the file (the Java launcher's ``@file``): any local user reads a process's command line in
        ``/proc/<pid>/cmdline``, so arguments that hold a secret must not be on it (nor in the JVM's performance
        data file, which records them too: ``-XX:-UsePerfData``).  The caller removes the file.  JVM options in
        ``KAFKA_OPTS`` go on every command line, as Kafka's own scripts pass them.
        """
        cmd = [java_executable()]
        if heap:
            cmd += [f"-Xms{heap}", f"-Xmx{heap}"]
        cmd += shlex.split(os.environ.get("KAFKA_OPTS", ""))
        cmd += [f"-D{k}={v}" for k, v in (properties or {}).items()]
        if argfile is None:
            return cmd + ["-cp", self.classpath, main, *args]
        fd = os.open(argfile, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write("".join(f"{_argfile_quoted(a)}\n" for a in (main, *args)))
        os.chmod(argfile, 0o600)
        return cmd + ["-XX:-UsePerfData", "-cp", self.classpath, f"@{argfile}"]


def _argfile_quoted(arg: str) -> str:
    """One argument of a Java ``@file``: in double quotes, its backslashes and quotes escaped."""
    return '"' + arg.replace("\\", "\\\\").replace('"', '\\"') + '"'


def java_executable() -> str:
    """``$JAVA_HOME/bin/java`` or ``java`` on the PATH; :class:`MissingTool` otherwise."""
    home = os.environ.get("JAVA_HOME")
    if home and Path(home, "bin", "java").is_file():
        return str(Path(home, "bin", "java"))
    found = shutil.which("java")
    if not found:
        raise MissingTool("Apache Kafka needs a Java runtime, 17 or newer, and `java` is not on the PATH: install one "
                          "(Debian/Ubuntu: `apt-get install openjdk-17-jre-headless`) or set JAVA_HOME")
    return found


def _version_of(libs: Path) -> str | None:
    for jar in libs.glob("kafka_2.13-*.jar"):
        match = re.fullmatch(r"kafka_2\.13-(\d[^-]*(?:-\w+)?)\.jar", jar.name)
        if match:
            return match.group(1)
    for jar in libs.glob("kafka-server-*.jar"):
        match = re.fullmatch(r"kafka-server-(\d[\w.\-]*?)\.jar", jar.name)
        if match:
            return match.group(1)
    return None


def from_home(home: str | Path) -> Distribution:
    """An unpacked Apache Kafka distribution (``kafka_2.13-4.x.y/``): its ``libs/``."""
    home = Path(home).expanduser()
    libs = home / "libs"
    version = _version_of(libs) if libs.is_dir() else None
    if version is None:
        raise FileNotFoundError(f"{home} is not an unpacked Apache Kafka distribution: no libs/kafka_2.13-*.jar in it")
    return Distribution(libs, version)


def cached(version: str | None = None) -> Distribution | None:
    """The jars Maven copied for ``version`` (the pinned one by default), if they are complete."""
    version = version or pinned_version()
    libs = cache_root() / f"kafka-{version}" / "libs"
    if (libs.parent / "complete").is_file() and _version_of(libs) == version:
        return Distribution(libs, version)
    return None


def fetch(version: str | None = None, quiet: bool = False) -> Distribution:
    """Copy the pinned Apache Kafka's runtime jars from Maven Central into the cache, once per version.

    Maven resolves ``pom.xml`` (its local repository, ``~/.m2``, keeps what it downloaded) and copies the jars into
    a temporary directory renamed into place, so an interrupted fetch leaves nothing that looks complete.
    """
    version = version or pinned_version()
    done = cached(version)
    if done is not None:
        return done
    mvn = shutil.which("mvn")
    if not mvn:
        raise MissingTool("fetching Apache Kafka needs Maven: install it (Debian/Ubuntu: `apt-get install maven`), or "
                          "give an unpacked Apache Kafka with --kafka-home DIR (or FASTPUBSUB_KAFKA_HOME)")
    java_executable()
    target = cache_root() / f"kafka-{version}"
    work = target.with_name(target.name + f".partial-{os.getpid()}")
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    pom = work / "pom.xml"
    pom.write_text(re.sub(r"<kafka\.version>[^<]+</kafka\.version>", f"<kafka.version>{version}</kafka.version>",
                          pom_text()))
    cmd = [mvn, "-B", "-q", "-f", str(pom), "dependency:copy-dependencies", "-DincludeScope=runtime",
           f"-DoutputDirectory={work / 'libs'}"]
    if not quiet:
        print(f"fetching Apache Kafka {version} with Maven into {target} ...", file=sys.stderr, flush=True)
    result = subprocess.run(cmd, stdin=subprocess.DEVNULL, capture_output=True, text=True)
    if result.returncode != 0:
        shutil.rmtree(work, ignore_errors=True)
        detail = ((result.stdout or "") + (result.stderr or ""))[-2000:]
        raise RuntimeError(f"Maven could not fetch Apache Kafka {version}: {detail}")
    (work / "complete").write_text(version + "\n")
    shutil.rmtree(target, ignore_errors=True)
    work.rename(target)
    return Distribution(target / "libs", version)


def resolve(kafka_home: str | Path | None = None, fetch_missing: bool = True) -> Distribution:
    """The distribution to run: ``kafka_home``, else ``FASTPUBSUB_KAFKA_HOME``, else the cache (fetched if missing)."""
    home = kafka_home or os.environ.get(KAFKA_HOME_ENV)
    if home:
        return from_home(home)
    found = cached()
    if found is not None:
        return found
    if not fetch_missing:
        raise FileNotFoundError(f"Apache Kafka {pinned_version()} is not in {cache_root()}: run `make install` or "
                                "`pubsub broker --fetch-only`")
    return fetch()
