"""The ``cuda-gym`` command line: tasks, data, doctor, judge, baselines, demo, play.

Each command is a ``cmd_*`` function taking the parsed arguments and returning an exit code;
``build_parser`` wires them. Only this module prints.
"""

from __future__ import annotations

import argparse
import sys
from typing import Callable, Sequence

Command = Callable[[argparse.Namespace], int]


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of every ``cuda-gym`` command (``--help`` works on each)."""
    parser = argparse.ArgumentParser(
        prog="cuda-gym",
        description="Gymnasium environments in which LLM agents learn to write fast CUDA kernels.",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    # Command groups register themselves below; keep one function per group.
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``cuda-gym`` console script."""
    parser = build_parser()
    args = parser.parse_args(argv)
    func: Command = args.func
    try:
        return func(args)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
