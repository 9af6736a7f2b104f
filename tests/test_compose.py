"""docker-compose.yml cannot run here (no Docker engine); check what can be checked."""

from pathlib import Path

import yaml
from click.testing import CliRunner

from fastpubsub.processor.cli import main

COMPOSE = yaml.safe_load((Path(__file__).parent.parent / "docker-compose.yml").read_text())


def test_services_and_order():
    services = COMPOSE["services"]
    assert set(services) == {"kafka", "topics", "processor", "statistics"}
    assert services["kafka"]["environment"]["KAFKA_PROCESS_ROLES"] == "broker,controller"  # KRaft, one node
    assert services["topics"]["depends_on"]["kafka"]["condition"] == "service_healthy"
    assert services["processor"]["depends_on"]["topics"]["condition"] == "service_completed_successfully"


def test_commands_are_valid_pubsub_invocations():
    for name in ("topics", "processor"):
        command = COMPOSE["services"][name]["command"]
        assert command[0] == "pubsub"
        # unknown options fail parsing before --help is honoured
        result = CliRunner().invoke(main, [*command[1:], "--help"])
        assert result.exit_code == 0, result.output
