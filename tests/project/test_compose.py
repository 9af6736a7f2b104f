"""docker-compose.yml cannot run here (no Docker engine); check what can be checked."""

from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from fastpubsub.cli import main

ROOT = Path(__file__).parents[2]
COMPOSE = yaml.safe_load((ROOT / "docker-compose.yml").read_text())


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


def test_the_statistics_service_runs_a_module_of_the_package():
    import importlib.util

    command = COMPOSE["services"]["statistics"]["command"]
    assert command[:2] == ["python", "-m"] and importlib.util.find_spec(command[2]) is not None, command
    assert command[2] == "fastpubsub.stats_job"


@pytest.mark.parametrize("dockerfile", ["Dockerfile", "Dockerfile.spark"])
def test_images_install_the_built_wheel_not_a_checkout(dockerfile):
    """Multi-stage: one stage builds the wheel from src/, the image installs that wheel (package data and all)."""
    text = (ROOT / dockerfile).read_text()
    stages = [line for line in text.splitlines() if line.startswith("FROM ")]
    assert len(stages) == 2 and stages[0].endswith(" AS wheel"), stages
    build, image = text.split("\n" + stages[1] + "\n")
    assert "COPY src ./src" in build and "pip wheel" in build and "--no-deps" in build
    assert "COPY --from=wheel /wheels /wheels" in image and "pip install" in image and "fastpubsub-*.whl" in image
    assert " -e " not in text and "COPY src" not in image  # no editable install, no source in the image
