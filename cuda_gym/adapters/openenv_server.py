"""The OpenEnv app to serve (``uvicorn cuda_gym.adapters.openenv_server:app``), set up from the environment.

``$CUDA_GYM_ENV_ID`` (default ``CudaKernel-Builtin-v0``), ``$CUDA_GYM_MAX_SESSIONS`` (8),
``$CUDA_GYM_STEP_TIMEOUT_S`` (none) and ``$CUDA_GYM_ENV_KWARGS`` (a JSON object of env settings) choose
what it serves; ``python -m cuda_gym.adapters.openenv_server --port 8000`` runs it.
"""

from __future__ import annotations

import argparse

from cuda_gym.adapters.openenv import app_from_environ

app = app_from_environ()


def main(argv: list[str] | None = None) -> None:
    """Serve ``app`` with uvicorn."""
    import uvicorn

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="0.0.0.0")
    parser.add_argument("--port", type=int, default=8000)
    args = parser.parse_args(argv)
    uvicorn.run(app, host=args.host, port=args.port)


if __name__ == "__main__":
    main()
