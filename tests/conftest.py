import pytest

from tests.broker_process import BrokerProcess


@pytest.fixture
def broker(tmp_path):
    """A fresh single broker process on 127.0.0.1:<random port>."""
    with BrokerProcess(tmp_path / "data") as process:
        yield process
