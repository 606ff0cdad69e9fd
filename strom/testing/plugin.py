"""The pytest plugin (entry point ``pytest11``): fixtures ``strom_broker`` and ``strom_cluster``.

Installing strom is enough; no conftest.py and no ``pytest_plugins`` line are needed.

    def test_orders(strom_broker):
        strom_broker.create_topic("orders")
        my_app.publish(strom_broker.bootstrap_servers, ...)
        assert [r.value for r in strom_broker.consume("orders", 1)] == [b"..."]

Both fixtures live for the whole session unless the ini options ``strom_broker_scope`` /
``strom_cluster_scope`` say ``package``, ``module``, ``class`` or ``function`` (in pytest.ini,
pyproject's ``[tool.pytest.ini_options]``, or ``-o strom_broker_scope=function``). A shared
broker outlives each test, so tests should use their own topic names; a broker that a test
killed and left dead is restarted before the next test that uses the fixture.
``strom_broker_in_process = true`` runs the single broker on a thread of the test process;
``strom_broker_config`` lines (``key=value``) are broker configs for both fixtures. Data and
broker logs are kept under pytest's basetemp (``strom-*`` dirs).
"""

from __future__ import annotations

import pytest

from strom.testing.broker import Broker
from strom.testing.cluster import Cluster

SCOPES = ("session", "package", "module", "class", "function")


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addini("strom_broker_scope", f"scope of the strom_broker fixture: {', '.join(SCOPES)}", default="session")
    parser.addini("strom_cluster_scope", f"scope of the strom_cluster fixture: {', '.join(SCOPES)}", default="session")
    parser.addini(
        "strom_broker_in_process", "run strom_broker on a thread of the test process", type="bool", default=False
    )
    parser.addini(
        "strom_broker_config",
        "broker configs (key=value, one a line) for strom_broker and strom_cluster",
        type="linelist",
        default=[],
    )


def pytest_configure(config: pytest.Config) -> None:
    """Check the options once, where pytest reports a UsageError as one line."""
    for option in ("strom_broker_scope", "strom_cluster_scope"):
        value = config.getini(option).strip()
        if value not in SCOPES:
            raise pytest.UsageError(f"{option} = {value!r}: expected one of {', '.join(SCOPES)}")
    _overrides(config)


def _scope(option: str):
    def scope(*, fixture_name: str, config: pytest.Config) -> str:
        return config.getini(option).strip()

    return scope


def _overrides(config: pytest.Config) -> dict[str, str]:
    result = {}
    for line in config.getini("strom_broker_config"):
        key, sep, value = line.partition("=")
        if not sep or not key.strip():
            raise pytest.UsageError(f"strom_broker_config: expected key=value, got {line!r}")
        result[key.strip()] = value.strip()
    return result


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_call(item: pytest.Item) -> None:
    """Each test starts with every broker running: one an earlier test killed (and left dead, on
    purpose or by failing) is restarted first, so a shared fixture does not carry the damage on."""
    for name in ("strom_broker", "strom_cluster"):
        target = getattr(item, "funcargs", {}).get(name)
        if isinstance(target, (Broker, Cluster)):
            for broker_id in target.broker_ids:
                if not target.alive(broker_id):
                    target.restart(broker_id)


@pytest.fixture(scope=_scope("strom_broker_scope"))
def strom_broker(tmp_path_factory: pytest.TempPathFactory, pytestconfig: pytest.Config):
    """A strom broker on 127.0.0.1:<free port>: ``bootstrap_servers``, ``create_topic``,
    ``produce``, ``consume``, ``kill``, ``restart`` (see strom.testing.Broker)."""
    broker = Broker(
        tmp_path_factory.mktemp("strom-broker"),
        _overrides(pytestconfig),
        in_process=pytestconfig.getini("strom_broker_in_process"),
    )
    with broker:
        yield broker


@pytest.fixture(scope=_scope("strom_cluster_scope"))
def strom_cluster(tmp_path_factory: pytest.TempPathFactory, pytestconfig: pytest.Config):
    """ZooKeeper and strom brokers 1, 2, 3 as processes; ``kill(broker_id)`` is a kill -9
    (see strom.testing.Cluster)."""
    cluster = Cluster(tmp_path_factory.mktemp("strom-cluster"), _overrides(pytestconfig))
    with cluster:
        yield cluster
