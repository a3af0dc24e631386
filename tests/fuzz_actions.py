"""A seeded generator of hostile agent actions and the loop that plays them against an env.

Shared by ``tests/test_fuzz_step.py`` (a few thousand actions in CI) and
``benchmarks/bench_fuzz_step.py`` (10,000 actions, figures to JSON). Every action is what a
misbehaving or adversarial agent could send: random JSON, wrong types, huge arguments, lone
surrogates, nested ``**`` globs, catastrophic regexes, paths out of the workspace, links to
devices and FIFOs, protected files, and bash commands that print binary, fork or sleep past
their limit, mixed with valid calls of every file tool with random arguments.
"""

from __future__ import annotations

import json
import random
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any, cast

import gymnasium as gym

JUDGE_TOOLS = ("compile", "verify", "profile", "submit")
"""Tools that compile or judge: seconds each on a CPU, so the fuzzer calls them rarely or never."""

FILE_TOOLS = ("read_file", "write_file", "edit_file", "multi_edit", "glob", "grep")

PATHS = [
    "model_new.py", "kernels/k.cpp", "kernels/k_binding.cpp", "kernels/x.h", "kernels/fifo.h",
    "kernels/loop", "kernels/dev", "kernels/deep/a/b/c.cpp", "notes.txt", "big.txt", "kernels",
    ".", "", "..", "../..", "../escape.txt", "kernels/../../x", "/etc/passwd", "/etc/shadow",
    "/proc/self/mem", "/proc/kmsg", "/dev/zero", "/tmp/x", "~/x", "model.py", "binding.cpp",
    "binding_registry.h", "SKILL.md", "kernels/../model.py", "./model.py", "link_out/x",
    "a" * 300, "x/" * 400, "\x00", "k\x00.cu", "\udc80.cu", "\ud800.cu", "\u00e9\U0001f680.cu",
    "kernels/*", "NUL", "con:", "\\\\server\\share", "C:\\x",
]
"""Path arguments: ordinary, escaping, absolute, protected, overlong, NUL, surrogates, odd names."""

GLOBS = [
    "**/*", "*", "kernels/*.cpp", "**/**/**/**/**/**/**/**/*", "**/*/**/*/**/*/**/*/**/*",
    "*" * 200, "**/" * 100 + "*", "[", "[!]", "[a-", "../*", "/etc/*", "~/*", "**/..", "\ud800*",
    "{a,b}", "**/*.[ch]*", "?" * 50, "kernels/**", "**",
]
"""Glob patterns: usual, deeply nested ``**``, long, malformed, escaping."""

REGEXES = [
    "a{1000000000}", "(?R)", "(?1)(a)", "(?:a{1000}){1000}", "(a|a)+b", "((a+)+)+$", "(x+x+)+y",
    "(?:(?:a*)*)*b", "[", "(", "a{2,1}", "(?P<n>a)(?P=n)", "\\p{L}+", "(?V1)a", "(?foo){e<=5}",
    "x" * 1000, "(" * 400 + ")" * 400, "\ud800", "^", "$", ".*", "torch", "\\", "(?i)MODEL",
    "\\N{DASH}", "a{,5}b",
]
"""grep patterns: memory bombs (huge repeats, recursion), catastrophic backtracking, malformed."""

BASH = [
    "ln -sf /proc/kmsg kernels/x.h", "ln -sf /dev/zero kernels/dev", "mkfifo kernels/fifo.h",
    "ln -sf loop kernels/loop", "ln -sfn / link_out", "ln -sf /etc/shadow kernels/shadow.h",
    "head -c 200000 /dev/urandom", "printf '\\x00\\xff\\xfe\\x1b[31m'; echo",
    "for i in $(seq 40); do (sleep 3 &) ; done; echo forked", "sleep 100", "yes | head -c 3000000",
    "mkdir -p d && for i in $(seq 300); do touch d/f$i; done", "mkdir -p $(printf 'z/%.0s' $(seq 60))",
    "chmod 000 kernels/deep 2>/dev/null; mkdir -p kernels/deep/a/b && chmod 000 kernels/deep",
    "chmod 755 kernels/deep 2>/dev/null; true", "rm -f model.py", "echo hi > model.py",
    "truncate -s 100M big.bin", "python3 -c 'print(\"\\u00e9\" * 100)'", "exit 3", "kill -9 $$",
    "cat /etc/shadow", "ls -la /", "touch -d 2000-01-01 model_new.py", "ulimit -a", "true", "echo a\x00b",
    "touch $'\\xff' kernels/$'\\xfd'.cpp kernels/$'\\xfe'.h", "rm -f $'\\xff' kernels/$'\\xfd'.cpp kernels/$'\\xfe'.h",
]
"""bash commands: links to devices and out of the root, FIFOs, binary output, forks, sleeps past
the limit, large output, many files, unreadable folders, tampering with protected files, file names
that are not UTF-8 (and their removal)."""


def _rand_text(rng: random.Random, n: int) -> str:
    """Random characters, mostly printable, with control characters, non-ASCII and surrogates."""
    pools = [
        lambda: chr(rng.randrange(32, 127)),
        lambda: chr(rng.randrange(0, 32)),
        lambda: chr(rng.randrange(0x80, 0x3000)),
        lambda: chr(rng.randrange(0xD800, 0xE000)),  # lone surrogates
        lambda: chr(rng.randrange(0x10000, 0x110000)),
    ]
    weights = [80, 5, 8, 2, 5]
    return "".join(rng.choices(pools, weights)[0]() for _ in range(n))


def _rand_json(rng: random.Random, depth: int = 0) -> Any:
    """A random JSON-like value (nested lists and objects, odd numbers, random strings)."""
    kind = rng.randrange(8 if depth < 4 else 5)
    if kind == 0:
        return None
    if kind == 1:
        return rng.choice([True, False])
    if kind == 2:
        return rng.choice([0, -1, 1, 2**31, 2**63, -(2**70), 10**400, 3.5, 1e308, -0.0])
    if kind == 3:
        return _rand_text(rng, rng.randrange(0, 40))
    if kind == 4:
        return rng.choice(PATHS)
    if kind in (5, 6):
        return [_rand_json(rng, depth + 1) for _ in range(rng.randrange(4))]
    return {_rand_text(rng, rng.randrange(1, 8)): _rand_json(rng, depth + 1) for _ in range(rng.randrange(4))}


def _dumps(obj: Any) -> str:
    """JSON text of ``obj``; lone surrogates become ``\\udXXX`` escapes, so parsing restores them."""
    try:
        return json.dumps(obj)
    except (ValueError, TypeError):  # 10**400 is fine; NaN and inf are allowed by default
        return "{}"


def _call(name: str, arguments: Any, rng: random.Random) -> str:
    """One call in one of the accepted wire forms (Hermes block, bare JSON, OpenAI envelope, string args)."""
    form = rng.randrange(5)
    if form == 0:
        return f"<tool_call>\n{_dumps({'name': name, 'arguments': arguments})}\n</tool_call>"
    if form == 1:
        return _dumps({"name": name, "arguments": arguments})
    if form == 2:
        return _dumps({"name": name, "arguments": _dumps(arguments)})
    if form == 3:
        return _dumps({"type": "function", "function": {"name": name, "arguments": _dumps(arguments)}})
    return f"Let me think.\n<tool_call>{_dumps({'name': name, 'arguments': arguments})}</tool_call>"


@dataclass
class HostileActions:
    """Seeded hostile actions: ``gen()`` returns the next one (usually a ``str``, sometimes not).

    Args:
        seed: the seed of the generator (the same seed gives the same actions).
        judge_rate: probability that an action calls a tool of ``JUDGE_TOOLS`` (0: never).
        bash_timeout: the ``timeout`` argument given to most bash calls (seconds).
    """

    seed: int = 0
    judge_rate: float = 0.0
    bash_timeout: int = 1

    def __post_init__(self) -> None:
        self.rng = random.Random(self.seed)
        self._kinds: list[tuple[int, Callable[[], Any]]] = [
            (6, self.garbage), (4, self.wrong_types), (4, self.huge), (10, self.paths),
            (6, self.globs), (8, self.regexes), (10, self.bash), (6, self.write_then_grow),
            (16, self.valid_random), (4, self.unicode), (2, self.non_str),
        ]

    def __call__(self) -> Any:
        """The next action."""
        if self.judge_rate and self.rng.random() < self.judge_rate:
            return _call(self.rng.choice(JUDGE_TOOLS), {}, self.rng)
        weights = [w for w, _ in self._kinds]
        return self.rng.choices([k for _, k in self._kinds], weights)[0]()

    # -- kinds of action -----------------------------------------------------------------------

    def garbage(self) -> Any:
        """Not a call: random text, random JSON, truncated or doubled blocks, deep nesting."""
        r = self.rng
        options = [
            lambda: _rand_text(r, r.randrange(0, 300)),
            lambda: _dumps(_rand_json(r)),
            lambda: "<tool_call>" + _dumps(_rand_json(r)),
            lambda: "<tool_call>{\"name\": \"bash\"" + "<tool_call>" * r.randrange(1, 100),
            lambda: "[" * 100_000 + "]" * 100_000,
            lambda: "{\"name\": " * 5000,
            lambda: _call("bash", {"command": "true"}, r) * 2,
            lambda: "<think>" + _rand_text(r, 100) + "</think>" + _dumps(_rand_json(r)),
            lambda: "```json\n" + _dumps({"name": r.choice(FILE_TOOLS)}) + "\n```",
            lambda: _dumps({"name": _rand_text(r, 10), "arguments": {}}),
        ]
        return r.choice(options)()

    def wrong_types(self) -> str:
        """A known tool whose arguments have the wrong types, missing or extra keys."""
        r = self.rng
        name = r.choice(FILE_TOOLS + ("bash",))
        keys = ["path", "content", "old_string", "new_string", "replace_all", "edits", "pattern", "glob",
                "command", "timeout", "start_line", "end_line", _rand_text(r, 5)]
        args = {k: _rand_json(r) for k in r.sample(keys, r.randrange(0, 5))}
        return _call(name, args if r.random() < 0.9 else _rand_json(r), r)

    def huge(self) -> str:
        """Arguments at and past the schema's size limits."""
        r = self.rng
        n = r.choice([199_999, 200_000, 200_001, 260_000])
        options = [
            lambda: _call("write_file", {"path": r.choice(PATHS), "content": "x" * n}, r),
            lambda: _call("bash", {"command": "echo " + "y" * r.choice([16_000, 16_385]), "timeout": 2}, r),
            lambda: _call("grep", {"pattern": "a" * r.choice([1000, 1024, 1025])}, r),
            lambda: _call("read_file", {"path": "big.txt", "start_line": 2**62, "end_line": 10**30}, r),
            lambda: _call("multi_edit", {"path": "big.txt", "edits": [{"old_string": "x", "new_string": "y"}] * 51}, r),
            lambda: "x" * 300_000,
        ]
        return r.choice(options)()

    def paths(self) -> str:
        """File tools on hostile paths (escapes, protected files, links, FIFOs, devices, NUL)."""
        r = self.rng
        path = r.choice(PATHS)
        name = r.choice(FILE_TOOLS)
        table: dict[str, dict[str, Any]] = {
            "read_file": {"path": path},
            "write_file": {"path": path, "content": "int x;\n"},
            "edit_file": {"path": path, "old_string": "x", "new_string": "y", "replace_all": True},
            "multi_edit": {"path": path, "edits": [{"old_string": "a", "new_string": "b"}]},
            "glob": {"pattern": path or "*"},
            "grep": {"pattern": "x", "path": path},
        }
        return _call(name, table[name], r)

    def globs(self) -> str:
        """glob (and grep's glob filter) with nested, long or malformed patterns."""
        r = self.rng
        pattern = r.choice(GLOBS)
        if r.random() < 0.3:
            return _call("grep", {"pattern": "x", "glob": pattern}, r)
        return _call("glob", {"pattern": pattern}, r)

    def regexes(self) -> str:
        """grep with catastrophic, memory-hungry or invalid regular expressions."""
        r = self.rng
        args: dict[str, Any] = {"pattern": r.choice(REGEXES)}
        if r.random() < 0.5:
            args["path"] = r.choice(["big.txt", ".", "kernels", "notes.txt"])
        return _call("grep", args, r)

    def bash(self) -> str:
        """Hostile shell commands, mostly with a short timeout (sleeps run past it)."""
        r = self.rng
        args: dict[str, Any] = {"command": r.choice(BASH)}
        if r.random() < 0.9:
            args["timeout"] = self.bash_timeout
        return _call("bash", args, r)

    def write_then_grow(self) -> str:
        """Writes that would grow a file past any sane size: doubling multi-edits, huge replace_all."""
        r = self.rng
        options = [
            lambda: _call("write_file", {"path": "big.txt", "content": "ab" * r.choice([10, 1000, 100_000])}, r),
            lambda: _call("multi_edit", {"path": "big.txt", "edits": [
                {"old_string": "ab", "new_string": "abab", "replace_all": True}] * 50}, r),
            lambda: _call("edit_file", {"path": "big.txt", "old_string": "a", "new_string": "z" * 200_000,
                                        "replace_all": True}, r),
            lambda: _call("edit_file", {"path": "model_new.py", "old_string": "import",
                                        "new_string": "import\ud800", "replace_all": True}, r),
            lambda: _call("write_file", {"path": "notes.txt", "content": "ok\ud800"}, r),
        ]
        return r.choice(options)()

    def valid_random(self) -> str:
        """Schema-valid calls of every file tool (and bash) with random argument values."""
        r = self.rng
        name = r.choice(FILE_TOOLS + ("bash",))
        path = r.choice(PATHS[:12])
        text = _rand_text(r, r.randrange(1, 60))
        table: dict[str, dict[str, Any]] = {
            "read_file": {"path": path, "start_line": r.randrange(1, 50)},
            "write_file": {"path": path, "content": text},
            "edit_file": {"path": path, "old_string": text[:3] or "x", "new_string": _rand_text(r, 5),
                          "replace_all": r.random() < 0.5},
            "multi_edit": {"path": path, "edits": [{"old_string": _rand_text(r, 2) or "x",
                                                    "new_string": _rand_text(r, 3)} for _ in range(r.randrange(1, 4))]},
            "glob": {"pattern": r.choice(GLOBS[:3]) + r.choice(["", "*", "/*"])},
            "grep": {"pattern": r.choice(["x", "int", "def", "\\w+", text[:4] or "a"]), "path": r.choice(PATHS[:12]) or "."},
            "bash": {"command": r.choice(["ls -R", "cat model_new.py", "echo " + text, "pwd"]),
                     "timeout": self.bash_timeout},
        }
        return _call(name, table[name], r)

    def unicode(self) -> str:
        """Lone surrogates and non-ASCII in every string argument."""
        r = self.rng
        s = _rand_text(r, 30) + "\ud800" + "\udfff"
        return _call(r.choice(FILE_TOOLS), {"path": s, "content": s, "pattern": s, "old_string": s,
                                            "new_string": s}, r)

    def non_str(self) -> Any:
        """Actions that are not text at all."""
        return self.rng.choice([None, 42, b"\xff\xfe", {"name": "bash", "arguments": {"command": "true"}},
                                ["bash"], 3.5, object()])


class ShortLimits(gym.Wrapper):
    """Caps each bash call, glob and grep at ``limit_s`` seconds, set on the runner at every reset.

    Keeps the per-step time limit of a fuzz episode small: a ``sleep 100`` or a catastrophic regex
    stops after ``limit_s`` (the runner's ``max_bash_timeout`` and ``ToolBudgets.grep_seconds`` /
    ``glob_seconds``), so thousands of actions fit in a CI run.
    """

    def __init__(self, env: gym.Env, limit_s: float = 1.0) -> None:
        super().__init__(env)
        self.limit_s = limit_s

    def reset(self, **kwargs: Any) -> Any:
        """Reset the env, then cap its runner's time limits."""
        out = self.env.reset(**kwargs)
        runner: Any = cast(Any, self.env.unwrapped).runner
        runner.max_bash_timeout = self.limit_s
        runner.budgets = replace(runner.budgets, grep_seconds=self.limit_s, glob_seconds=self.limit_s)
        return out


EPISODE_STEPS = 400
"""Steps per fuzz episode (gymnasium's ``TimeLimit``): each reset closes a workspace full of links,
FIFOs and unreadable folders and lays out a fresh one. The env's own final judgement never runs."""


def make_fuzz_env(workspace_dir: str | Path, limit_s: float = 1.0) -> gym.Env:
    """``CpuKernel-Builtin-v0`` on the honest solution's task through ``gym.make``, with ``ShortLimits``."""
    import cuda_gym  # noqa: F401  (registers the ids)
    from env_helpers import CPU_ID, TASK_ID

    env = gym.make(CPU_ID, task_ids=[TASK_ID], max_turns=10**6, max_episode_steps=EPISODE_STEPS,
                   workspace_dir=workspace_dir)
    return ShortLimits(env, limit_s)


INTERNAL = "internal error"
"""Text an observation must never hold: the runner's last-resort guard caught a bug."""


@dataclass
class FuzzStats:
    """What a fuzz run found."""

    actions: int = 0
    exceptions: int = 0
    internal_errors: int = 0
    slow_steps: int = 0
    max_step_seconds: float = 0.0
    seconds: float = 0.0
    episodes: int = 0
    rss_start_mib: float = 0.0
    rss_peak_mib: float = 0.0
    examples: list[str] = field(default_factory=list)
    """Up to 20 short descriptions of failures (action, then what went wrong)."""
    slowest: list[tuple[float, str]] = field(default_factory=list)
    """The five slowest steps: seconds and the start of the action."""

    def as_dict(self) -> dict[str, Any]:
        """Plain data for JSON."""
        out = asdict(self)
        out["actions_per_s"] = self.actions / self.seconds if self.seconds else 0.0
        out["rss_growth_mib"] = self.rss_peak_mib - self.rss_start_mib
        return out


def rss_mib(field_name: str = "VmRSS") -> float:
    """This process's resident memory (``VmRSS``) or its peak (``VmHWM``) in MiB, from /proc."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field_name + ":"):
            return int(line.split()[1]) / 1024
    return 0.0


def fuzz(env: Any, actions: HostileActions, count: int, *, slow_s: float = 30.0,
         reset_kwargs: dict[str, Any] | None = None) -> FuzzStats:
    """Play ``count`` actions against ``env`` (reset when an episode ends) and count what went wrong."""
    stats = FuzzStats(rss_start_mib=rss_mib())
    env.reset(seed=actions.seed, **(reset_kwargs or {}))
    stats.episodes = 1
    start = time.perf_counter()
    for _ in range(count):
        action = actions()
        t0 = time.perf_counter()
        try:
            obs, _, terminated, truncated, _ = env.step(action)
        except Exception as exc:  # noqa: BLE001 - counting them is the point
            stats.exceptions += 1
            _note(stats, action, f"{type(exc).__name__}: {exc}")
            env.reset(**(reset_kwargs or {}))
            stats.episodes += 1
            continue
        finally:
            took = time.perf_counter() - t0
            stats.actions += 1
            stats.max_step_seconds = max(stats.max_step_seconds, took)
            stats.slowest = sorted(stats.slowest + [(round(took, 3), str(action)[:160])], reverse=True)[:5]
        if took > slow_s:
            stats.slow_steps += 1
            _note(stats, action, f"step took {took:.1f} s")
        if INTERNAL in obs:
            stats.internal_errors += 1
            _note(stats, action, obs[:300])
        if terminated or truncated:
            env.reset(**(reset_kwargs or {}))
            stats.episodes += 1
    stats.seconds = time.perf_counter() - start
    stats.rss_peak_mib = rss_mib("VmHWM")
    return stats


def _note(stats: FuzzStats, action: Any, what: str) -> None:
    if len(stats.examples) < 20:
        stats.examples.append(f"{str(action)[:200]!r} -> {what[:400]}")
