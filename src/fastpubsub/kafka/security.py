"""What a secured embedded broker needs: TLS material, SCRAM users, and each user's client configuration file.

``pubsub broker --security DIR`` and the tests start Apache Kafka with a ``SASL_SSL`` listener on loopback
(SCRAM-SHA-512 over TLS) for the clients, and with its inter-broker and controller listeners authenticated too
(SASL PLAIN, the admin user): no listener of the node takes an unauthenticated connection.  The material is made
here, once per directory, with the ``openssl`` command:

* ``ca.pem`` (and ``ca.key``): a certificate authority of its own, valid for :data:`DAYS` days;
* ``broker.pem``: the node's private key (PKCS#8) and its certificate for ``127.0.0.1`` and ``localhost``, signed by
  that CA, which Kafka reads as a ``PEM`` keystore;
* ``users.json``: every user's random password (``admin`` is the only super user);
* ``<user>.properties``: each user's client configuration file (``--client-config``: security protocol, SCRAM
  mechanism, user name and password, the CA to trust).

Every file is readable by its owner only: they are throwaway secrets for one machine, never committed anywhere.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable

ADMIN = "admin"
MECHANISM = "SCRAM-SHA-512"
CA_FILE, KEYSTORE_FILE = "ca.pem", "broker.pem"
DAYS = 30
_USER = re.compile(r"[A-Za-z0-9_.-]{1,64}")


class SecurityError(RuntimeError):
    """The material cannot be made (no ``openssl``, an unwritable directory, a bad user name)."""


@dataclass(frozen=True)
class BrokerSecurity:
    """The material of one secured broker in ``directory``: its files and its users' passwords."""

    directory: Path
    passwords: dict[str, str]

    @classmethod
    def create(cls, directory: str | Path, users: Iterable[str] = ()) -> "BrokerSecurity":
        """The material in ``directory``, made there if it is not yet (new users get passwords and files)."""
        directory = Path(directory).expanduser().resolve()
        wanted = [ADMIN, *(u for u in users if u != ADMIN)]
        bad = [u for u in wanted if not _USER.fullmatch(u)]
        if bad:
            raise SecurityError(f"user names are letters, digits, '_', '.' and '-': not {', '.join(map(repr, bad))}")
        try:
            directory.mkdir(parents=True, exist_ok=True)
            os.chmod(directory, 0o700)
            if not (directory / KEYSTORE_FILE).is_file():
                _certificates(directory)
            store = directory / "users.json"
            passwords = json.loads(store.read_text()) if store.is_file() else {}
            for user in wanted:
                passwords.setdefault(user, secrets.token_urlsafe(24))
            _private(store, json.dumps(passwords, indent=1) + "\n")
        except OSError as exc:
            raise SecurityError(f"cannot write the security material in {directory}: {exc}") from None
        security = cls(directory, passwords)
        for user in passwords:
            _private(security.properties_file(user), "".join(f"{k}={v}\n" for k, v in security.settings(user).items()))
        return security

    def properties_file(self, user: str) -> Path:
        """``<user>.properties``: what ``--client-config`` takes to connect as ``user``."""
        return self.directory / f"{user}.properties"

    def settings(self, user: str, password: str | None = None) -> dict[str, str]:
        """librdkafka settings of a client of the ``SASL_SSL`` listener as ``user`` (``password``: another one)."""
        return {"security.protocol": "SASL_SSL", "sasl.mechanism": MECHANISM, "sasl.username": user,
                "sasl.password": self.passwords[user] if password is None else password,
                "ssl.ca.location": str(self.directory / CA_FILE)}

    def scram_arguments(self) -> list[str]:
        """``kafka-storage format`` arguments that create every user's SCRAM credential with the cluster."""
        return [a for user, password in self.passwords.items()
                for a in ("--add-scram", f"{MECHANISM}=[name={user},password={password}]")]

    def server_properties(self, client_port: int, internal_port: int, controller_port: int) -> dict[str, str]:
        """A node's listeners and authorization: ``CLIENT`` (SASL_SSL, SCRAM) for the clients; ``INTERNAL`` and
        ``CONTROLLER`` (SASL_PLAINTEXT, PLAIN, the admin user only) between nodes; the StandardAuthorizer with
        ``admin`` the only super user, so that every other user may do what its ACLs allow and nothing else."""
        host = "127.0.0.1"
        password = self.passwords[ADMIN]
        plain = ('org.apache.kafka.common.security.plain.PlainLoginModule required '
                 f'username="{ADMIN}" password="{password}" user_{ADMIN}="{password}";')
        return {
            "listeners": f"CLIENT://{host}:{client_port},INTERNAL://{host}:{internal_port},"
                         f"CONTROLLER://{host}:{controller_port}",
            "advertised.listeners": f"CLIENT://{host}:{client_port},INTERNAL://{host}:{internal_port}",
            "listener.security.protocol.map": "CLIENT:SASL_SSL,INTERNAL:SASL_PLAINTEXT,CONTROLLER:SASL_PLAINTEXT",
            "inter.broker.listener.name": "INTERNAL",
            "sasl.mechanism.inter.broker.protocol": "PLAIN",
            "sasl.mechanism.controller.protocol": "PLAIN",
            "listener.name.internal.sasl.enabled.mechanisms": "PLAIN",
            "listener.name.controller.sasl.enabled.mechanisms": "PLAIN",
            "listener.name.client.sasl.enabled.mechanisms": MECHANISM,
            "listener.name.internal.plain.sasl.jaas.config": plain,
            "listener.name.controller.plain.sasl.jaas.config": plain,
            "listener.name.client.scram-sha-512.sasl.jaas.config":
                "org.apache.kafka.common.security.scram.ScramLoginModule required;",
            "listener.name.client.ssl.keystore.type": "PEM",
            "listener.name.client.ssl.keystore.location": str(self.directory / KEYSTORE_FILE),
            "listener.name.client.ssl.client.auth": "none",
            "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
            "super.users": f"User:{ADMIN}",
            "allow.everyone.if.no.acl.found": "false",
        }


def _private(path: Path, text: str) -> None:
    """Write ``text`` to ``path``, readable and writable by its owner only."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(text)
    os.chmod(path, 0o600)


def _openssl(*args: str, cwd: Path) -> None:
    try:
        done = subprocess.run(["openssl", *args], cwd=cwd, stdin=subprocess.DEVNULL, capture_output=True, text=True)
    except FileNotFoundError:
        raise SecurityError("the openssl command is needed to make the broker's certificates") from None
    if done.returncode != 0:
        raise SecurityError(f"openssl {args[0]} failed: {done.stderr.strip()[-1000:]}")


def _certificates(directory: Path) -> None:
    """A CA, and the broker's key and certificate for 127.0.0.1 signed by it, as one PEM keystore."""
    old = os.umask(0o077)
    key = ("-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes")  # P-256: made at once
    try:
        _openssl("req", "-x509", *key, "-keyout", "ca.key", "-out", CA_FILE, "-days", str(DAYS),
                 "-subj", "/CN=fastpubsub test CA", cwd=directory)
        _openssl("req", *key, "-keyout", "broker.key", "-out", "broker.csr", "-subj", "/CN=127.0.0.1", cwd=directory)
        (directory / "broker.ext").write_text("subjectAltName=IP:127.0.0.1,DNS:localhost\n")
        _openssl("x509", "-req", "-in", "broker.csr", "-CA", CA_FILE, "-CAkey", "ca.key", "-CAcreateserial",
                 "-out", "broker.crt", "-days", str(DAYS), "-extfile", "broker.ext", cwd=directory)
        _private(directory / KEYSTORE_FILE, "".join((directory / name).read_text()
                                                     for name in ("broker.key", "broker.crt", CA_FILE)))
    finally:
        os.umask(old)
    for name in ("broker.csr", "broker.ext", "broker.key", "broker.crt", "ca.srl"):
        (directory / name).unlink(missing_ok=True)
