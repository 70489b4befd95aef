"""`deterministic = true`: torch's deterministic algorithms for a run on CUDA (recx.core.device), nothing on the CPU.

What it buys on a GPU is measured by bench/gpu_determinism.py and pinned by tests/test_cuda_steps.py (-m gpu); here
the switch itself: on only within the run, cuBLAS's workspace set, a wrong workspace named, the run id kept."""

from __future__ import annotations

import os

import pytest
import torch

from recx.config.run_config import resolve
from recx.core.device import CUBLAS_WORKSPACE, deterministic_algorithms
from recx.core.errors import RecxError


def test_on_cuda_the_mode_is_on_within_the_block_only(monkeypatch):
    monkeypatch.delenv(CUBLAS_WORKSPACE, raising=False)
    assert not torch.are_deterministic_algorithms_enabled()
    with deterministic_algorithms(True, torch.device("cuda")):
        assert torch.are_deterministic_algorithms_enabled()
    assert not torch.are_deterministic_algorithms_enabled()


def test_the_cublas_workspace_is_set_unless_the_environment_fixes_a_deterministic_one(monkeypatch):
    monkeypatch.delenv(CUBLAS_WORKSPACE, raising=False)
    with deterministic_algorithms(True, torch.device("cuda")):
        assert os.environ[CUBLAS_WORKSPACE] == ":4096:8"
    monkeypatch.setenv(CUBLAS_WORKSPACE, ":16:8")
    with deterministic_algorithms(True, torch.device("cuda")):
        assert os.environ[CUBLAS_WORKSPACE] == ":16:8"
    monkeypatch.setenv(CUBLAS_WORKSPACE, ":0:0")
    with pytest.raises(RecxError, match=r"CUBLAS_WORKSPACE_CONFIG=':0:0'.*:4096:8 or :16:8"):
        with deterministic_algorithms(True, torch.device("cuda")):
            pass
    assert not torch.are_deterministic_algorithms_enabled()


def test_off_or_on_the_cpu_nothing_changes(monkeypatch):
    monkeypatch.delenv(CUBLAS_WORKSPACE, raising=False)
    for enabled, device in ((True, torch.device("cpu")), (False, torch.device("cuda"))):
        with deterministic_algorithms(enabled, device):
            assert not torch.are_deterministic_algorithms_enabled()
    assert CUBLAS_WORKSPACE not in os.environ


def test_the_key_joins_the_run_id_only_when_set():
    plain, deterministic = resolve({"model": "mf"}), resolve({"model": "mf", "deterministic": True})
    assert "deterministic" not in plain.to_dict()
    assert deterministic.to_dict()["deterministic"] is True
    assert plain.run_id() != deterministic.run_id()
