"""The exception hierarchy of cuda_gym: every error a user can cause says what to do."""

from __future__ import annotations


class CudaGymError(Exception):
    """Base class of every error raised by cuda_gym."""


class ConfigError(CudaGymError, ValueError):
    """A setting is invalid (an env setting, a judge setting, a device, flavour or size); the message
    names the valid values."""


class TaskError(CudaGymError):
    """A task or task set could not be found, parsed or loaded."""


class DataNotFoundError(TaskError):
    """A data set is not on disk; the message names the command or path that fixes it."""


class ToolError(CudaGymError):
    """A tool call was malformed or could not run (tools turn these into error observations)."""


class SolutionFormatError(ToolError):
    """A single-turn answer holds no solution in either form; the message shows the expected format."""


class WorkspaceRefusedError(ToolError):
    """The judge tools will not build or judge the workspace: it holds more entries than the tools'
    ``workspace_entries`` budget, or a file name that is not UTF-8. compile, verify and profile answer it
    as an ``Error:`` observation; submit (and the env's turn-limit judgement) as a failed judgement, -1."""


class SandboxError(CudaGymError):
    """The sandbox could not be set up or a sandboxed command could not be started."""


class BuildError(CudaGymError):
    """A workspace could not be built for reasons other than the agent's own compile errors."""


class SnapshotError(BuildError):
    """The workspace holds more source bytes or files than a build copies: remove generated or data files."""


class TreeUnwalkable(CudaGymError):
    """A folder that untrusted code wrote could not be walked whole (``cuda_gym.trees.walk_tree``): an entry
    deeper than ``MAX_DEPTH`` folders, or a part that could not be read. What it holds is unknown, so a caller
    treats it as over every bound."""


class UnreadableFileError(CudaGymError, OSError):
    """A path that is not a regular file (a link, FIFO, device) or is too large, and so is never read."""


class JudgeError(CudaGymError):
    """The judge itself failed (not the candidate): bad configuration, no device, broken task."""


class DeviceStuckError(JudgeError):
    """The driver's own GPU work stays blocked (a timing stream waits on a server that is gone): its device
    state can no longer be trusted, and the worker that holds it is restarted."""


class ProtocolError(JudgeError):
    """A message between the judge's processes does not match its schema (a bug or a forged message)."""


class PeerGone(JudgeError):
    """The other process of a judge channel closed it, died, or sent nothing in time."""


class UnreadableAnswer(Exception):
    """Raised in the trusted driver when a candidate server's answer cannot be mapped or read: the
    candidate's failure (native code writes every byte of it), never a ``JudgeError``."""


class StopTimeout(Exception):
    """A process tree was not seen stopped in time (``cuda_gym.process_stop``): a thread that stays in
    uninterruptible sleep, or a tree that forks faster than it is stopped. For a candidate server, its failure."""


class CandidateError(Exception):
    """Raised inside the candidate server when the submission fails in a way that ends its run; the
    message is shown to the agent (it never leaves that process as an exception)."""


class EpisodeOverError(CudaGymError, RuntimeError):
    """``step`` was called after the episode terminated or was truncated: call ``reset()`` first."""


class EpisodeEndedError(EpisodeOverError):
    """An adapter closed the trajectory's episode (finished, idle past its timeout, or evicted); a later
    call of that trajectory gets this, not a fresh episode.

    Attributes:
        reason: why, as a sentence.
        reward: the terminal reward when it was judged, else ``None``.
    """

    def __init__(self, reason: str, reward: float | None = None) -> None:
        super().__init__(f"this trajectory's episode is over ({reason}); start a new trajectory")
        self.reason = reason
        self.reward = reward
