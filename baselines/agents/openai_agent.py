"""OpenAIAgent: an agent served by any OpenAI-compatible chat-completions server (vLLM, SGLang, an API)."""

from __future__ import annotations

import json
import logging
import os
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

from cuda_gym.baselines.agents.chat import SYSTEM_PROMPT, Conversation, Usage, estimate_tokens
from cuda_gym.errors import ConfigError, CudaGymError
from cuda_gym.tools import format_tool_call, from_openai_tool_call
from cuda_gym.tools.protocol import CLOSE_TAG, OPEN_TAG

logger = logging.getLogger(__name__)


@dataclass
class OpenAIAgentConfig:
    """Settings of :class:`OpenAIAgent` (also the ``cuda-gym eval --agent openai`` options)."""

    model: str = ""
    """Model name the server serves; empty reads ``OPENAI_MODEL`` from the environment."""
    base_url: str | None = None
    """Server URL such as ``http://127.0.0.1:8000/v1``; ``None`` reads ``OPENAI_BASE_URL`` (else OpenAI's API)."""
    api_key_env: str = "OPENAI_API_KEY"
    """Environment variable holding the API key (local servers accept any key: ``EMPTY`` when unset)."""
    temperature: float = 0.0
    """Sampling temperature of every request."""
    top_p: float | None = None
    """Nucleus sampling; ``None`` leaves the server's default."""
    max_tokens: int = 4096
    """Most tokens of one reply."""
    context_tokens: int = 32768
    """The model's context: the prompt is cut to ``context_tokens - max_tokens`` (old tool output first)."""
    max_retries: int = 5
    """Retries of one request after a server error (5xx), a rate limit (429) or a lost connection."""
    backoff_s: float = 1.0
    """First wait between retries; it doubles each retry (capped at 60 s)."""
    timeout_s: float = 600.0
    """Seconds one request may take."""
    system_prompt: str | None = SYSTEM_PROMPT
    """The system message; ``None`` sends none."""
    extra_body: dict[str, Any] = field(default_factory=dict)
    """Extra request fields the server understands (vLLM's ``top_k``, ``chat_template_kwargs``...)."""

    def __post_init__(self) -> None:
        if self.max_tokens < 1 or self.context_tokens <= self.max_tokens:
            raise ConfigError(
                f"context_tokens ({self.context_tokens}) must exceed max_tokens ({self.max_tokens}) >= 1: "
                "set context_tokens to the model's context length"
            )
        if self.max_retries < 0 or self.backoff_s < 0:
            raise ConfigError("max_retries and backoff_s must be >= 0")


def _is_overflow(exc: Exception) -> bool:
    """Whether a 400 answer says the prompt exceeds the context (OpenAI's code or vLLM/SGLang's text)."""
    code = getattr(exc, "code", None)
    text = str(exc).lower()
    return code == "context_length_exceeded" or "context length" in text or "context window" in text \
        or "maximum context" in text or "too many tokens" in text


class OpenAIAgent:
    """An LLM agent behind an OpenAI-compatible chat-completions endpoint, with the env's tools.

    ``reset`` starts a conversation with the system message and the task prompt and takes the env's
    tool schemas from ``info["tools"]``; each ``act`` sends the conversation with those ``tools``
    and turns the reply into the env's action text: the first tool call as a Hermes
    ``<tool_call>`` block (a malformed one is passed on as written, so the env's error reaches the
    model), or the reply's text when it made no call (the env parses calls in text too). The env's
    observation comes back as a ``tool`` message answering that call (or a ``user`` message after a
    text reply).

    Server errors, rate limits and lost connections are retried with exponential backoff. The
    conversation is cut to the context budget before each request (old tool output first); when the
    server still answers that the context overflowed, the agent cuts harder twice and then ends the
    episode with a ``submit`` call (``stop_reason = "context_overflow"``), so the workspace is
    judged as it stands. ``usage`` sums tokens and requests over the agent's life.
    """

    def __init__(self, config: OpenAIAgentConfig | None = None, *, client: Any = None, **overrides: Any) -> None:
        base = config or OpenAIAgentConfig()
        self.config = OpenAIAgentConfig(**{**base.__dict__, **overrides}) if overrides else base
        self.model = self.config.model or os.environ.get("OPENAI_MODEL", "")
        if not self.model:
            raise ConfigError("OpenAIAgent needs a model name: pass model=... or set OPENAI_MODEL")
        self.client = client if client is not None else self._make_client()
        self.conversation = Conversation()
        self.tools: list[dict[str, Any]] = []
        self.usage = Usage()
        self.stop_reason = ""
        self._pending_call_id: str | None = None

    def _make_client(self) -> Any:
        try:
            from openai import OpenAI
        except ImportError as exc:
            raise ConfigError("OpenAIAgent needs the openai package: pip install 'cuda-gym[agents]'") from exc
        return OpenAI(
            base_url=self.config.base_url,
            api_key=os.environ.get(self.config.api_key_env) or "EMPTY",
            max_retries=0,  # retried here, with our backoff and counts
            timeout=self.config.timeout_s,
        )

    # -- Agent interface --------------------------------------------------------------------------

    def reset(self, obs: str, info: dict[str, Any]) -> None:
        """Start a conversation on the task prompt ``obs`` with the tools of ``info["tools"]``."""
        self.conversation.start(obs, self.config.system_prompt)
        self.tools = list(info.get("tools") or [])
        self.stop_reason = ""
        self._pending_call_id = None

    def act(self, obs: str, info: dict[str, Any]) -> str:
        """Send the conversation (with ``obs``, the last action's observation) and return the next action."""
        if self.stop_reason:
            return format_tool_call("submit", {})
        if len(self.conversation.messages) > self.conversation.head:  # obs answers our last action
            if self._pending_call_id is not None:
                self.conversation.add({"role": "tool", "tool_call_id": self._pending_call_id, "content": obs})
            else:
                self.conversation.add({"role": "user", "content": obs})
        self._pending_call_id = None
        message = self._complete()
        if message is None:
            logger.warning("the conversation overflows the context of %s even cut: ending the episode with submit",
                           self.model)
            self.stop_reason = "context_overflow"
            return format_tool_call("submit", {})
        return self._to_action(message)

    # -- requests ---------------------------------------------------------------------------------

    def _complete(self) -> Any:
        """One completion of the conversation, retried on transient errors and cut on overflow;
        ``None`` when the server still says the context overflows after two harder cuts."""
        budget = self.config.context_tokens - self.config.max_tokens
        for cut in range(3):
            messages = self.conversation.fit(budget)
            try:
                response = self._request(messages)
            except Exception as exc:
                if _is_overflow(exc) and getattr(exc, "status_code", 400) == 400:
                    self.usage.context_cuts += 1
                    budget = min(budget, estimate_tokens(messages)) // 2
                    logger.info("context overflow (cut %d): cutting the conversation to ~%d tokens", cut + 1, budget)
                    continue
                raise
            usage = getattr(response, "usage", None)
            if usage is not None:
                self.usage.prompt_tokens += int(getattr(usage, "prompt_tokens", 0) or 0)
                self.usage.completion_tokens += int(getattr(usage, "completion_tokens", 0) or 0)
            self.usage.requests += 1
            if not response.choices:
                raise CudaGymError("the chat server answered with no choices: check the model name and the server log")
            return response.choices[0].message
        return None

    def _request(self, messages: list[dict[str, Any]]) -> Any:
        """``chat.completions.create`` with retries and exponential backoff on transient failures."""
        import openai

        kwargs: dict[str, Any] = {
            "model": self.model,
            "messages": messages,
            "temperature": self.config.temperature,
            "max_tokens": self.config.max_tokens,
        }
        if self.tools:
            kwargs["tools"] = self.tools
        if self.config.top_p is not None:
            kwargs["top_p"] = self.config.top_p
        if self.config.extra_body:
            kwargs["extra_body"] = self.config.extra_body
        delay = self.config.backoff_s
        for attempt in range(self.config.max_retries + 1):
            try:
                return self.client.chat.completions.create(**kwargs)
            except (openai.APIConnectionError, openai.RateLimitError, openai.InternalServerError) as exc:
                if attempt == self.config.max_retries:
                    raise CudaGymError(
                        f"the chat server failed {attempt + 1} times ({exc}): check that it is up at "
                        f"{self.config.base_url or os.environ.get('OPENAI_BASE_URL', 'the default URL')}"
                    ) from exc
                self.usage.retries += 1
                logger.info("chat request failed (%s); retry %d in %.1f s", type(exc).__name__, attempt + 1, delay)
                time.sleep(delay)
                delay = min(60.0, delay * 2)
        raise AssertionError("unreachable")  # pragma: no cover

    # -- replies ----------------------------------------------------------------------------------

    def _to_action(self, message: Any) -> str:
        """Record the assistant message and return its action text."""
        content = getattr(message, "content", None) or ""
        calls = list(getattr(message, "tool_calls", None) or [])
        if not calls:
            self.conversation.add({"role": "assistant", "content": content})
            return content
        call = calls[0]  # the env runs one call per step; later ones are dropped from the record too
        if len(calls) > 1:
            logger.info("the model made %d tool calls; the env runs one per step, keeping the first", len(calls))
        name = getattr(call.function, "name", "") or ""
        arguments = getattr(call.function, "arguments", "") or ""
        call_id = getattr(call, "id", None) or f"call_{uuid.uuid4().hex[:24]}"
        self.conversation.add({
            "role": "assistant",
            "content": content or None,
            "tool_calls": [{"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}],
        })
        self._pending_call_id = call_id
        try:
            parsed = from_openai_tool_call({"name": name, "arguments": arguments})
        except CudaGymError:
            # As written: the env's parser says what is wrong, and that reaches the model.
            return f"{OPEN_TAG}\n{json.dumps({'name': name, 'arguments': arguments}, ensure_ascii=False)}\n{CLOSE_TAG}"
        return format_tool_call(parsed.name, parsed.arguments)
