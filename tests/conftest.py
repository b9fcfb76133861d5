import os
from pathlib import Path

import pytest
import torch
from hypothesis import HealthCheck, settings

os.environ.setdefault("WANDB_MODE", "disabled")
os.environ.setdefault("MPLBACKEND", "Agg")

settings.register_profile(
    "default",
    deadline=None,
    max_examples=150,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
settings.register_profile("ci", parent=settings.get_profile("default"), derandomize=True)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "default"))

SHARED = Path(__file__).resolve().parents[2] / "shared"


@pytest.fixture
def shared_cases() -> Path:
    cases = SHARED / "cases" / "sim-v1"
    if not cases.is_dir():
        pytest.skip("../shared/cases is absent (only in the development workspace)")
    return cases


@pytest.fixture
def one_torch_thread():
    """One torch thread for the test (restored after it)."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)
