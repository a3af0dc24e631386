"""The exception hierarchy of cuda_gym: every error a user can cause says what to do."""

from __future__ import annotations


class CudaGymError(Exception):
    """Base class of every error raised by cuda_gym."""


class TaskError(CudaGymError):
    """A task or task set could not be found, parsed or loaded."""


class DataNotFoundError(TaskError):
    """A data set is not on disk; the message names the command or path that fixes it."""


class ToolError(CudaGymError):
    """A tool call was malformed or could not run (tools turn these into error observations)."""


class SandboxError(CudaGymError):
    """The sandbox could not be set up or a sandboxed command could not be started."""


class BuildError(CudaGymError):
    """A workspace could not be built for reasons other than the agent's own compile errors."""


class JudgeError(CudaGymError):
    """The judge itself failed (not the candidate): bad configuration, no device, broken task."""
