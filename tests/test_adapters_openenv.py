"""The OpenEnv adapter: the server built by OpenEnv's create_app, answered over HTTP and WebSocket by
OpenEnv's own client, two sessions at once; timeout_s honoured."""

from __future__ import annotations

import asyncio
import socket
import threading
import time
import uuid
from collections.abc import Iterator

import httpx
import pytest
import uvicorn

from cuda_gym.adapters.openenv import (
    CudaKernelClient,
    CudaKernelEnvironment,
    CudaObservation,
    CudaToolAction,
    make_app,
)
from cuda_gym.errors import EpisodeOverError
from env_helpers import CPU_ID, ENV_KWARGS, HACK, HONEST, TASK_ID


@pytest.fixture(scope="module")
def server() -> Iterator[str]:
    """A uvicorn server of the app on a free local port; yields its base URL."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    config = uvicorn.Config(make_app(CPU_ID, max_sessions=4, **ENV_KWARGS), host="127.0.0.1", port=port,
                            log_level="warning", ws_max_size=64 * 1024 * 1024)
    srv = uvicorn.Server(config)
    thread = threading.Thread(target=srv.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not srv.started:
        assert time.monotonic() < deadline and thread.is_alive(), "the server did not start"
        time.sleep(0.05)
    yield f"http://127.0.0.1:{port}"
    srv.should_exit = True
    thread.join(timeout=30)


def test_the_app_serves_openenvs_routes(server: str) -> None:
    assert httpx.get(f"{server}/health").status_code == 200
    schema = httpx.get(f"{server}/schema").json()
    assert "tool" in schema["action"]["properties"] and "text" in schema["observation"]["properties"]


async def _episode(url: str, files: dict[str, str]) -> tuple[CudaObservation, list[str], dict]:
    async with CudaKernelClient(url) as client:
        reset = await client.reset(task_id=TASK_ID)
        assert TASK_ID in reset.observation.text and reset.observation.info["tools"]
        texts = []
        for path, content in files.items():
            step = await client.step(CudaToolAction(tool="write_file", arguments={"path": path, "content": content}))
            texts.append(step.observation.text)
        final = await client.step(CudaToolAction(tool="submit"))
        assert final.done and final.reward == final.observation.reward
        state = (await client.state()).model_dump()
        return final.observation, texts, state


@pytest.mark.slow  # the first judgement of a run measures the baselines (minutes on 2 cores)
def test_two_sessions_at_once_over_the_websocket_each_with_its_workspace(server: str) -> None:
    async def both() -> tuple:
        return await asyncio.gather(_episode(server, HONEST.files), _episode(server, HACK))

    (honest, honest_texts, honest_state), (hack, hack_texts, hack_state) = asyncio.run(both())
    assert honest.reward is not None and honest.reward >= 1
    assert honest.info["milestone"] == honest.reward and honest.info["final_eval"]
    assert hack.reward == -1 and hack.info["milestone"] == -1
    assert "created kernels/" in honest_texts[0] and "created kernels/" in hack_texts[0]  # fresh workspaces
    for state in (honest_state, hack_state):
        assert state["task_id"] == TASK_ID and state["done"] and state["step_count"] == len(HONEST.files) + 1
    assert (honest_state["milestone"], hack_state["milestone"]) == (honest.reward, -1)


def test_timeout_s_is_honoured() -> None:
    env = CudaKernelEnvironment(CPU_ID, **ENV_KWARGS)
    try:
        env.reset(task_id=TASK_ID)
        started = time.monotonic()
        step = env.step(CudaToolAction(tool="bash", arguments={"command": "sleep 30", "timeout": 60}), timeout_s=5)
        assert time.monotonic() - started < 5 and "3 s wall-time limit" in step.text and not step.done
        # A workspace no earlier test judged (the judgement cache would answer at once): the judge needs seconds.
        env.step(CudaToolAction(tool="bash", arguments={"command": f"echo '# {uuid.uuid4().hex}' >> model_new.py"}))
        step = env.step(CudaToolAction(tool="verify"), timeout_s=0.01)
        assert step.done and step.reward is None and step.info["timed_out"] and "timeout_s" in step.text
        with pytest.raises(EpisodeOverError):
            env.step(CudaToolAction(tool="compile"))
        assert TASK_ID in env.reset(task_id=TASK_ID).text  # a fresh episode after a timed-out one
    finally:
        env.close()


def test_a_file_name_that_is_not_utf8_is_the_agents_minus_1() -> None:
    """Red-team D's A2 through OpenEnv: verify answers an Error text, submit ends the episode at -1."""
    env = CudaKernelEnvironment(CPU_ID, **ENV_KWARGS)
    try:
        env.reset(task_id=TASK_ID)
        env.step(CudaToolAction(tool="bash", arguments={"command": "touch $'\\xff'"}))
        step = env.step(CudaToolAction(tool="verify"))
        assert step.text.startswith("Error: the file name \\xff is not valid UTF-8") and not step.done, step.text
        step = env.step(CudaToolAction(tool="submit"))
        assert step.done and step.reward == -1 and step.info["milestone"] == -1
    finally:
        env.close()
