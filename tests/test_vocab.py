"""One vocabulary: device flavour, device and task size are checked by one function each, with
one error type whose message names the valid values, wherever a setting takes them."""

from __future__ import annotations

import pytest

from cuda_gym.envs import KernelEnv, KernelEnvConfig
from cuda_gym.errors import ConfigError, CudaGymError
from cuda_gym.tasks import get_task, load_tasks
from cuda_gym.vocab import (
    FLAVOURS,
    SIZES,
    check_device,
    check_flavour,
    check_size,
    flavour_of,
    indexed_device,
)


def test_each_word_is_checked_once_with_the_valid_values_named() -> None:
    assert FLAVOURS == ("cuda", "cpu") and SIZES == ("small", "default")
    for device in ("cpu", "cuda", "cuda:0", "cuda:12"):
        assert check_device(device) == device
    for bad in ("tpu", "cuda:", "cuda:x", "gpu", "CPU", "", None, 0):
        with pytest.raises(ConfigError, match=r"device must be 'cpu', 'cuda' or 'cuda:N', got"):
            check_device(bad)
    with pytest.raises(ConfigError, match=r"flavour must be 'cuda', 'cpu', got 'rocm'"):
        check_flavour("rocm")
    with pytest.raises(ConfigError, match=r"env size must be 'small', 'default', got 'huge'"):
        check_size("huge", "env size")
    assert check_flavour("cpu") == "cpu" and check_size("small") == "small"
    assert flavour_of("cpu") == "cpu" and flavour_of("cuda:3") == "cuda"
    assert indexed_device("cuda") == "cuda:0" and indexed_device("cuda:2") == "cuda:2"
    assert issubclass(ConfigError, CudaGymError) and issubclass(ConfigError, ValueError)


def test_env_settings_and_task_loaders_use_the_vocabulary() -> None:
    with pytest.raises(ConfigError, match="size must be 'small', 'default', got 'huge'"):
        KernelEnvConfig(size="huge")
    with pytest.raises(ConfigError, match="device must be 'cpu', 'cuda' or 'cuda:N', got 'cuda:x'"):
        KernelEnv(device="cuda:x")
    with pytest.raises(ConfigError, match="size must be 'small', 'default'"):
        load_tasks("builtin", size="huge")
    with pytest.raises(ConfigError, match="size must be 'small', 'default'"):
        get_task("builtin/softmax", size="huge")
    assert KernelEnvConfig(device="cuda:1").flavour == "cuda"


def test_every_place_that_takes_a_word_checks_it_the_same_way(tmp_path) -> None:
    from cuda_gym.build.toolchain import toolchain
    from cuda_gym.judge import JudgeConfig
    from cuda_gym.judge.rules import check_submission
    from cuda_gym.workspace import Workspace

    task = get_task("builtin/softmax", size="small")
    for refuse in (lambda: Workspace.create(task, flavour="rocm", parent=tmp_path),
                   lambda: toolchain("rocm", ""),
                   lambda: check_submission(tmp_path, "rocm")):
        with pytest.raises(ConfigError, match="flavour must be 'cuda', 'cpu', got 'rocm'"):
            refuse()
    with pytest.raises(ConfigError, match="device must be 'cpu', 'cuda' or 'cuda:N', got 'tpu'"):
        JudgeConfig(device="tpu")
    assert JudgeConfig(device="cuda").device == "cuda:0"
