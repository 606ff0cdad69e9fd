import pytest

from tests.broker_process import BrokerProcess

# an application's own test project, run as a separate pytest session by tests/test_pytest_plugin.py
collect_ignore = ["plugin_project"]


@pytest.fixture
def broker(tmp_path):
    """A fresh single broker process on 127.0.0.1:<random port>."""
    with BrokerProcess(tmp_path / "data") as process:
        yield process
