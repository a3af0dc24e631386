"""Task synthesis: the rule composer is seeded and its programs run; synthesize writes only tasks that
validate; the LLM composer talks to a real HTTP server speaking chat completions on 127.0.0.1."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
import torch

from cuda_gym.tasks import load_tasks
from cuda_gym.tasks.synthesize import (
    CATALOGUE,
    Op,
    RuleComposer,
    Step,
    extract_code,
    synthesize,
)
from cuda_gym.tasks.task import check_code
from cuda_gym.tasks.validate import ValidationConfig, read_report

RULES = "eager,deterministic,varies,memory,static_shape,timing"


def quick(**kw: Any) -> ValidationConfig:
    """CPU validation of small tasks: no time floor (tiny tasks take microseconds), no reference set."""
    return ValidationConfig(**{"device": "cpu", "rules": RULES, "min_ms": 0.0, "jobs": 1, **kw})


def test_rule_composer_is_seeded_and_its_programs_run() -> None:
    a, b, other = RuleComposer(seed=5, size="small"), RuleComposer(seed=5, size="small"), RuleComposer(seed=6, size="small")
    first = [a.candidate(i) for i in range(30)]
    assert [c.code for c in first] == [b.candidate(i).code for i in range(30)]
    assert [c.code for c in first] != [other.candidate(i).code for i in range(30)]
    assert all(1 <= len(c.ops) <= 5 for c in first) and len({c.ops for c in first}) > 20
    ran = 0
    for cand in first:
        check_code(cand.code, cand.name)
        loaded = cand.task().load()
        model = loaded.Model(*loaded.get_init_inputs()).eval()
        with torch.no_grad():
            try:
                out = model(*loaded.get_inputs())
            except RuntimeError:
                continue  # e.g. InstanceNorm on a 1x1 map: the validator rejects these
        assert isinstance(out, torch.Tensor) and torch.isfinite(out).all()
        ran += 1
    assert ran >= 27, f"only {ran} of 30 composed programs run: the shape rules are wrong"


def test_every_catalogue_op_appears() -> None:
    composer = RuleComposer(seed=0, size="small")
    seen = {op for i in range(400) for op in composer.candidate(i).ops}
    assert seen == {op.name for op in CATALOGUE}


def test_synthesize_writes_only_validated_tasks_and_resumes(tmp_path: Path) -> None:
    out = tmp_path / "synth"
    result = synthesize(RuleComposer(seed=1, size="small"), out, 4, quick())
    assert len(result.written) == 4 and all(p.exists() for p in result.written)
    tasks = load_tasks("custom", path=out)
    assert sorted(t.id for t in tasks) == sorted(f"custom/{p.stem}" for p in result.written)
    manifest = [json.loads(line) for line in (out / "manifest.jsonl").read_text().splitlines()]
    assert sorted(m["name"] for m in manifest) == sorted(p.stem for p in result.written)
    records = {r.task_id: r for r in read_report(out / "validation.jsonl")}
    assert all(records[t.id].passed for t in tasks)
    assert all(not records[f"custom/{name}"].passed for name in result.rejected if f"custom/{name}" in records)
    again = synthesize(RuleComposer(seed=1, size="small"), out, 4, quick())
    assert again.written == sorted(result.written) and again.candidates == 0


def _constant_op() -> Op:
    """An operator chain that always yields ones: softmax rows summed."""
    def make(rng: Any, s: Any, p: str) -> Step:
        return Step("softmax_sum", [], [], "F.softmax(x, dim=-1).sum(-1, keepdim=True)", s)
    return Op("softmax_sum", ("flat", "seq"), make)


def test_degenerate_compositions_are_rejected(tmp_path: Path) -> None:
    composer = RuleComposer(seed=2, size="small", min_ops=1, max_ops=1,
                            catalogue=[_constant_op(), *[op for op in CATALOGUE if op.name == "nn.Linear"]])
    result = synthesize(composer, tmp_path / "out", 20, quick(rules="eager,varies"), max_candidates=12)
    assert result.rejected and all(rules == ["varies"] for rules in result.rejected.values())
    written = [p.read_text() for p in result.written]
    assert written and all("softmax(x, dim=-1).sum" not in code for code in written)
    assert len(written) + len(result.rejected) <= 12


TASK_REPLY = '''Here is the task.

```python
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, features):
        super().__init__()
        self.norm = nn.LayerNorm(features)

    def forward(self, x):
        return torch.relu(self.norm(x)) * 2.0


batch_size = 4
features = 32


def get_inputs():
    return [torch.randn(batch_size, features)]


def get_init_inputs():
    return [features]
```
'''


class ChatServer:
    """A chat-completions endpoint on 127.0.0.1 answering each POST with the next scripted text."""

    def __init__(self, texts: list[str]) -> None:
        self.texts, self.requests = list(texts), []  # type: ignore[var-annotated]
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 (http.server's name)
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                server.requests.append(body)
                text = server.texts.pop(0) if server.texts else "no more"
                data = json.dumps({
                    "id": "chatcmpl-1", "object": "chat.completion", "created": 0, "model": body["model"],
                    "choices": [{"index": 0, "finish_reason": "stop",
                                 "message": {"role": "assistant", "content": text}}],
                    "usage": {"prompt_tokens": 10, "completion_tokens": 10, "total_tokens": 20}}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: Any) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"


@pytest.fixture
def chat() -> Iterator[ChatServer]:
    server = ChatServer([TASK_REPLY, "I cannot write that task.", TASK_REPLY])
    yield server
    server.httpd.shutdown()


def test_llm_composer_through_an_openai_compatible_endpoint(chat: ChatServer, tmp_path: Path) -> None:
    pytest.importorskip("openai")
    from cuda_gym.tasks.synthesize import LLMComposer

    composer = LLMComposer(chat.url, "scripted-model", api_key="k", seed=4, size="small", max_ops=3)
    result = synthesize(composer, tmp_path / "llm", 1, quick(rules="eager,varies,deterministic"), max_candidates=3)
    assert len(result.written) == 1 and "nn.LayerNorm(features)" in result.written[0].read_text()
    assert list(result.rejected.values()) == [["code"]]  # the refusal is no task file
    assert len(chat.requests) == 3  # the third answer repeats the first: not validated twice
    prompt = chat.requests[0]["messages"][0]["content"]
    drawn = RuleComposer(seed=4, size="small", max_ops=3).draw(0)[0]
    assert all(step.op in prompt for step in drawn) and chat.requests[0]["model"] == "scripted-model"
    assert extract_code("no fences at all") == "no fences at all\n"
