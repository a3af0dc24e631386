"""Adapters of the kernel envs to LLM-RL frameworks, each behind its own optional extra.

* ``cuda_gym.adapters.trl``: ``CudaKernelToolEnv``, a TRL ``environment_factory`` (``pip install cuda-gym[trl]``).
* ``cuda_gym.adapters.openenv``: an OpenEnv ``Environment``, its app and client (``cuda-gym[openenv]``).
* ``cuda_gym.adapters.verl``: one verl ``BaseTool`` per env tool and the tool-config YAML (``cuda-gym[verl]``).

All three play the env's own episode through :class:`cuda_gym.adapters.session.EnvSession`. This
package imports none of the frameworks: import the submodule of the one you use.
"""

from cuda_gym.adapters.session import DEFAULT_ENV_ID, EnvSession, ToolStep

__all__ = ["DEFAULT_ENV_ID", "EnvSession", "ToolStep"]
