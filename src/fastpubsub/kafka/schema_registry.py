"""The Schema Registry client: registered schemas fetched by id, their references resolved, the registry waited for.

``--schema-registry URL`` names a Confluent-compatible registry (Confluent's, Apicurio's ``/apis/ccompat/v7``, the
embedded one of ``pubsub registry``); its authentication and TLS settings are given the way Kafka's are: a
properties file (``--schema-registry-config FILE``) and repeatable ``-R KEY=VALUE`` over it, with confluent-kafka's
keys (``basic.auth.user.info``, ``bearer.auth.*``, ``ssl.ca.location``, ``ssl.certificate.location``,
``ssl.key.location``, ``timeout``...).  confluent-kafka's ``SchemaRegistryClient`` does the HTTP (auth, TLS, its
cache); ``mock://NAME`` is its in-process registry, for tests.

:class:`SchemaSource` is the lookup ``wire.registered.RegisteredDecoders`` takes.  An id the registry does not hold
is a bad record (``UnknownSchema``: dead-lettered); a registry that does not answer is waited for, never taken for
a verdict on the record: the source retries with a growing pause, telling the service (``waiting``) so that it
reports not ready, and gives up only when the service stops (``stopped``), before anything of the batch was
committed.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

from fastpubsub.wire.codecs import SCHEMA_DIR, SCHEMA_IDS
from fastpubsub.wire.registered import (Reference, RegisteredDecoders, RegisteredSchema, RegistryUnavailable,
                                       UnknownSchema)

from .clients import Settings, parse_settings, read_properties

log = logging.getLogger("pubsub.registry")

#: Settings confluent-kafka's client takes as numbers (a properties file and -R give text).
_NUMERIC = ("timeout", "cache.capacity", "cache.latest.ttl.sec", "max.retries", "retries.wait.ms",
            "retries.max.wait.ms")
#: The longest pause between two attempts while the registry does not answer.
MAX_PAUSE = 5.0


@dataclass(frozen=True)
class RegistryConfig:
    """Where the registry is and how to talk to it: what ``--schema-registry``, ``-R`` and the file give."""

    url: str
    settings: Settings = field(default_factory=Settings)

    @classmethod
    def configure(cls, url: str | None, items: tuple[str, ...] | list[str] = (),
                  config_file: str | None = None) -> "RegistryConfig | None":
        """The file's settings under ``-R``'s; None without a URL (then neither may be given)."""
        settings = Settings(read_properties(config_file) if config_file else {})
        settings.update(parse_settings(items, "-R"))
        url = url or settings.pop("url", None)
        settings.pop("url", None)
        if not url:
            if settings:
                raise ValueError("-R and --schema-registry-config configure a Schema Registry: give its "
                                 "--schema-registry URL too")
            return None
        if not url.startswith(("http://", "https://", "mock://")):
            raise ValueError(f"--schema-registry {url!r}: an http://, https:// (or mock://) URL")
        return cls(url.rstrip("/"), settings)

    def to_options(self, prefix: str = "registry.") -> dict[str, str]:
        """String options that :meth:`from_options` turns back into this config (Spark's data source options)."""
        return {prefix + "url": self.url, **{f"{prefix}{k}": str(v) for k, v in self.settings.items()}}

    @classmethod
    def from_options(cls, options: Mapping[str, str], prefix: str = "registry.") -> "RegistryConfig | None":
        """The config :meth:`to_options` gave, None when the options name no registry."""
        url = options.get(prefix + "url")
        if not url:
            return None
        return cls(url, Settings({k[len(prefix):]: v for k, v in options.items()
                                  if k.startswith(prefix) and k != prefix + "url"}))

    def client(self) -> Any:
        """confluent-kafka's ``SchemaRegistryClient`` for this registry."""
        from confluent_kafka.schema_registry import SchemaRegistryClient

        conf: dict[str, Any] = {"timeout": 10, **self.settings, "url": self.url}
        for key in _NUMERIC:
            if isinstance(conf.get(key), str):
                try:
                    conf[key] = int(conf[key])
                except ValueError:
                    raise ValueError(f"-R {key}: a number, got {conf[key]!r}") from None
        if self.url.startswith("mock://"):
            return SchemaRegistryClient.new_client(conf)
        return SchemaRegistryClient(conf)


class SchemaSource:
    """``id -> RegisteredSchema`` from a registry, its references resolved (each fetched once).

    ``waiting(True)`` at every attempt while the registry does not answer, ``waiting(False)`` once it does; meanwhile the
    source retries until ``stopped()`` says the service stops (then ``RegistryUnavailable``).
    """

    def __init__(self, client: Any, url: str = "", *, waiting: Callable[[bool], None] | None = None,
                 stopped: Callable[[], bool] | None = None, first_pause: float = 0.2) -> None:
        self.client = client
        self.url = url
        self.waiting = waiting or (lambda _: None)
        self.stopped = stopped or (lambda: False)
        self.first_pause = first_pause
        self._versions: dict[tuple[str, int], RegisteredSchema] = {}

    def __call__(self, schema_id: int) -> RegisteredSchema:
        schema = self.patiently(lambda: self.client.get_schema(schema_id), f"schema id {schema_id}")
        return RegisteredSchema(schema.schema_type or "AVRO", schema.schema_str, self._references(schema, ()))

    def _references(self, schema: Any, seen: tuple[tuple[str, int], ...]) -> tuple[Reference, ...]:
        out = []
        for ref in schema.references or ():
            key = (ref.subject, int(ref.version))
            if key in seen:
                raise UnknownSchema(f"the references of subject {ref.subject} version {ref.version} form a cycle")
            found = self._versions.get(key)
            if found is None:
                got = self.patiently(lambda: self.client.get_version(ref.subject, int(ref.version)),
                                      f"subject {ref.subject} version {ref.version}").schema
                found = RegisteredSchema(got.schema_type or "AVRO", got.schema_str,
                                         self._references(got, seen + (key,)))
                self._versions[key] = found
            out.append(Reference(ref.name, found))
        return tuple(out)

    def patiently(self, call: Callable[[], Any], what: str) -> Any:
        from confluent_kafka.schema_registry.error import SchemaRegistryError

        pause = self.first_pause
        waited = False
        try:
            while True:
                try:
                    return call()
                except SchemaRegistryError as exc:
                    if exc.http_status_code == 404:
                        raise UnknownSchema(f"{what} is not in the Schema Registry at {self.url}") from None
                    if exc.http_status_code not in (-1, 408, 429) and exc.http_status_code < 500:
                        raise UnknownSchema(f"{what}: the Schema Registry at {self.url} answered "
                                            f"{exc.http_status_code}: {exc.error_message}") from None
                    reason = f"{exc.http_status_code} {exc.error_message}"
                except Exception as exc:  # noqa: BLE001 - httpx's transport errors and kin: the registry is not there
                    reason = f"{type(exc).__name__}: {exc}"
                if self.stopped():
                    raise RegistryUnavailable(f"the Schema Registry at {self.url} does not answer ({reason})")
                if not waited:
                    log.warning("the Schema Registry at %s does not answer (%s): waiting for it, not ready",
                                self.url, reason)
                    waited = True
                self.waiting(True)
                time.sleep(pause)
                pause = min(MAX_PAUSE, pause * 2)
        finally:
            if waited:
                log.info("the Schema Registry at %s answers again: ready", self.url)
                self.waiting(False)


def register(client: Any, subject: str, schema_text: str, schema_type: str = "AVRO") -> int:
    """Register a schema under ``subject`` (or find it there); its id."""
    from confluent_kafka.schema_registry import Schema

    return client.register_schema(subject, Schema(schema_text, schema_type))



#: The subject fastpubsub's own event schema is registered under: its record's full name (RecordNameStrategy), so
#: that it never touches the subjects of users' topics.
EVENT_SUBJECT = "fastpubsub.Event"


def event_decoders(config: RegistryConfig, *, waiting: Callable[[bool], None] | None = None,
                   stopped: Callable[[], bool] | None = None, client: Any = None) -> RegisteredDecoders:
    """The decoders of a service that reads events with ``--schema-registry``: fastpubsub's own event schema is
    registered (or found) first, and its id, not the fixed one, is what the batch decoder's kernel reads; every
    other id is a producer's schema, looked up in the registry.  ``client``: one already made for ``config``."""
    client = client if client is not None else config.client()
    source = SchemaSource(client, config.url, waiting=waiting, stopped=stopped)
    text = (SCHEMA_DIR / "event.avsc").read_text(encoding="utf-8")
    native = source.patiently(lambda: register(client, EVENT_SUBJECT, text), f"registering {EVENT_SUBJECT}")
    return RegisteredDecoders(source, native)


def output_subjects(notifications: str, dead_letter: str) -> dict[str, str]:
    """The subject each of fastpubsub's output schemas is registered under: the topic's value subject
    (TopicNameStrategy), and for the notification by reference, which shares the notifications topic with the full
    one, the topic and its record name (TopicRecordNameStrategy), since no schema is a compatible version of the
    other.  The notification that names its source (``notification_v2``) shares the topic the same way: its record
    has another name, so it cannot be a version of the notification's subject."""
    return {"notification": f"{notifications}-value",
            "notification_v2": f"{notifications}-fastpubsub.NotificationV2",
            "notification_reference": f"{notifications}-fastpubsub.NotificationReference",
            "dead_letter": f"{dead_letter}-value"}


def register_outputs(config: RegistryConfig, subjects: dict[str, str], *, client: Any = None,
                     waiting: Callable[[bool], None] | None = None,
                     stopped: Callable[[], bool] | None = None) -> dict[int, int]:
    """Register fastpubsub's output schemas under ``subjects`` (schema name -> subject); fixed id -> registry id,
    what ``wire.codecs.reframed`` takes."""
    client = client if client is not None else config.client()
    source = SchemaSource(client, config.url, waiting=waiting, stopped=stopped)
    out = {}
    for name, subject in subjects.items():
        text = (SCHEMA_DIR / f"{name}.avsc").read_text(encoding="utf-8")
        out[SCHEMA_IDS[name]] = source.patiently(lambda: register(client, subject, text), f"registering {subject}")
    return out
