"""Loading a saved MaskablePPO zip for ``placegym bench``: weights only where it can be,
so nothing stored in the file runs; otherwise ``MaskablePPO.load`` with a warning naming
the file, once per process."""

import base64
import contextlib
import json
import pathlib
import warnings
import zipfile

import cloudpickle
import gymnasium as gym
import numpy as np
import pytest
import torch
from torch import nn

import placegym.envs  # noqa: F401
from placegym.agents.sb3 import make_maskable_ppo
from placegym.agents.sb3 import placer as placer_module
from placegym.agents.sb3.placer import Sb3Placer, UnpicklingWarning
from placegym.envs import load_cluster

pytestmark = pytest.mark.usefixtures("one_torch_thread")

SMALL = {"features_extractor_kwargs": {"hidden": 16, "layers": 2}}


@pytest.fixture(autouse=True)
def fresh_warnings(monkeypatch):
    """Each test starts as a fresh process: no zip warned about yet."""
    monkeypatch.setattr(placer_module, "_WARNED", set())


def small_ppo(**policy_kwargs):
    kw = {**SMALL, **policy_kwargs}
    return make_maskable_ppo(
        "placegym/ChainMM-v0", n_steps=64, batch_size=32, n_epochs=1, policy_kwargs=kw
    )


def problem():
    env = gym.make("placegym/ChainMM-v0")
    env.reset(seed=0)
    return env.unwrapped.graph, load_cluster("p100x4")


class Touch:
    """Unpickling it creates ``path``: the code a zip's pickles can run."""

    def __init__(self, path: pathlib.Path) -> None:
        self.path = path

    def __reduce__(self):
        return (pathlib.Path.touch, (self.path,))


def edit_data(path: pathlib.Path, edit) -> None:
    """Rewrite the zip's ``data`` JSON with ``edit(data)``."""
    with zipfile.ZipFile(path) as zf:
        files = {name: zf.read(name) for name in zf.namelist()}
    data = json.loads(files["data"])
    edit(data)
    files["data"] = json.dumps(data).encode()
    with zipfile.ZipFile(path, "w") as zf:
        for name, content in files.items():
            zf.writestr(name, content)


def poison(path: pathlib.Path, marker: pathlib.Path) -> None:
    """Replace the zip's pickled ``lr_schedule`` by one that creates ``marker``."""
    payload = base64.b64encode(cloudpickle.dumps(Touch(marker))).decode()
    edit_data(path, lambda data: data["lr_schedule"].update({":serialized:": payload}))


def test_a_gnn_zip_is_read_weights_only_and_runs_nothing_stored_in_it(tmp_path):
    model = small_ppo()
    model.learn(64)
    model.save(tmp_path / "ppo")
    marker = tmp_path / "ran"
    poison(tmp_path / "ppo.zip", marker)
    with warnings.catch_warnings():
        warnings.simplefilter("error", UnpicklingWarning)
        placer = Sb3Placer(tmp_path / "ppo.zip")
    assert placer.weights_only and not marker.exists()
    for key, value in model.policy.state_dict().items():
        torch.testing.assert_close(placer.policy.state_dict()[key], value)
    graph, cluster = problem()
    ref = Sb3Placer.__new__(Sb3Placer)
    ref.__dict__.update(placer.__dict__, policy=model.policy)
    got, want = placer(graph, cluster, 0), ref(graph, cluster, 0)
    np.testing.assert_array_equal(got.device, want.device)
    np.testing.assert_array_equal(got.order, want.order)
    from sb3_contrib import MaskablePPO

    with contextlib.suppress(Exception):  # what the weights-only path avoided
        MaskablePPO.load(tmp_path / "ppo.zip", device="cpu")
    assert marker.exists()


def test_a_multi_input_policy_zip_is_read_weights_only(tmp_path):
    from sb3_contrib import MaskablePPO

    env = gym.make("placegym/ChainMM-v0")
    MaskablePPO("MultiInputPolicy", env, n_steps=64, device="cpu").save(tmp_path / "mlp")
    placer = Sb3Placer(tmp_path / "mlp.zip")
    assert placer.weights_only
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        loaded = MaskablePPO.load(tmp_path / "mlp.zip", device="cpu").policy
    for key, value in loaded.state_dict().items():
        torch.testing.assert_close(placer.policy.state_dict()[key], value)


def test_any_other_zip_loads_with_one_warning_naming_it(tmp_path):
    small_ppo(activation_fn=nn.Tanh).save(tmp_path / "tanh")  # policy_kwargs pickled
    path = tmp_path / "tanh.zip"
    with pytest.warns(UnpicklingWarning, match=rf"{path}: loading runs code stored in the"):
        first = Sb3Placer(path)
    assert not first.weights_only and first.policy.activation_fn is nn.Tanh
    with warnings.catch_warnings():
        warnings.simplefilter("error", UnpicklingWarning)  # once per file and process
        assert not Sb3Placer(path).weights_only


def test_a_file_that_is_no_zip_is_one_error_naming_it(tmp_path):
    bad = tmp_path / "bad.zip"
    bad.write_text("not a zip")
    with pytest.raises(ValueError, match=r"bad\.zip: not a Stable-Baselines3 model zip"):
        Sb3Placer(bad)
    with pytest.raises(FileNotFoundError, match=r"none\.zip: no such file"):
        Sb3Placer(tmp_path / "none.zip")
    small_ppo().save(tmp_path / "odd")
    edit_data(tmp_path / "odd.zip", lambda data: data["policy_kwargs"].update(bogus=1))
    with pytest.raises(ValueError, match=r"odd\.zip: the model does not load: .*bogus"):
        Sb3Placer(tmp_path / "odd.zip")
