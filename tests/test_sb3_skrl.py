"""SB3 PPO and skrl PPO train a few hundred steps on CpuKernel-Builtin-v0 through ToolMenu + TextFeatures.

The menu holds the honest solution and the PyTorch hack, so every judgement after the first of
each is a judgement-cache hit and a few hundred real env steps stay cheap.
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
import torch

from cuda_gym.wrappers import TextFeatures, ToolMenu
from env_helpers import CPU_ID, HACK, HONEST, TASK_ID

SOLUTIONS = [HONEST.files, HACK]


def make_env() -> gym.Env:
    """CpuKernel-Builtin-v0 on one task, short episodes, driven by a menu and seen as features."""
    env = gym.wrappers.RecordEpisodeStatistics(gym.make(CPU_ID, task_ids=[TASK_ID], max_turns=6))
    return TextFeatures(ToolMenu(env, SOLUTIONS), dim=64)


def test_sb3_ppo_trains_on_the_menu_env(tmp_path) -> None:
    sb3 = pytest.importorskip("stable_baselines3")
    from stable_baselines3.common.env_checker import check_env
    from stable_baselines3.common.monitor import Monitor

    env = Monitor(make_env())
    check_env(env, warn=True)
    from stable_baselines3.common.logger import configure

    model = sb3.PPO("MlpPolicy", env, n_steps=64, batch_size=32, n_epochs=2, seed=0, device="cpu", verbose=0)
    model.set_logger(configure(str(tmp_path / "sb3"), []))  # SB3's default logger makes /tmp/SB3-<date> folders
    model.learn(total_timesteps=256)
    rewards = env.get_episode_rewards()
    assert model.num_timesteps >= 256 and len(rewards) >= 256 // 6
    assert set(rewards) <= {-1.0, 0.0, 1.0, 2.0, 3.0}
    assert -1.0 in rewards and any(r >= 1 for r in rewards)  # both solutions got judged
    action, _ = model.predict(env.reset(seed=0)[0], deterministic=True)
    assert env.action_space.contains(int(action))
    env.close()


def test_skrl_ppo_trains_on_the_menu_env(tmp_path) -> None:
    pytest.importorskip("skrl")
    from skrl.agents.torch.ppo import PPO
    from skrl.envs.wrappers.torch import wrap_env
    from skrl.memories.torch import RandomMemory
    from skrl.models.torch import CategoricalMixin, DeterministicMixin, Model
    from skrl.trainers.torch import SequentialTrainer

    class Policy(CategoricalMixin, Model):
        def __init__(self, observation_space, action_space, device):
            Model.__init__(self, observation_space=observation_space, action_space=action_space, device=device)
            CategoricalMixin.__init__(self, unnormalized_log_prob=True)
            self.net = torch.nn.Sequential(torch.nn.Linear(self.num_observations, 32), torch.nn.Tanh(),
                                           torch.nn.Linear(32, self.num_actions))

        def compute(self, inputs, role=""):
            return self.net(inputs["observations"]), {}

    class Value(DeterministicMixin, Model):
        def __init__(self, observation_space, action_space, device):
            Model.__init__(self, observation_space=observation_space, action_space=action_space, device=device)
            DeterministicMixin.__init__(self)
            self.net = torch.nn.Sequential(torch.nn.Linear(self.num_observations, 32), torch.nn.Tanh(),
                                           torch.nn.Linear(32, 1))

        def compute(self, inputs, role=""):
            return self.net(inputs["observations"]), {}

    vec = gym.vector.SyncVectorEnv([make_env, make_env])
    env = wrap_env(vec, wrapper="gymnasium")
    device = "cpu"
    memory = RandomMemory(memory_size=32, num_envs=env.num_envs, device=device)
    models = {
        "policy": Policy(env.observation_space, env.action_space, device),
        "value": Value(env.observation_space, env.action_space, device),
    }
    cfg = {
        "rollouts": 32,
        "learning_epochs": 2,
        "mini_batches": 2,
        "experiment": {"directory": str(tmp_path), "write_interval": 0, "checkpoint_interval": 0},
    }
    agent = PPO(models=models, memory=memory, observation_space=env.observation_space,
                action_space=env.action_space, device=device, cfg=cfg)
    before = [p.detach().clone() for p in models["policy"].parameters()]
    trainer = SequentialTrainer(env=env, agents=agent, cfg={"timesteps": 128, "headless": True,
                                                            "disable_progressbar": True,
                                                            "close_environment_at_exit": False})
    trainer.train()
    after = list(models["policy"].parameters())
    assert any(not torch.equal(b, a) for b, a in zip(before, after))  # PPO updated the policy
    returns = [r for sub in vec.envs for r in sub.get_wrapper_attr("return_queue")]
    assert len(returns) >= 2 * 128 // 6 - 2  # episodes of at most 6 turns over 256 env steps
    assert set(np.round(returns, 6)) <= {-1.0, 0.0, 1.0, 2.0, 3.0}
    env.close()
