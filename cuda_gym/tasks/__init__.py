"""Tasks and task sets: builtin, KernelBench, CUDA-Agent-Ops-6K and custom directories."""

from cuda_gym.tasks.facts import TaskFacts, facts_for, task_facts
from cuda_gym.tasks.loaders import SOURCES, TaskSet, find_dataset, get_task, load_tasks
from cuda_gym.tasks.task import LoadedTask, Task, check_code

__all__ = [
    "LoadedTask",
    "SOURCES",
    "Task",
    "TaskFacts",
    "TaskSet",
    "check_code",
    "facts_for",
    "find_dataset",
    "get_task",
    "load_tasks",
    "task_facts",
]
