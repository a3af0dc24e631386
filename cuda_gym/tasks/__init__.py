"""Tasks and task sets: builtin, KernelBench, CUDA-Agent-Ops-6K and custom directories."""

from cuda_gym.tasks.task import LoadedTask, Task

__all__ = ["LoadedTask", "Task"]
