"""One scripted episode through each framework adapter (TRL, OpenEnv, verl) on CudaKernel-Builtin-v0.

Run on the H200 by ``benchmarks/device/adapters_transcripts.sh`` (which installs the carried wheels).
Each adapter plays the shipped honest CUDA solution (read the task, write the files, compile, verify,
submit) and writes ``$OUT/<adapter>.json``: the calls, every tool response, the reward, the milestone
and the seconds, as soon as that adapter is done. An adapter whose framework does not import on the
machine is recorded as skipped with the import error. ``$OUT/summary.json`` gathers the three.
"""

from __future__ import annotations

import asyncio
import json
import os
import socket
import sys
import threading
import time
import traceback
from pathlib import Path
from typing import Any

from cuda_gym.baselines.agents import demo_solution

FLAVOUR = os.environ.get("ADAPTERS_FLAVOUR", "cuda")  # "cpu": the same run on CpuKernel-Builtin-v0 (a smoke test)
ENV_ID = "CudaKernel-Builtin-v0" if FLAVOUR == "cuda" else "CpuKernel-Builtin-v0"
SOLUTION = demo_solution(FLAVOUR)
ENV_KWARGS: dict[str, Any] = {
    "task_ids": [SOLUTION.task_id],
    "max_turns": 12,
    # A real judgement per adapter, not the first one's cached verdict.
    "judge": {"cache_judgements": False},
}
OUT = Path(os.environ.get("OUT", "/tmp/out"))


def calls() -> list[tuple[str, dict[str, Any]]]:
    """The scripted episode: what each adapter plays, as (tool, arguments)."""
    script: list[tuple[str, dict[str, Any]]] = [("read_file", {"path": "model.py"})]
    script += [("write_file", {"path": path, "content": content}) for path, content in SOLUTION.files.items()]
    return script + [("compile", {}), ("verify", {}), ("submit", {})]


def run_trl() -> dict[str, Any]:
    from cuda_gym.adapters.trl import CudaKernelToolEnv

    env = CudaKernelToolEnv(env_id=ENV_ID, **ENV_KWARGS)
    steps = [{"reset": env.reset(task_id=SOLUTION.task_id)}]
    for name, arguments in calls():
        steps.append({"tool": name, "arguments": arguments, "response": getattr(env, name)(**arguments)})
    reward = asyncio.run(env.get_reward())
    result = {"reward": reward, "milestone": env.session.milestone, "steps": steps,
              "final_info": env.session.last.info if env.session.last else {}}
    env.session.close()
    return result


def run_openenv() -> dict[str, Any]:
    import uvicorn

    from cuda_gym.adapters.openenv import CudaKernelClient, CudaToolAction, make_app

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(make_app(ENV_ID, max_sessions=2, **ENV_KWARGS), host="127.0.0.1",
                                           port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    while not server.started:
        time.sleep(0.05)

    async def episode() -> dict[str, Any]:
        async with CudaKernelClient(f"http://127.0.0.1:{port}") as client:
            reset = await client.reset(task_id=SOLUTION.task_id)
            steps: list[dict[str, Any]] = [{"reset": reset.observation.text}]
            final = reset
            for name, arguments in calls():
                final = await client.step(CudaToolAction(tool=name, arguments=arguments))
                steps.append({"tool": name, "arguments": arguments, "response": final.observation.text,
                              "reward": final.reward, "done": final.done})
            state = (await client.state()).model_dump()
            return {"reward": final.reward, "milestone": final.observation.info.get("milestone"), "state": state,
                    "steps": steps, "final_info": final.observation.info}

    try:
        return asyncio.run(episode())
    finally:
        server.should_exit = True
        thread.join(timeout=30)


def run_verl() -> dict[str, Any]:
    from cuda_gym.adapters import verl as adapter

    tools = {name: cls({"env_id": ENV_ID, "env_kwargs": ENV_KWARGS}) for name, cls in adapter.TOOL_CLASSES.items()}

    async def episode() -> dict[str, Any]:
        instance = "h200-trajectory"
        for tool in tools.values():
            await tool.create(instance, task_id=SOLUTION.task_id)
        steps = []
        for name, arguments in calls():
            response, step_reward, metrics = await tools[name].execute(instance, arguments)
            steps.append({"tool": name, "arguments": arguments, "response": response.text,
                          "step_reward": step_reward, "metrics": metrics})
        reward = await tools["submit"].calc_reward(instance)
        for tool in tools.values():
            await tool.release(instance)
        return {"reward": reward, "milestone": steps[-1]["metrics"].get("milestone"), "steps": steps}

    try:
        return asyncio.run(episode())
    finally:
        adapter.EPISODES.close_all()


def main() -> int:
    OUT.mkdir(parents=True, exist_ok=True)
    summary: dict[str, Any] = {"env_id": ENV_ID, "task_id": SOLUTION.task_id}
    for name, run in (("trl", run_trl), ("openenv", run_openenv), ("verl", run_verl)):
        started = time.monotonic()
        try:
            result = {"status": "ok", **run()}
        except ImportError as exc:
            result = {"status": "skipped", "reason": f"{type(exc).__name__}: {exc}"}
        except Exception as exc:
            result = {"status": "error", "error": f"{type(exc).__name__}: {exc}", "traceback": traceback.format_exc()}
        result["seconds"] = round(time.monotonic() - started, 1)
        (OUT / f"{name}.json").write_text(json.dumps(result, indent=1, default=str))
        summary[name] = {k: result.get(k) for k in ("status", "reward", "milestone", "seconds", "reason", "error")}
        print(name, json.dumps(summary[name]), flush=True)
        (OUT / "summary.json").write_text(json.dumps(summary, indent=1))
    return 0 if all(summary[n]["status"] != "error" for n in ("trl", "openenv", "verl")) else 1


if __name__ == "__main__":
    sys.exit(main())
