from __future__ import annotations

import warnings

import pytest
import torch

import provenance

warnings.filterwarnings("ignore", message="transformer_engine module not found")


@pytest.fixture
def traced():
    """Provenance hooks installed for the test, removed after it."""
    provenance.enable()
    try:
        yield
    finally:
        provenance.disable()


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)
