"""The benchmark harness: run an agent over a task set and report the paper's Table 1 and KernelBench's metrics.

``evaluate(agent_factory, EvalConfig(...))`` runs the episodes (resumable JSONL of finished tasks)
and writes the report; ``summarize`` and ``write_report`` rebuild it from records. The command
line is ``cuda-gym eval`` (``cuda_gym.baselines.evaluate.cli``). Definitions: docs/benchmarking.md.
"""

from cuda_gym.baselines.evaluate.harness import (
    AgentFactory,
    EvalConfig,
    EvalRun,
    RecordingJudge,
    evaluate,
    load_task_file,
    replay_factory,
)
from cuda_gym.baselines.evaluate.metrics import FAST_P, Count, GroupMetrics, geomean, group_metrics, summarize
from cuda_gym.baselines.evaluate.records import ResultsFile, TaskRecord
from cuda_gym.baselines.evaluate.report import kernelbench_results, render_markdown, write_report

__all__ = [
    "FAST_P", "AgentFactory", "Count", "EvalConfig", "EvalRun", "GroupMetrics", "RecordingJudge", "ResultsFile",
    "TaskRecord", "evaluate", "geomean", "group_metrics", "kernelbench_results", "load_task_file", "render_markdown",
    "replay_factory", "summarize", "write_report",
]
