"""``python -m cuda_gym.baselines.evaluate``: the same as ``cuda-gym eval``."""

import sys

from cuda_gym.baselines.evaluate.cli import main

if __name__ == "__main__":
    sys.exit(main())
