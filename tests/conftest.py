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

#: The simulator's semantic test vectors (DESIGN §3), from an independent implementation
#: of the same rules: 40 cases of graph, cluster, placement and expected makespan.
SIM_CASES = Path(__file__).resolve().parent / "data" / "sim-v1"


@pytest.fixture
def sim_cases() -> Path:
    return SIM_CASES


@pytest.fixture
def one_torch_thread():
    """One torch thread for the test (restored after it)."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(autouse=True)
def _training_on_the_cpu(request, monkeypatch):
    """Outside tests marked ``gpu``, torch sees no CUDA device, so that a config's
    ``device: auto`` trains on the CPU on every machine: the tests that compare weights
    bit for bit (resume, Ray against in-process) hold on a GPU machine too."""
    if request.node.get_closest_marker("gpu") is None:
        monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
