"""The embedded Schema Registry: Apicurio Registry on loopback, what ``pubsub registry``, the demo and the tests run.

Confluent's own registry is not on Maven Central and Karapace is not on PyPI; Apicurio Registry is both on Central
and Confluent-compatible (its Confluent API is served at ``/apis/ccompat/v7``), so confluent-kafka's clients, Java
serializers and fastpubsub all talk to it as they would to Confluent's.  The pinned version is the last one built
for Java 17 (3.3.x needs Java 21).  Its whole application is one attached Maven artifact (``tar.gz:all``: a runner
jar and its ``lib/``), copied once into ``~/.cache/fastpubsub/apicurio-registry-<version>/`` like Kafka's jars.

Quarkus listens on 0.0.0.0 by default: both its HTTP and its management listeners are bound to 127.0.0.1 here.
Storage is in memory by default (ids are lost with the process), or ``kafkasql``: the registry keeps its journal in
topics of the given Kafka cluster, so ids survive a restart, which a deployment that keeps records needs (a record
whose schema id the registry forgot can no longer be read).

Apicurio starts with no compatibility rule (Confluent's default is ``BACKWARD``): :meth:`EmbeddedRegistry.start`
sets ``BACKWARD`` globally, so a producer's new version is checked the way users of Confluent's registry expect.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path

from .broker import HOST, child_preexec, free_port, port_in_use
from .distribution import MissingTool, cache_root, java_executable

VERSION = "3.0.9"
ARTIFACT = f"io.apicurio:apicurio-registry-app:{VERSION}:tar.gz:all"
#: Maven's dependency plugin 3.x reads the artifact's parent pom, which Central lacks; 2.8 does not.
DEPENDENCY_PLUGIN = "org.apache.maven.plugins:maven-dependency-plugin:2.8:copy"
CCOMPAT = "/apis/ccompat/v7"
DEFAULT_HEAP = "256m"
STORAGES = ("mem", "kafkasql")


class RegistryError(RuntimeError):
    """The registry could not be fetched or started, or stopped while it should have run: the message says why."""


def home(version: str = VERSION) -> Path:
    return cache_root() / f"apicurio-registry-{version}"


def runner_jar(version: str = VERSION) -> Path:
    return home(version) / f"apicurio-registry-app-{version}-runner.jar"


def cached(version: str = VERSION) -> Path | None:
    """The runner jar, if a complete copy is in the cache."""
    jar = runner_jar(version)
    return jar if (home(version) / "complete").is_file() and jar.is_file() else None


def fetch(quiet: bool = False) -> Path:
    """Copy the pinned Apicurio Registry from Maven Central into the cache, once; its runner jar.

    Unpacked in a temporary directory renamed into place: an interrupted fetch leaves nothing that looks complete.
    """
    done = cached()
    if done is not None:
        return done
    mvn = shutil.which("mvn")
    if not mvn:
        raise MissingTool("fetching Apicurio Registry needs Maven: install it (Debian/Ubuntu: `apt-get install maven`)")
    java_executable()
    target = home()
    work = target.with_name(target.name + f".partial-{os.getpid()}")
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    if not quiet:
        print(f"fetching Apicurio Registry {VERSION} with Maven into {target} ...", file=sys.stderr, flush=True)
    result = subprocess.run([mvn, "-B", "-q", DEPENDENCY_PLUGIN, f"-Dartifact={ARTIFACT}",
                             f"-DoutputDirectory={work}"], stdin=subprocess.DEVNULL, capture_output=True, text=True,
                            cwd=work)
    archives = list(work.glob("*.tar.gz"))
    if result.returncode != 0 or len(archives) != 1:
        shutil.rmtree(work, ignore_errors=True)
        detail = ((result.stdout or "") + (result.stderr or ""))[-2000:]
        raise RegistryError(f"Maven could not fetch {ARTIFACT}: {detail}")
    with tarfile.open(archives[0]) as tar:
        tar.extractall(work, filter="data")
    archives[0].unlink()
    if not (work / runner_jar().name).is_file():
        shutil.rmtree(work, ignore_errors=True)
        raise RegistryError(f"{ARTIFACT} holds no {runner_jar().name}")
    (work / "complete").write_text(VERSION + "\n")
    shutil.rmtree(target, ignore_errors=True)
    work.rename(target)
    return runner_jar()


class EmbeddedRegistry:
    """Apicurio Registry on 127.0.0.1, ready when its Confluent API answers.

    ``storage``: ``mem`` (the default; ids are lost on exit) or ``kafkasql`` (its journal in topics of the Kafka
    cluster at ``bootstrap_servers``: ids survive a restart).  ``port`` None: any free port.
    """

    def __init__(self, port: int | None = None, *, storage: str = "mem", bootstrap_servers: str | None = None,
                 heap: str = DEFAULT_HEAP, compatibility: str | None = "BACKWARD") -> None:
        if storage not in STORAGES:
            raise ValueError(f"storage {storage!r}: one of {', '.join(STORAGES)}")
        if storage == "kafkasql" and not bootstrap_servers:
            raise ValueError("kafkasql storage keeps the registry's journal on Kafka: give its bootstrap servers")
        self.port = port
        self.storage = storage
        self.bootstrap_servers = bootstrap_servers
        self.heap = heap
        self.compatibility = compatibility
        self.proc: subprocess.Popen | None = None
        self.dir: Path | None = None

    @property
    def url(self) -> str:
        """The Confluent-compatible API: what ``--schema-registry`` and confluent-kafka's clients take."""
        assert self.port is not None, "the registry has not started"
        return f"http://{HOST}:{self.port}{CCOMPAT}"

    def command(self, jar: Path, management_port: int) -> list[str]:
        props = {
            "quarkus.http.host": HOST, "quarkus.http.port": str(self.port),
            "quarkus.management.host": HOST, "quarkus.management.port": str(management_port),
            "quarkus.log.level": "WARN", "quarkus.banner.enabled": "false",
        }
        if self.storage == "kafkasql":
            props |= {"apicurio.storage.kind": "kafkasql",
                      "apicurio.kafkasql.bootstrap.servers": str(self.bootstrap_servers)}
        return [java_executable(), f"-Xmx{self.heap}", "-XX:TieredStopAtLevel=1", "-XX:+ExitOnOutOfMemoryError",
                *(f"-D{k}={v}" for k, v in props.items()), "-jar", str(jar)]

    def start(self, timeout: float = 120.0) -> "EmbeddedRegistry":
        try:
            jar = fetch()
            if self.port is None:
                self.port = free_port()
            elif port_in_use(self.port):
                raise RegistryError(f"port {self.port} on {HOST} already in use; choose another with --port")
            management = free_port()
            self.dir = Path(tempfile.mkdtemp(prefix="fastpubsub-registry-"))
            with open(self.dir / "registry.log", "ab") as out:
                self.proc = subprocess.Popen(self.command(jar, management), stdin=subprocess.DEVNULL, stdout=out,
                                             stderr=subprocess.STDOUT, preexec_fn=child_preexec, cwd=self.dir)
            self.wait_ready(timeout)
            if self.compatibility:
                self.request("PUT", "/config", {"compatibility": self.compatibility})
        except BaseException:
            self.stop()
            raise
        return self

    def request(self, method: str, path: str, body: object | None = None) -> object:
        """One call of the Confluent API (``path`` under ``/apis/ccompat/v7``), its JSON answer."""
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(self.url + path, data=data, method=method,
                                     headers={"Content-Type": "application/vnd.schemaregistry.v1+json"})
        with urllib.request.urlopen(req, timeout=10) as answer:
            return json.loads(answer.read() or b"null")

    def ready(self) -> bool:
        try:
            self.request("GET", "/subjects")
            return True
        except (OSError, urllib.error.URLError, ValueError):
            return False

    def wait_ready(self, timeout: float = 120.0) -> None:
        deadline = time.monotonic() + timeout
        while not self.ready():
            self._check_alive()
            if time.monotonic() > deadline:
                raise RegistryError(f"Apicurio Registry did not answer on {self.url} within {timeout:.0f}s; "
                                    f"its log:\n{self.log_tail()}")
            time.sleep(0.2)

    def _check_alive(self) -> None:
        if self.proc is not None and self.proc.poll() is not None:
            raise RegistryError(f"Apicurio Registry exited with status {self.proc.returncode} while starting; "
                                f"its log:\n{self.log_tail()}")

    def log_tail(self, lines: int = 20) -> str:
        if self.dir is None:
            return ""
        with contextlib.suppress(OSError):
            return "\n".join((self.dir / "registry.log").read_text(errors="replace").splitlines()[-lines:])
        return ""

    def wait(self) -> int:
        """Until the registry exits; its exit status."""
        assert self.proc is not None
        return self.proc.wait()

    def interrupt(self) -> None:
        """Ask the registry to exit, without waiting (safe in a signal handler)."""
        if self.proc is not None and self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                self.proc.terminate()

    def stop(self, timeout: float = 30.0) -> None:
        self.interrupt()
        if self.proc is not None:
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if self.dir is not None:
            shutil.rmtree(self.dir, ignore_errors=True)
            self.dir = None

    def __enter__(self) -> "EmbeddedRegistry":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
