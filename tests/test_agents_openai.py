"""OpenAIAgent against a real HTTP server on 127.0.0.1 speaking chat completions with scripted replies:
malformed tool calls, a server error the retry survives, a text reply, and a context overflow that
ends the episode with a judged submit."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import gymnasium as gym
import pytest

pytest.importorskip("openai")

from cuda_gym.baselines.agents import OpenAIAgent, OpenAIAgentConfig, run_episode  # noqa: E402
from cuda_gym.baselines.agents.chat import Conversation  # noqa: E402
from cuda_gym.errors import ConfigError, CudaGymError  # noqa: E402
from cuda_gym.tools import tool_schemas  # noqa: E402
from env_helpers import CPU_ID, TASK_ID  # noqa: E402

Reply = tuple[int, dict[str, Any]]


def completion(message: dict[str, Any], prompt_tokens: int = 100, completion_tokens: int = 10) -> Reply:
    """A 200 chat.completion answer holding ``message``."""
    finish = "tool_calls" if message.get("tool_calls") else "stop"
    return 200, {
        "id": "chatcmpl-test", "object": "chat.completion", "created": 0, "model": "scripted",
        "choices": [{"index": 0, "message": {"role": "assistant", **message}, "finish_reason": finish}],
        "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
                  "total_tokens": prompt_tokens + completion_tokens},
    }


def tool_call(name: str, arguments: str, call_id: str) -> Reply:
    """A reply with one tool call whose ``arguments`` string is sent as written."""
    return completion({"content": None, "tool_calls": [
        {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}]})


SERVER_ERROR: Reply = (500, {"error": {"message": "upstream worker died", "type": "server_error"}})
OVERFLOW: Reply = (400, {"error": {
    "message": "This model's maximum context length is 4096 tokens. However, you requested 9000 tokens.",
    "type": "invalid_request_error", "param": "messages", "code": "context_length_exceeded"}})


class ScriptedServer:
    """A chat-completions endpoint that answers each POST with the next scripted reply and records
    every request body."""

    def __init__(self, replies: list[Reply]) -> None:
        self.replies = list(replies)
        self.requests: list[dict[str, Any]] = []
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 (http.server's name)
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                server.requests.append({"path": self.path, "auth": self.headers.get("Authorization"), **body})
                status, payload = server.replies.pop(0) if server.replies else SERVER_ERROR
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: Any) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def serve() -> Iterator[Any]:
    servers: list[ScriptedServer] = []

    def start(replies: list[Reply]) -> ScriptedServer:
        servers.append(ScriptedServer(replies))
        return servers[-1]

    yield start
    for server in servers:
        server.close()


def make_agent(server: ScriptedServer, monkeypatch: pytest.MonkeyPatch, **kwargs: Any) -> OpenAIAgent:
    monkeypatch.setenv("CUDA_GYM_TEST_KEY", "sk-test-123")
    config = OpenAIAgentConfig(model="scripted", base_url=server.url, api_key_env="CUDA_GYM_TEST_KEY",
                               backoff_s=0.01, **kwargs)
    return OpenAIAgent(config)


def test_episode_with_malformed_calls_a_server_error_and_a_context_overflow(serve, monkeypatch) -> None:
    server = serve([
        tool_call("read_file", '{"path": "model.py"', "call_bad"),  # arguments: broken JSON
        SERVER_ERROR,  # the retry survives it
        tool_call("read_file", '{"path": "model.py"}', "call_read"),
        completion({"content": 'Looking around. <tool_call>{"name": "glob", "arguments": {"pattern": "*"}}</tool_call>'}),
        OVERFLOW, OVERFLOW, OVERFLOW,  # cut, cut harder, then give up: submit
    ])
    agent = make_agent(server, monkeypatch)
    env = gym.make(CPU_ID, task_ids=[TASK_ID], max_turns=8)
    try:
        episode = run_episode(env, agent, seed=0)
    finally:
        env.close()

    # The episode ended cleanly: the agent submitted and the judge scored the untouched stub.
    assert episode.terminated and episode.steps == 4 and episode.info["final_eval"]
    assert episode.reward == -1 and agent.stop_reason == "context_overflow"
    assert agent.usage.as_dict() == {"requests": 3, "retries": 1, "prompt_tokens": 300, "completion_tokens": 30,
                                     "context_cuts": 3}

    reqs = server.requests
    assert len(reqs) == 7 and all(r["path"] == "/v1/chat/completions" for r in reqs)
    assert reqs[0]["auth"] == "Bearer sk-test-123" and reqs[0]["model"] == "scripted"
    assert reqs[0]["tools"] == tool_schemas()  # the env's schemas from info["tools"]
    assert [m["role"] for m in reqs[0]["messages"]] == ["system", "user"]
    assert reqs[0]["messages"][1]["content"].startswith(f"Task {TASK_ID}")

    # The malformed call went to the env as written; its error came back as the call's tool message.
    msgs = reqs[3]["messages"]
    assert reqs[1] == reqs[2] | {"auth": reqs[1]["auth"]}  # the retried request is the same request
    assert msgs[2]["tool_calls"][0]["id"] == "call_bad"
    assert msgs[2]["tool_calls"][0]["function"]["arguments"] == '{"path": "model.py"'
    assert msgs[3]["role"] == "tool" and msgs[3]["tool_call_id"] == "call_bad"
    assert "not valid JSON" in msgs[3]["content"]
    assert msgs[4]["tool_calls"][0]["id"] == "call_read"
    assert msgs[5]["role"] == "tool" and msgs[5]["tool_call_id"] == "call_read" and "class Model" in msgs[5]["content"]

    # A text reply is kept as text; the observation of the call parsed from it is a user message.
    overflow = reqs[4]["messages"]
    assert overflow[6]["role"] == "assistant" and "tool_calls" not in overflow[6]
    assert "<tool_call>" in overflow[6]["content"] and overflow[7]["role"] == "user"
    assert "model.py" in overflow[7]["content"]

    # After each overflow the conversation was cut harder: old tool output first, the head kept.
    sizes = [len(json.dumps(r["messages"])) for r in reqs[4:7]]
    assert sizes[0] > sizes[1] >= sizes[2]
    cut = reqs[5]["messages"]
    assert cut[:2] == reqs[0]["messages"] and cut[-2:] == overflow[-2:]
    assert cut[5]["content"].startswith("[older tool output cut") and cut[5]["tool_call_id"] == "call_read"


def test_retries_give_up_with_a_message(serve, monkeypatch) -> None:
    server = serve([SERVER_ERROR, SERVER_ERROR, SERVER_ERROR])
    agent = make_agent(server, monkeypatch, max_retries=2)
    agent.reset("Task x: make it fast.", {"tools": tool_schemas(["read_file", "submit"])})
    with pytest.raises(CudaGymError, match="failed 3 times"):
        agent.act("", {})
    assert len(server.requests) == 3 and agent.usage.retries == 2
    assert [t["function"]["name"] for t in server.requests[0]["tools"]] == ["read_file", "submit"]


def test_unknown_tool_and_several_calls(serve, monkeypatch) -> None:
    two = completion({"content": None, "tool_calls": [
        {"id": "a", "type": "function", "function": {"name": "glob", "arguments": '{"pattern": "*.py"}'}},
        {"id": "b", "type": "function", "function": {"name": "compile", "arguments": "{}"}}]})
    server = serve([tool_call("rm_rf", "{}", "c0"), two])
    agent = make_agent(server, monkeypatch)
    agent.reset("Task x", {"tools": tool_schemas()})
    first = agent.act("", {})
    assert '"rm_rf"' in first  # passed on as written: the env answers "unknown tool"
    second = agent.act("Error: unknown tool 'rm_rf'.", {})
    assert '"glob"' in second and "compile" not in second
    sent = server.requests[1]["messages"]
    assert sent[-1] == {"role": "tool", "tool_call_id": "c0", "content": "Error: unknown tool 'rm_rf'."}
    # Only the call the env ran is kept, so every tool call in the history has its tool message.
    assert [c["id"] for c in agent.conversation.messages[-1]["tool_calls"]] == ["a"]


def test_conversation_fit_cuts_old_observations_first() -> None:
    conv = Conversation()
    conv.start("the task " * 50, "system")
    for i in range(4):
        conv.add({"role": "assistant", "content": f"thinking {i} " * 20})
        conv.add({"role": "tool", "content": f"output {i} " * 200})
    full = conv.fit(10**6)
    assert full == conv.messages and full is not conv.messages
    cut = conv.fit(1200)
    assert cut[:2] == conv.messages[:2] and cut[-2:] == conv.messages[-2:]
    assert cut[3]["content"].startswith("[older tool output cut")  # the oldest tool output went first
    assert cut[2]["content"] == conv.messages[2]["content"]  # assistant text only once observations are gone
    tiny = conv.fit(10)
    assert all(m["content"].startswith("[older") for m in tiny[2:-2])


def test_config_errors_say_what_to_do(monkeypatch) -> None:
    monkeypatch.delenv("OPENAI_MODEL", raising=False)
    with pytest.raises(ConfigError, match="OPENAI_MODEL"):
        OpenAIAgent(OpenAIAgentConfig(base_url="http://127.0.0.1:9/v1"))
    with pytest.raises(ConfigError, match="context_tokens"):
        OpenAIAgentConfig(model="m", max_tokens=4096, context_tokens=4096)
