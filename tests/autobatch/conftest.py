"""Every test here runs on each available device (the `device` fixture of tests/conftest.py)."""

import pytest


@pytest.fixture(autouse=True)
def _on_every_device(device):
    yield
