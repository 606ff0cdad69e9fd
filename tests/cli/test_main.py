"""``strom`` itself: the subcommand table and ``--version``."""

import platform
import subprocess
import sys
from importlib import metadata

import pytest

from strom.cli.main import SUBCOMMANDS, main
from strom.server.config import BrokerConfig

EXPECTED = (
    f"strom {metadata.version('strom')} (Kafka 4.1 protocol, Kafka 3.9 configs, Python {platform.python_version()})\n"
)


def test_strom_version_prints_strom_kafka_and_python_versions():
    result = subprocess.run(
        [sys.executable, "-m", "strom.cli.main", "--version"], capture_output=True, text=True, timeout=60
    )
    assert (result.returncode, result.stdout, result.stderr) == (0, EXPECTED, "")


def test_the_kafka_version_is_the_one_the_broker_config_follows():
    assert BrokerConfig.from_mapping({}).inter_broker_protocol_version == "3.9-IV0"


@pytest.mark.parametrize(
    "argv",
    [[name, "--version"] for name in SUBCOMMANDS]
    + [["cluster", "start", "--version"], ["transactions", "list", "--version"]],
    ids=lambda argv: " ".join(argv),
)
def test_every_subcommand_answers_version(argv, capsys):
    with pytest.raises(SystemExit) as exited:
        main(argv)
    assert exited.value.code == 0
    assert capsys.readouterr() == (EXPECTED, "")
