"""The ToolRunner: one action text in, one observation text and flat ``info`` out; never raises."""

from __future__ import annotations

import logging
import os
import stat
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from cuda_gym.errors import CudaGymError, ToolError, TreeUnwalkable, WorkspaceRefusedError
from cuda_gym.judge.result import JudgeResult
from cuda_gym.reward import TerminalReward
from cuda_gym.text import clean_output, to_printable
from cuda_gym.tools import files, search
from cuda_gym.tools.files import DEFAULT_BUDGETS, ToolBudgets, with_read_chars
from cuda_gym.tools.protocol import ParseError, ToolCall, parse_action
from cuda_gym.tools.render import render_profile, render_submit, render_verify
from cuda_gym.trees import walk_tree

logger = logging.getLogger(__name__)

_FOOTER_ROOM = 160
"""Characters kept free at the end of an observation for the exit-status line."""

_RENDER: dict[str, Callable[[JudgeResult, TerminalReward | None], str]] = {
    "verify": render_verify, "profile": render_profile, "submit": render_submit}
"""The observation text of each judge tool."""


class JudgeBackend(Protocol):
    """What the runner needs of a judge: each method evaluates the workspace as it is now."""

    def verify(self, ws: Any) -> JudgeResult: ...

    def profile(self, ws: Any) -> JudgeResult: ...

    def submit(self, ws: Any) -> JudgeResult: ...


@dataclass
class ToolOutcome:
    """The result of one action.

    Attributes:
        text: the observation shown to the agent (printable ASCII, at most ``output_limit`` characters).
        info: flat scalars: always ``tool`` (name or ``""``), ``parse_ok``, ``tool_ok``; ``compiled``
            (and ``build_cached``, ``build_seconds``) for compile; ``exit_code`` and ``timed_out`` for
            bash; every key of ``JudgeResult.to_info()`` for verify, profile and submit.
        submitted: the agent called ``submit`` and the judge returned a verdict: the episode ends.
        judge_result: the judge's result for verify, profile and submit, else ``None``.
    """

    text: str
    info: dict[str, Any] = field(default_factory=dict)
    submitted: bool = False
    judge_result: JudgeResult | None = None


class ToolRunner:
    """Executes tool calls against one workspace.

    Args:
        workspace: a ``cuda_gym.workspace.Workspace`` (``root``, ``resolve``, protected files, ``task``).
        judge: any object with ``verify(ws)``, ``profile(ws)`` and ``submit(ws)`` returning ``JudgeResult``.
        sandbox: the ``cuda_gym.sandbox.Sandbox`` for bash, also handed to the build (which reuses
            its mode with its own writable paths); default: one where only the workspace root is
            writable and protected files are read-only.
        build_config: a ``cuda_gym.build.BuildConfig`` (default: the build's defaults).
        output_limit: longest observation text in characters.
        bash_timeout: default bash wall-clock limit in seconds.
        max_bash_timeout: largest bash timeout an agent may ask for (larger requests are clamped).
        budgets: time, memory and output budgets of the file tools (``cuda_gym.tools.files.ToolBudgets``).
        reward: the env's terminal reward: the profile and submit reports state its threshold and
            the reward line (``None``: facts only, no reward line).
    """

    def __init__(
        self,
        workspace: Any,
        *,
        judge: JudgeBackend,
        sandbox: Any = None,
        build_config: Any = None,
        output_limit: int = 16384,
        bash_timeout: float = 60.0,
        max_bash_timeout: float = 600,
        budgets: ToolBudgets = DEFAULT_BUDGETS,
        reward: TerminalReward | None = None,
    ) -> None:
        if output_limit < 2 * _FOOTER_ROOM:
            raise ToolError(f"output_limit must be at least {2 * _FOOTER_ROOM} characters, got {output_limit}")
        self.workspace = workspace
        self.judge = judge
        self.sandbox: Any = sandbox
        """The bash (and build) sandbox; made on first use when none was given."""
        self.build_config = build_config
        self.output_limit = output_limit
        self.bash_timeout = float(bash_timeout)
        self.max_bash_timeout = float(max_bash_timeout)
        self.budgets = budgets
        self.reward = reward
        self._built_state: tuple | None = None
        self._handlers: dict[str, Callable[[dict[str, Any]], ToolOutcome]] = {
            "bash": self._bash,
            "read_file": self._read_file,
            "write_file": self._write_file,
            "edit_file": self._edit_file,
            "multi_edit": self._multi_edit,
            "glob": self._glob,
            "grep": self._grep,
            "compile": self._compile,
            "verify": lambda _: self._judge("verify"),
            "profile": lambda _: self._judge("profile"),
            "submit": lambda _: self._judge("submit"),
        }

    # --- entry points -------------------------------------------------------------------------

    def run(self, action_text: Any) -> ToolOutcome:
        """Parse ``action_text`` and run the call; parse errors and tool failures become observations."""
        parsed = parse_action(action_text)
        if isinstance(parsed, ParseError):
            return self._finish(ToolOutcome(f"Error: {parsed.message}",
                                            {"tool": parsed.tool, "parse_ok": False, "tool_ok": False}))
        return self.call(parsed)

    def call(self, call: ToolCall) -> ToolOutcome:
        """Run an already parsed and validated ``ToolCall``."""
        try:
            outcome = self._handlers[call.name](call.arguments)
        except ToolError as exc:
            outcome = ToolOutcome(f"Error: {exc}", {"tool_ok": False})
        except CudaGymError as exc:
            logger.warning("tool %s failed: %s", call.name, exc)
            outcome = ToolOutcome(f"Error in tool {call.name}: {exc}", {"tool_ok": False})
        except Exception as exc:
            logger.exception("internal error in tool %s", call.name)
            outcome = ToolOutcome(f"internal error in tool {call.name}: {type(exc).__name__}: {exc}",
                                  {"tool_ok": False})
        outcome.info = {"tool": call.name, "parse_ok": True, **outcome.info}
        return self._finish(outcome)

    def _finish(self, outcome: ToolOutcome) -> ToolOutcome:
        outcome.text = clean_output(outcome.text, self.output_limit)
        outcome.info.setdefault("tool_ok", True)
        return outcome

    # --- file tools ---------------------------------------------------------------------------

    def _read_file(self, a: dict[str, Any]) -> ToolOutcome:
        budgets = with_read_chars(self.budgets, self.output_limit - _FOOTER_ROOM)
        return ToolOutcome(files.read_file(self.workspace, a["path"], a.get("start_line", 1),
                                           a.get("end_line"), budgets))

    def _write_file(self, a: dict[str, Any]) -> ToolOutcome:
        return ToolOutcome(files.write_file(self.workspace, a["path"], a["content"], self.budgets))

    def _edit_file(self, a: dict[str, Any]) -> ToolOutcome:
        return ToolOutcome(files.edit_file(self.workspace, a["path"], a["old_string"], a["new_string"],
                                           bool(a.get("replace_all", False)), self.budgets))

    def _multi_edit(self, a: dict[str, Any]) -> ToolOutcome:
        return ToolOutcome(files.multi_edit(self.workspace, a["path"], a["edits"], self.budgets))

    def _glob(self, a: dict[str, Any]) -> ToolOutcome:
        return ToolOutcome(search.glob(self.workspace, a["pattern"], self.budgets))

    def _grep(self, a: dict[str, Any]) -> ToolOutcome:
        return ToolOutcome(search.grep(self.workspace, a["pattern"], a.get("path", "."), a.get("glob"),
                                      self.budgets))

    # --- bash ---------------------------------------------------------------------------------

    def _default_sandbox(self) -> Any:
        if self.sandbox is None:
            from cuda_gym.sandbox import Sandbox

            root = Path(self.workspace.root)
            readonly = [p for p in (root / rel for rel in _protected_paths(self.workspace)) if p.exists()]
            self.sandbox = Sandbox(writable=[root], readonly=readonly)
        return self.sandbox

    def _bash(self, a: dict[str, Any]) -> ToolOutcome:
        from cuda_gym.sandbox import Limits

        if "\x00" in a["command"]:  # execve cannot pass it: Popen raised ValueError ("internal error")
            raise ToolError(f"the command holds a NUL character (\\x00) at position {a['command'].index(chr(0))}; "
                            "a shell command cannot contain one (write binary data with printf '\\000')")
        timeout = min(float(a.get("timeout", self.bash_timeout)), self.max_bash_timeout)
        # entries: millions of empty files (no disk bytes) would slow every later walk of the workspace.
        result = self._default_sandbox().run(a["command"], cwd=Path(self.workspace.root),
                                             limits=Limits(wall_s=timeout, entries=self.budgets.workspace_entries))
        body = clean_output(result.output or "", self.output_limit - _FOOTER_ROOM)
        status = f"exit code {result.returncode}, {result.seconds:.1f} s"
        if result.timed_out or result.reason:
            reason = result.reason or f"timed out after {timeout:g} s"
            status = f"stopped: {to_printable(reason)} ({status})"
        text = (body.rstrip("\n") if body.strip() else "(no output)") + f"\n[{status}]"
        ok = result.returncode == 0 and not result.timed_out and not result.reason
        return ToolOutcome(text, {"tool_ok": ok, "exit_code": int(result.returncode),
                                  "timed_out": bool(result.timed_out)})

    # --- compile and judge --------------------------------------------------------------------

    def _sources_state(self) -> tuple:
        """(path, size, mtime) of every file under the root but ``__pycache__``: any change means a rebuild
        is due. One walk, links never followed, bounded by the ``workspace_entries`` budget.

        Raises :class:`WorkspaceRefusedError` past that budget (files, folders and links, ``__pycache__``
        included) or at a name that is not valid UTF-8 (the tools, the build and the judge name files
        as text); nothing is built or judged then.
        """
        root = str(self.workspace.root)
        limit = self.budgets.workspace_entries
        state: list[tuple[str, int, int]] = []
        count = 0
        try:
            for entry in walk_tree(root):  # counted as they come: a folder of millions is never listed whole
                count += 1
                if count > limit:
                    raise WorkspaceRefusedError(
                        f"the workspace holds more than {limit} files, folders and links; nothing was "
                        "built or judged. Delete what you do not need (bash: rm -r DIR) and call the tool again")
                _check_name(entry.rel)
                if not stat.S_ISDIR(entry.stat.st_mode) and "__pycache__" not in entry.parts[:-1]:
                    state.append((entry.rel, entry.stat.st_size, entry.stat.st_mtime_ns))
        except TreeUnwalkable as exc:
            raise WorkspaceRefusedError(
                f"the workspace could not be read whole ({exc}); nothing was built or judged. Delete what you do "
                "not need (bash: rm -r DIR) and call the tool again") from exc
        return tuple(sorted(state))

    def _build(self, state: tuple | None = None) -> Any:
        from cuda_gym.build import build_workspace

        if state is None:
            state = self._sources_state()
        # The sources are the agent's: the build runs in a sandbox of the same mode as bash.
        result = build_workspace(self.workspace, self.build_config, self._default_sandbox())
        self._built_state = state if result.ok else None
        return result

    def _compile(self, _: dict[str, Any]) -> ToolOutcome:
        result = self._build()
        info = {"compiled": bool(result.ok), "build_cached": bool(result.cached),
                "build_seconds": float(result.seconds), "tool_ok": bool(result.ok)}
        if result.ok:
            how = "cached build" if result.cached else f"built in {result.seconds:.1f} s"
            return ToolOutcome(f"compile: OK ({how}); the extension cuda_extension is ready", info)
        log = (result.log or "").strip() or "(no compiler output)"
        return ToolOutcome(f"compile: FAILED\n{log}", info)

    def _judge(self, mode: str) -> ToolOutcome:
        try:
            return self._judge_workspace(mode)
        except WorkspaceRefusedError as exc:
            if mode != "submit":
                raise
            # The agent's doing, so the agent's -1 (never a JudgeError): the final judgement of a workspace
            # the build or the judge cannot take (too many entries, a bad name, more bytes than an
            # executor's job carries) is a failed build.
            result = JudgeResult(task_id=_task_id(self.workspace), mode="full", device="",
                                 compiled=False, compile_log=str(exc))
            return ToolOutcome(render_submit(result, self.reward), {**result.to_info(), "tool_ok": True},
                               submitted=True, judge_result=result)

    def _judge_workspace(self, mode: str) -> ToolOutcome:
        state = self._sources_state()
        if self._built_state is None or self._built_state != state:
            build = self._build(state)
            if not build.ok and mode != "submit":
                # No device time for a workspace that does not build; the judge would say the same.
                result = JudgeResult(task_id=_task_id(self.workspace), mode=mode, device="",  # type: ignore[arg-type]
                                     compiled=False, compile_log=(build.log or "").strip())
                return ToolOutcome(_RENDER[mode](result, self.reward), {**result.to_info(), "tool_ok": True},
                                   judge_result=result)
        result = getattr(self.judge, mode)(self.workspace)
        if not isinstance(result, JudgeResult):
            raise ToolError(f"the judge's {mode}() returned {type(result).__name__}, not a JudgeResult")
        return ToolOutcome(_RENDER[mode](result, self.reward), {**result.to_info(), "tool_ok": True},
                           submitted=mode == "submit", judge_result=result)


def _check_name(rel: str) -> None:
    """Raise :class:`WorkspaceRefusedError` when ``rel`` (as ``os.scandir`` decodes it) is not valid UTF-8."""
    try:
        rel.encode("utf-8")
    except UnicodeEncodeError:  # undecodable bytes come back from os.scandir as lone surrogates
        shown = repr(os.fsencode(rel))[2:-1]
        raise WorkspaceRefusedError(
            f"the file name {shown} is not valid UTF-8 (its undecodable bytes shown as \\xNN); the tools, the build "
            f"and the judge take UTF-8 names only, so nothing was built or judged. Rename or delete it "
            f"(bash: rm -r ./$'{shown}')") from None


def _task_id(ws: Any) -> str:
    task = getattr(ws, "task", None)
    return str(getattr(task, "id", ""))


def _protected_paths(ws: Any) -> list[str]:
    return [str(p) for p in getattr(ws, "protected", ())]
