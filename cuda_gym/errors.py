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


class SandboxError(CudaGymError):
    """The sandbox could not be set up or a sandboxed command could not be started."""


class BuildError(CudaGymError):
    """A workspace could not be built for reasons other than the agent's own compile errors."""


class JudgeError(CudaGymError):
    """The judge itself failed (not the candidate): bad configuration, no device, broken task."""


class EpisodeOverError(CudaGymError, RuntimeError):
    """``step`` was called after the episode terminated or was truncated: call ``reset()`` first."""
