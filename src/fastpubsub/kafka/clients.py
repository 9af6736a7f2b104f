"""The one place that builds confluent-kafka clients: admin, producer and consumer carry the same connection settings.

A secured cluster needs the same settings on every client (``-X
security.protocol=SASL_SSL -X sasl.mechanism=...``); a client built with only
``bootstrap.servers`` fails at startup there.  So no module builds a client
itself: each asks a :class:`ClientFactory` for one, giving only the settings
of its role (a group id, a transactional id, queue bounds), and the factory
merges them as

    role defaults  <  connection settings (-X)  <  what the role requires

so that a user can tune a default (``-X linger.ms=20``) but not switch off
what a role depends on (``acks=all`` for exactly-once delivery, no
auto-commit for consumers that commit with their outputs).

Secrets among the settings (``sasl.password``, ``ssl.key.password``,
``sasl.oauthbearer.client.secret``, any key naming a password, a secret, a
token, a JAAS configuration or a private key) never show: the settings are a
:class:`Settings`, whose ``repr`` and :meth:`Settings.shown` replace their
values, so a factory, a service's configuration or an error quoting them
prints ``sasl.password='***'``.

The settings may also come from a client configuration file, as Kafka users
keep them (``--client-config FILE``: Java properties, :func:`read_properties`);
the ``-X`` ones win over the file's (:meth:`ClientFactory.configure`).

The factory is a small frozen value: it pickles, and :meth:`to_options` /
:meth:`from_options` carry it through string options, which is how the
Spark data source (``stats_job.kafka_source``) takes it to the executors.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient

#: Prefix of the connection settings among a Spark data source's options.
OPTION_PREFIX = "kafka."


#: Keys whose values are secrets: shown as ``***`` wherever settings are shown.
SECRET_KEY = re.compile(r"password|secret|token|jaas|ssl\.key\.pem|oauthbearer\.config|credential|user\.info",
                        re.IGNORECASE)  # user.info: a Schema Registry's basic.auth.user.info (USER:PASSWORD)
HIDDEN = "***"


def is_secret(key: str) -> bool:
    return SECRET_KEY.search(key) is not None


class Settings(dict):
    """librdkafka settings whose ``repr`` hides the secrets' values (see :data:`SECRET_KEY`)."""

    def shown(self) -> dict[str, Any]:
        """The settings as they may be printed: every secret's value replaced."""
        return {k: HIDDEN if is_secret(k) else v for k, v in self.items()}

    def __repr__(self) -> str:
        return repr(self.shown())


def parse_settings(items: list[str] | tuple[str, ...], option: str = "-X") -> Settings:
    """``["security.protocol=SSL", ...]`` (repeated ``-X KEY=VALUE``) -> settings; ValueError naming a bad item
    (not quoting it if it names a secret)."""
    out = Settings()
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ValueError(f"{option} expects KEY=VALUE, got {HIDDEN if is_secret(item) else repr(item)}")
        out[key.strip()] = value
    return out


def read_properties(path: str | Path) -> Settings:
    """A client configuration file (Java properties): ``key=value`` or ``key: value`` lines, blank lines, ``#`` and
    ``!`` comments, a line ending in a backslash continued on the next; ValueError naming the file and line."""
    out, pending, first = Settings(), "", 0
    for number, line in enumerate(Path(path).read_text(encoding="utf-8").splitlines(), 1):
        text = line.lstrip()
        if not pending and (not text or text[0] in "#!"):
            continue
        first = first or number
        if text.endswith("\\") and not text.endswith("\\\\"):
            pending += text[:-1]
            continue
        text, pending = pending + text, ""
        cut = min((i for i in (text.find("="), text.find(":")) if i >= 0), default=-1)
        key = text[:cut].strip()
        if cut < 0 or not key:
            raise ValueError(f"{path}:{first}: expected key=value, got "
                             f"{HIDDEN if is_secret(text) else repr(text)}")
        out[key] = text[cut + 1:].strip()
        first = 0
    if pending:
        raise ValueError(f"{path}:{first}: the last line is continued (ends in a backslash) but the file ends")
    return out


@dataclass(frozen=True)
class ClientFactory:
    """Builds every Kafka client of fastpubsub against ``bootstrap_servers`` with ``settings`` (the ``-X`` ones).

    ``settings`` values are usually strings from the command line; library
    callers may pass what confluent-kafka accepts (ints, callbacks such as
    ``stats_cb``), which then reach every client alike.
    """

    bootstrap_servers: str
    settings: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not self.bootstrap_servers:
            raise ValueError("bootstrap_servers is empty")
        if "bootstrap.servers" in self.settings:
            raise ValueError("bootstrap.servers is not a connection setting here: give it as the bootstrap servers "
                             "(--bootstrap-servers), not with -X")
        object.__setattr__(self, "settings", Settings(self.settings))

    @classmethod
    def configure(cls, bootstrap_servers: str | None, items: list[str] | tuple[str, ...] = (),
                  config_file: str | Path | None = None, default: str | None = None) -> "ClientFactory":
        """The factory of a command line: the settings of ``config_file`` under the ``-X`` ``items`` (the command
        line wins); the bootstrap servers given (``-b`` or the environment), else the file's ``bootstrap.servers``,
        else ``default``.  ValueError says what is wrong."""
        settings = read_properties(config_file) if config_file else Settings()
        from_file = settings.pop("bootstrap.servers", None)
        settings.update(parse_settings(items))
        servers = bootstrap_servers or from_file or default
        if not servers:
            raise ValueError("no bootstrap servers: give --bootstrap-servers, PUBSUB_BOOTSTRAP_SERVERS or "
                             "bootstrap.servers in the client configuration file")
        return cls(servers, settings)

    @classmethod
    def of(cls, clients: "ClientFactory | str") -> "ClientFactory":
        """``clients`` itself, or a factory with no extra settings for a bootstrap string (tests, tools)."""
        return clients if isinstance(clients, ClientFactory) else cls(clients)

    # --- the configuration each client gets ----------------------------------------

    def config(self, defaults: Mapping[str, Any] | None = None, required: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """The librdkafka configuration of one client: role ``defaults`` < :attr:`settings` < role ``required``."""
        return {**(defaults or {}), "bootstrap.servers": self.bootstrap_servers, **self.settings, **(required or {})}

    def admin_config(self, **required: Any) -> dict[str, Any]:
        return self.config(None, required)

    def producer_config(self, defaults: Mapping[str, Any] | None = None, **required: Any) -> dict[str, Any]:
        return self.config(defaults, required)

    def consumer_config(self, group_id: str, defaults: Mapping[str, Any] | None = None, **required: Any) -> dict[str, Any]:
        """A consumer's configuration; ``group.id`` is required by librdkafka even for assign-only readers."""
        return self.config(defaults, {"group.id": group_id, **required})

    # --- the clients -------------------------------------------------------------------

    def admin(self, **required: Any) -> AdminClient:
        return AdminClient(self.admin_config(**required))

    def producer(self, defaults: Mapping[str, Any] | None = None, **required: Any) -> Producer:
        return Producer(self.producer_config(defaults, **required))

    def consumer(self, group_id: str, defaults: Mapping[str, Any] | None = None, **required: Any) -> Consumer:
        return Consumer(self.consumer_config(group_id, defaults, **required))

    # --- through string options (Spark data sources) ------------------------------------

    def to_options(self, prefix: str = OPTION_PREFIX) -> dict[str, str]:
        """String options that :meth:`from_options` turns back into this factory (callbacks cannot travel)."""
        opaque = sorted(k for k, v in self.settings.items() if callable(v))
        if opaque:
            raise ValueError(f"settings {', '.join(opaque)} are callables and cannot travel as options")
        return {"bootstrap.servers": self.bootstrap_servers, **{prefix + k: str(v) for k, v in self.settings.items()}}

    @classmethod
    def from_options(cls, options: Mapping[str, str], prefix: str = OPTION_PREFIX) -> "ClientFactory":
        if "bootstrap.servers" not in options:
            raise ValueError("the options carry no 'bootstrap.servers'")
        return cls(options["bootstrap.servers"], {k[len(prefix):]: v for k, v in options.items() if k.startswith(prefix)})
