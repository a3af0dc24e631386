"""InlineExecutor: today's behaviour, one ``Judge`` judging in the caller's thread."""

from __future__ import annotations

from concurrent.futures import Future
from typing import Any

from cuda_gym.executors.base import Executor, done_future, opened
from cuda_gym.executors.job import JudgeJob
from cuda_gym.judge import Judge, JudgeConfig
from cuda_gym.judge.result import JudgeResult


class InlineExecutor(Executor):
    """Judges each job in ``submit`` itself, with one ``Judge`` (built on first use): the future is done
    when ``submit`` returns. One reference worker, one fresh candidate server per evaluation.

    Args:
        judge: a ``JudgeConfig`` or a dict of its fields.
    """

    kind = "inline"

    def __init__(self, judge: JudgeConfig | dict[str, Any] | None = None) -> None:
        self.config = JudgeConfig.from_dict(judge)
        self.device_flavour = "cuda" if self.config.is_cuda else "cpu"
        self._judge: Judge | None = None

    @property
    def judge(self) -> Judge:
        """The judge, built now if it was not yet."""
        if self._judge is None:
            self._judge = Judge(self.config)
        return self._judge

    def submit(self, job: JudgeJob) -> Future[JudgeResult]:
        """Judge ``job`` now; a done future."""
        return done_future(self._run, job)

    def _run(self, job: JudgeJob) -> JudgeResult:
        with opened(job, self.device_flavour) as kwargs:
            return self.judge.evaluate(job.resolved_task(), **kwargs)

    def close(self, cancel: bool = False) -> None:
        """Stop the judge's reference worker."""
        if self._judge is not None:
            self._judge.close()
        self._judge = None
