import pytest

FD_CONFIG = """
[[channel]]
name = "can0"

[[channel]]
name = "fd0"
protocol = "canfd"
bitrate = 1000000
data_bitrate = 4000000
"""


@pytest.fixture
def fd_config():
    return FD_CONFIG
