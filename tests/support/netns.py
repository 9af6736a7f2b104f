"""Hosts of the test's own, in network namespaces: a cluster's nodes that a test can cut off from each other.

``Hosts.make(n)`` creates a switch namespace holding a bridge, ``n`` namespaces joined to it by veth pairs, each with
an address of a private /24 that nothing on this machine uses, and a veth of the test's own namespace on the same
bridge (the services and clients of the test reach the nodes through it).  Traffic goes between those addresses
only: the test's namespace gains the one route to that /24, nothing is forwarded elsewhere.

``partition(i)`` cuts node ``i`` off from the other nodes (a blackhole route to each of them in its namespace, and
to it in theirs), while the test's clients still reach every node: a node that cannot reach its peers, nor they it,
is the case Kafka's controller quorum and ISRs must handle.  Established connections see their packets vanish;
new ones fail at once.  ``heal(i)`` removes the routes.

Making namespaces needs root (``CAP_SYS_ADMIN``) and ``ip`` (iproute2).  When they cannot be made, ``Hosts.make``
returns the error instead, which the partition test reports as the reason it did not run.
"""

from __future__ import annotations

import contextlib
import os
import random
import subprocess
from dataclasses import dataclass, field

PREFIX = "fastpubsub-"


class NamespaceError(RuntimeError):
    """An ``ip`` command failed: its arguments and what it said."""


def ip(*args: str) -> str:
    done = subprocess.run(["ip", *args], capture_output=True, text=True)
    if done.returncode != 0:
        raise NamespaceError(f"ip {' '.join(args)}: {done.stderr.strip() or f'exit {done.returncode}'}")
    return done.stdout


def _free_subnet() -> str:
    """The first three octets of a 10.213.x.0/24 that no address or route of this machine touches."""
    used = ip("-o", "addr") + ip("route") + ip("-6", "route")
    for x in random.Random().sample(range(1, 255), 254):
        if f"10.213.{x}." not in used:
            return f"10.213.{x}"
    raise NamespaceError("no free 10.213.x.0/24")


def sweep_stale() -> None:
    """Remove the namespaces of test runs that were killed before they could (their pid, in the name, is gone)."""
    with contextlib.suppress(NamespaceError, FileNotFoundError):
        for line in ip("netns", "list").splitlines():
            name = line.split()[0] if line.split() else ""
            if not name.startswith(PREFIX):
                continue
            with contextlib.suppress(ValueError):
                pid = int(name[len(PREFIX):].split("-")[0])
                try:
                    os.kill(pid, 0)
                except ProcessLookupError:
                    with contextlib.suppress(NamespaceError):
                        ip("netns", "del", name)


@dataclass
class Hosts:
    """``n`` hosts (network namespaces) and the test's own namespace on one bridge; see the module's docstring."""

    tag: str
    subnet: str
    count: int
    namespaces: list[str] = field(default_factory=list)
    cut: dict[int, list[tuple[str, str]]] = field(default_factory=dict)  # node -> (namespace, address) blackholed

    @property
    def switch(self) -> str:
        return f"{PREFIX}{self.tag}-sw"

    @property
    def addresses(self) -> list[str]:
        return [f"{self.subnet}.{i + 1}" for i in range(self.count)]

    @classmethod
    def make(cls, count: int) -> "Hosts | str":
        """The hosts, or why they could not be made (the failing command and its error)."""
        sweep_stale()
        tag = f"{os.getpid()}-{random.Random().getrandbits(16):04x}"
        hosts = cls(tag, "", count)
        try:
            hosts.subnet = _free_subnet()
            hosts._build()
        except (NamespaceError, FileNotFoundError) as exc:
            hosts.remove()
            return str(exc)
        return hosts

    def _link(self, i: int | str) -> str:
        """Interface names fit the kernel's 15 characters: ``fp<4 hex>n<i>`` and its switch end with ``s``."""
        return f"fp{self.tag[-4:]}{'n' if isinstance(i, int) else ''}{i}"

    def _build(self) -> None:
        ip("netns", "add", self.switch)
        self.namespaces.append(self.switch)
        ip("-n", self.switch, "link", "add", "br0", "type", "bridge")
        ip("-n", self.switch, "link", "set", "br0", "up")
        for i, address in enumerate(self.addresses):
            ns = f"{PREFIX}{self.tag}-n{i + 1}"
            ip("netns", "add", ns)
            self.namespaces.append(ns)
            self._plug(self._link(i), ns, f"{address}/24")
        self._plug(self._link("c"), None, f"{self.subnet}.100/24")

    def _plug(self, link: str, namespace: str | None, address: str) -> None:
        """A veth pair: ``link`` in ``namespace`` (None: the test's own) with ``address``, its peer on the bridge."""
        ip("link", "add", link, "type", "veth", "peer", "name", link + "s")
        ip("link", "set", link + "s", "netns", self.switch)
        ip("-n", self.switch, "link", "set", link + "s", "master", "br0", "up")
        where = ("-n", namespace) if namespace else ()
        if namespace:
            ip("link", "set", link, "netns", namespace)
            ip(*where, "link", "set", "lo", "up")
        ip(*where, "addr", "add", address, "dev", link)
        ip(*where, "link", "set", link, "up")

    def node_namespace(self, i: int) -> str:
        return self.namespaces[i + 1]

    def partition(self, i: int) -> None:
        """Node ``i`` and the other nodes no longer reach each other; the test's namespace still reaches all."""
        assert i not in self.cut, f"node {i + 1} is already cut off"
        routes = []
        for j in range(self.count):
            if j != i:
                routes += [(self.node_namespace(i), self.addresses[j]), (self.node_namespace(j), self.addresses[i])]
        self.cut[i] = []
        for ns, address in routes:
            ip("-n", ns, "route", "add", "blackhole", f"{address}/32")
            self.cut[i].append((ns, address))

    def heal(self, i: int) -> None:
        for ns, address in self.cut.pop(i, []):
            ip("-n", ns, "route", "del", "blackhole", f"{address}/32")

    def remove(self) -> None:
        """Every namespace (their veths go with them, and with those the test namespace's end and route)."""
        for ns in reversed(self.namespaces):
            with contextlib.suppress(NamespaceError):
                ip("netns", "del", ns)
        self.namespaces.clear()
        with contextlib.suppress(NamespaceError):
            if self.subnet:
                ip("link", "del", self._link("c"))
