"""The secured broker's material (``kafka.security``): made once per directory, private, and a node config with no
unauthenticated listener and no super user but admin."""

from __future__ import annotations

import stat

import pytest

from fastpubsub.kafka.broker import Layout, server_properties
from fastpubsub.kafka.clients import read_properties
from fastpubsub.kafka.security import ADMIN, BrokerSecurity, SecurityError


def test_the_material_is_private_and_each_user_gets_a_client_configuration_file(tmp_path):
    security = BrokerSecurity.create(tmp_path / "sec", ["processor"])
    assert set(security.passwords) == {ADMIN, "processor"} and len(set(security.passwords.values())) == 2
    assert stat.S_IMODE((tmp_path / "sec").stat().st_mode) == 0o700
    assert all(stat.S_IMODE(p.stat().st_mode) == 0o600 for p in (tmp_path / "sec").iterdir())
    assert read_properties(security.properties_file("processor")) == security.settings("processor")
    assert security.settings("processor")["security.protocol"] == "SASL_SSL"
    assert (tmp_path / "sec" / "broker.pem").read_text().count("-----BEGIN") == 3  # key, certificate, CA


def test_made_again_it_keeps_the_certificates_and_passwords_and_adds_new_users(tmp_path):
    first = BrokerSecurity.create(tmp_path, ["a"])
    ca = (tmp_path / "ca.pem").read_bytes()
    again = BrokerSecurity.create(tmp_path, ["a", "b"])
    assert (tmp_path / "ca.pem").read_bytes() == ca
    assert {k: again.passwords[k] for k in first.passwords} == first.passwords and "b" in again.passwords
    with pytest.raises(SecurityError, match="user names"):
        BrokerSecurity.create(tmp_path, ["bad name"])


def test_a_secured_node_listens_with_authentication_only_and_has_one_super_user(tmp_path):
    security = BrokerSecurity.create(tmp_path, ["processor"])
    props = server_properties(Layout("id", [9092], [9093], [9094]), 0, tmp_path / "data", security)
    protocols = dict(item.split(":") for item in props["listener.security.protocol.map"].split(","))
    assert set(protocols.values()) == {"SASL_SSL", "SASL_PLAINTEXT"}
    assert all(f"{name}://127.0.0.1:" in props["listeners"] for name in protocols)
    assert props["super.users"] == f"User:{ADMIN}" and props["allow.everyone.if.no.acl.found"] == "false"
    assert props["listener.name.client.sasl.enabled.mechanisms"] == "SCRAM-SHA-512"


def test_pubsub_broker_creates_users_on_a_secured_broker_only():
    from click.testing import CliRunner

    from fastpubsub.cli import main

    result = CliRunner().invoke(main, ["broker", "--user", "processor"])
    assert result.exit_code == 2 and "give --security DIR too" in result.output


def test_the_documented_acls_are_those_kafka_acls_grants():
    """docs/guide/security.md's table (principal, resource, operation) names each topic each service reads and writes."""
    from pathlib import Path

    from fastpubsub.kafka import acls

    text = (Path(__file__).resolve().parents[2] / "docs" / "guide" / "security.md").read_text()
    table = text[text.index("| principal | resource | operation |"):].split("\n\n")[0].splitlines()[2:]
    blocks: dict[str, list[tuple[str, str]]] = {}
    for row in table:
        principal, resource, operation = (cell.strip() for cell in row.strip("|").split("|"))
        if principal:
            current = blocks.setdefault(principal.split("`")[1], [])
        current.append((resource, operation))
    expected = {"pubsub run": acls.processor("G"), "pubsub patterns": acls.patterns("G"),
                "pubsub tables": acls.tables({"T": "X"}, "G"), "pubsub subscribe": acls.client(),
                "pubsub stats": acls.statistics()}
    for command, access in expected.items():
        for kind, _, name, operation in access.rows():
            if kind == "TOPIC" and operation in ("READ", "WRITE", "CREATE"):
                assert any(f"`{name}`" in resource and operation in documented
                           for resource, documented in blocks[command]), (command, name, operation)
