"""The trainer with a tiny random model and a tokenizer built in code (no download, ``HF_HUB_OFFLINE=1``):
token-in-token-out rollouts, masks, KL and ratio invariants, overflow, rejection fine-tuning from
RecordTrajectories files, checkpoints and resume, the CLI's stage chain, and a learning run on a
text env of our own where the right tool call wins."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import pytest  # noqa: E402

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

import gymnasium as gym  # noqa: E402

from cuda_gym.baselines.ppo_llm import losses  # noqa: E402
from cuda_gym.baselines.ppo_llm.config import TrainConfig, read_config_file, stage_config  # noqa: E402
from cuda_gym.baselines.ppo_llm.models import build_models, make_reference  # noqa: E402
from cuda_gym.baselines.ppo_llm.rollout import ChatFormat, Rollout, trajectory_from_record  # noqa: E402
from cuda_gym.baselines.ppo_llm.stages import run_stage  # noqa: E402
from cuda_gym.baselines.ppo_llm.tiny import ToolChoiceEnv, register_toy_env, word_tokenizer  # noqa: E402
from cuda_gym.errors import ConfigError  # noqa: E402
from cuda_gym.tools import format_tool_call  # noqa: E402
from cuda_gym.wrappers import RecordTrajectories  # noqa: E402

TOY = register_toy_env()
TINY_MODEL = {"model_type": "llama", "hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 2,
              "num_attention_heads": 4, "num_key_value_heads": 2, "max_position_embeddings": 256}


@pytest.fixture(scope="module", autouse=True)
def one_thread():
    """Tiny models run ~10x faster on one thread of a loaded 2-core machine than on two."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(scope="module")
def tokenizer_dir(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("toy_tokenizer")
    word_tokenizer(ToolChoiceEnv().texts()).save_pretrained(str(folder))
    return folder


@pytest.fixture(scope="module")
def full_dir(tmp_path_factory) -> Path:
    """A word tokenizer that also covers the system prompt and the tool listing (no unknown pieces)."""
    from cuda_gym.baselines.ppo_llm.tiny import CHATML_TEMPLATE
    from cuda_gym.tools import tool_schemas

    folder = tmp_path_factory.mktemp("full_tokenizer")
    texts = ToolChoiceEnv().texts() + [json.dumps(tool_schemas()), CHATML_TEMPLATE, "Be brief."]
    word_tokenizer(texts).save_pretrained(str(folder))
    return folder


def settings(tokenizer_dir: Path, out: Path, **overrides) -> dict:
    base = dict(model="random", tokenizer=str(tokenizer_dir), model_config=TINY_MODEL, env_id=TOY,
                env_kwargs={"targets": ["submit"]}, output_dir=out, episodes_per_step=8, num_envs=8,
                max_context_tokens=128, max_prompt_tokens=64, max_obs_tokens=32, max_new_tokens=3, system_prompt=None,
                pass_tools=False, actor_lr=1e-2, critic_lr=3e-3, micro_batch_size=8, minibatches=2, ppo_epochs=2,
                kl_coef=0.0, save_every=100, progress=False, tensorboard=False)
    base.update(overrides)
    return base


def models_for(tokenizer_dir: Path, out: Path, **overrides):
    from cuda_gym.baselines.ppo_llm.stages import base_model

    config = stage_config("ppo", None, settings(tokenizer_dir, out, **overrides))
    torch.manual_seed(0)
    base, gguf = base_model(config, TOY)
    return config, build_models(config, None, base, gguf)


def test_rollout_is_token_in_token_out_through_the_chat_template(full_dir, tmp_path) -> None:
    config, models = models_for(full_dir, tmp_path, system_prompt="Be brief.", pass_tools=True, max_new_tokens=4,
                                max_prompt_tokens=4096, max_context_tokens=8192, max_obs_tokens=64)
    rollout = Rollout(config, TOY, models, record=tmp_path / "episodes.jsonl")
    try:
        trajs, stats = rollout.collect(6)
    finally:
        rollout.close()
    tok = models.tokenizer
    records = [json.loads(line) for line in (tmp_path / "episodes.jsonl").read_text().splitlines()]
    assert len(trajs) == 6 and stats.env_steps == sum(t.turns for t in trajs) and len(records) == 6
    for traj in trajs:
        assert len(traj.ids) == len(traj.mask) and sum(traj.mask) == traj.generated
        # The reply tokens are the sampled ones; the rest is the template's rendering of the conversation.
        chat = rollout.chat(traj.info.get("tools") or ToolChoiceEnv().reset()[1]["tools"])
        record = next(r for r in records if r["steps"][-1]["info"]["turn"] == traj.turns and r["prompt"])
        messages = chat.head + [{"role": "user", "content": record["prompt"]}]
        spans, start = [], None
        for i, m in enumerate(traj.mask + [0]):
            if m and start is None:
                start = i
            if not m and start is not None:
                spans.append(traj.ids[start:i])
                start = None
        assert len(spans) == traj.turns
        for k, reply in enumerate(spans):
            ended = reply[-1] == tok.eos_token_id
            messages.append({"role": "assistant", "content": tok.decode(reply[:-1] if ended else reply)})
            if k + 1 < len(spans):
                messages.append({"role": "user", "content": "Wrong. Call the submit tool."})
        rendered = chat.render(messages, generation_prompt=False)
        decoded = tok.decode(traj.ids)
        assert rendered.startswith(decoded) and rendered[len(decoded):] in ("\n", "<|im_end|>\n")
    batch = None
    trainer_config = config
    from cuda_gym.baselines.ppo_llm.trainer import PPOTrainer

    batch = PPOTrainer(trainer_config, models).make_batch(trajs)
    for row, traj in enumerate(trajs):
        assert batch.input_ids[row, :len(traj.ids)].tolist() == traj.ids  # training ids == rollout ids
        last = max(i for i, m in enumerate(traj.mask) if m)
        assert batch.rewards[row].nonzero().flatten().tolist() == ([last] if traj.reward else [])


@pytest.mark.parametrize("lora", [0, 4])
def test_kl_is_exactly_zero_and_the_first_ratio_is_one(tokenizer_dir, tmp_path, lora) -> None:
    if lora:
        pytest.importorskip("peft")
    config, models = models_for(tokenizer_dir, tmp_path, kl_coef=0.1, lora_rank=lora,
                                critic="shared" if lora else "separate")
    make_reference(models, config)
    rollout = Rollout(config, TOY, models)
    try:
        trajs, _ = rollout.collect(8)
    finally:
        rollout.close()
    from cuda_gym.baselines.ppo_llm.trainer import PPOTrainer

    trainer = PPOTrainer(config, models)
    batch = trainer.make_batch(trajs)
    assert torch.count_nonzero(losses.kl_estimate(batch.old_logp, batch.ref_logp, "k1") * batch.mask) == 0
    metrics = trainer.update(batch)
    assert metrics["policy/first_minibatch_ratio"] == pytest.approx(1.0, abs=1e-6)
    assert metrics["policy/kl_ref"] == 0.0
    # After an update the policy moved away from the reference.
    after = trainer.make_batch(trajs)
    assert torch.count_nonzero((after.old_logp - after.ref_logp) * after.mask) > 0


def test_context_overflow_ends_the_episode_as_a_failure(tokenizer_dir, tmp_path) -> None:
    # A prompt of ~14 tokens, replies of up to 3 and an observation of ~13: the second turn does not fit in 24.
    config, models = models_for(tokenizer_dir, tmp_path, max_context_tokens=24, max_new_tokens=3, max_prompt_tokens=16,
                                env_kwargs={"targets": ["submit"], "tools": ["compile"]})
    rollout = Rollout(config, TOY, models)
    try:
        trajs, _ = rollout.collect(4)
    finally:
        rollout.close()
    assert all(t.overflow and t.reward == -1.0 and t.turns == 1 for t in trajs)
    for t in trajs:
        assert t.mask[-1] == 1 and len(t.ids) <= 24  # ends on the reply; the reward goes there


def record_toy_episodes(path: Path, actions: list[str]) -> None:
    env = RecordTrajectories(gym.make(TOY, targets=["submit"], max_turns=1), path)
    for i, action in enumerate(actions):
        env.reset(seed=i)
        env.step(action)
    env.close()


def test_rejection_fine_tuning_reads_recorded_episodes_and_trains_on_replies_only(tokenizer_dir, tmp_path) -> None:
    path = tmp_path / "episodes.jsonl"
    win, lose = format_tool_call("submit", {}), format_tool_call("compile", {})
    record_toy_episodes(path, [win, lose, win, lose, lose])
    config = stage_config("rft", None, settings(tokenizer_dir, tmp_path / "run", rft_episodes=0, steps=2,
                                                rft_trajectories=[str(path)], rft_threshold=1.0, rft_epochs=3,
                                                rft_lr=1e-2))
    final = run_stage("rft", config)
    rows = [json.loads(line) for line in (tmp_path / "run" / "rft" / "metrics.jsonl").read_text().splitlines()]
    assert rows[0]["rft/candidates"] == 5 and rows[0]["rft/kept"] == 2
    models = build_models(config, final, str(tmp_path / "run" / "base_model"), None)
    chat = ChatFormat(models.tokenizer, None, [])
    record = json.loads(path.read_text().splitlines()[0])
    traj = trajectory_from_record(record, chat, models.tokenizer.eos_token_id, config)
    assert sum(traj.mask) == len(chat.encode(win)) + 1  # the reply and its end of turn, nothing else
    # The fine-tuned actor now prefers the winning reply to the losing one.
    from cuda_gym.baselines.ppo_llm.trainer import pad_trajectories

    lose_traj = trajectory_from_record(json.loads(path.read_text().splitlines()[1]), chat,
                                       models.tokenizer.eos_token_id, config)
    ids, attn, mask = pad_trajectories([traj, lose_traj], models.tokenizer.pad_token_id)
    with torch.no_grad():
        logp = losses.token_logprobs(models.actor_logits(ids, attn), ids)
    assert float((logp[0] * mask[0]).sum()) > float((logp[1] * mask[1]).sum())


def test_the_mean_reward_rises_on_the_tool_choice_env(tokenizer_dir, tmp_path) -> None:
    """The learning test: a random 2-layer model learns to call the right tool within 20 PPO steps."""
    config = stage_config("ppo", None, settings(tokenizer_dir, tmp_path, steps=20, episodes_per_step=16, num_envs=16,
                                                micro_batch_size=16, ppo_epochs=4))
    run_stage("ppo", config)
    rows = [json.loads(line) for line in (tmp_path / "ppo" / "metrics.jsonl").read_text().splitlines()]
    rewards = [r["rollout/reward_mean"] for r in rows]
    first, last = sum(rewards[:4]) / 4, sum(rewards[-5:]) / 5
    assert len(rows) == 20 and last > first + 0.5 and last > 0.3, rewards
    assert all(r["policy/first_minibatch_ratio"] == pytest.approx(1.0, abs=1e-5) for r in rows)


def test_cli_pipeline_chains_the_four_stages_and_resumes(tokenizer_dir, tmp_path) -> None:
    from cuda_gym.cli import main

    toml = tmp_path / "train.toml"
    toml.write_text(f'''
model = "random"
tokenizer = "{tokenizer_dir}"
model_config.model_type = "llama"
model_config.hidden_size = 32
model_config.intermediate_size = 64
model_config.num_hidden_layers = 2
model_config.num_attention_heads = 4
model_config.num_key_value_heads = 2
env_id = "{TOY}"
env_kwargs = {{ targets = ["submit"] }}
output_dir = "{tmp_path / "run"}"
episodes_per_step = 4
num_envs = 4
max_context_tokens = 96
max_prompt_tokens = 64
max_new_tokens = 3
pass_tools = false
system_prompt = "Call the tool."
save_every = 2
progress = false
tensorboard = true

[warmup]
steps = 2
env_kwargs = {{ targets = ["submit"], max_turns = 1 }}

[rft]
rft_episodes = 4
rft_threshold = -1.0

[value]
steps = 1

[ppo]
steps = 3
''')
    assert main(["train", "pipeline", "--config", str(toml), "--kl-coef", "0.01"]) == 0
    run = tmp_path / "run"
    for stage in ("warmup", "rft", "value", "ppo"):
        assert (run / stage / "final" / "meta.json").is_file() and (run / stage / "metrics.jsonl").is_file()
    meta = json.loads((run / "ppo" / "final" / "meta.json").read_text())
    assert meta["config"]["kl_coef"] == 0.01 and meta["step"] == 3
    assert list((run / "ppo" / "tb").glob("events.*"))
    names = json.loads((run / "ppo" / "metrics.jsonl").read_text().splitlines()[0])
    for key in ("rollout/reward_mean", "milestone/-1", "rollout/pass_rate", "rollout/faster_than_compile_rate",
                "policy/kl_ref", "policy/entropy", "value/loss", "policy/clipfrac", "perf/tokens_per_s",
                "perf/env_steps_per_s", "perf/judge_queue_wait_s", "perf/judge_share"):
        assert key in names
    value_rows = [json.loads(line) for line in (run / "value" / "metrics.jsonl").read_text().splitlines()]
    assert "policy/loss" not in value_rows[0] and "value/loss" in value_rows[0]  # the actor is frozen there
    # Interrupted after its checkpoint at step 2: the rerun continues at step 3 and goes on to 5.
    shutil.rmtree(run / "ppo" / "final")
    lines = (run / "ppo" / "metrics.jsonl").read_text().splitlines()
    (run / "ppo" / "metrics.jsonl").write_text("\n".join(lines[:2]) + "\n")
    assert main(["train", "ppo", "--config", str(toml), "--steps", "5", "--start", str(run / "value" / "final")]) == 0
    steps = [json.loads(line)["step"] for line in (run / "ppo" / "metrics.jsonl").read_text().splitlines()]
    assert steps == [1, 2, 3, 4, 5]


def test_config_errors_name_the_fix(tmp_path) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text('model = "x"\nlearning_rate = 1\n')
    with pytest.raises(ConfigError, match="unknown setting.*learning_rate.*valid settings"):
        read_config_file(bad)
    with pytest.raises(ConfigError, match="lora_rank > 0"):
        TrainConfig(critic="shared")
    with pytest.raises(ConfigError, match="model_type"):
        TrainConfig(model="random")
    with pytest.raises(ConfigError, match="max_new_tokens"):
        TrainConfig(max_new_tokens=10, max_context_tokens=10)
    with pytest.raises(ConfigError, match="must fit in max_context_tokens"):
        TrainConfig(max_prompt_tokens=100, max_new_tokens=10, max_context_tokens=100)
