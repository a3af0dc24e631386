# Sourced by every device script: installs the carried wheels and the project once per machine and
# carried wheel set (a second script, or several started at once, wait on the lock and find it done; new
# wheels in .whl, e.g. from ray_wheel.sh, install again), then exports the common settings.
#   carry: [".whl", ".carry"]   (.whl from ../shared/device/wheels.sh; .carry/datasets = ../shared/datasets)
export PYTHONPATH=/tmp/site
_cuda_gym_key="$PWD $(ls -l .whl 2>/dev/null | sha1sum)"
(
  flock 9
  if [[ "$(cat /tmp/site/.cuda_gym_installed 2>/dev/null)" != "$_cuda_gym_key" ]]; then
    python3 -m pip install -q --no-index --no-deps --no-compile --upgrade --target /tmp/site .whl/*.whl 2>/dev/null \
      && python3 -m pip install -q --no-index --no-deps --no-build-isolation -e . >/dev/null \
      && echo "$_cuda_gym_key" > /tmp/site/.cuda_gym_installed
  fi
) 9>/tmp/cuda_gym_install.lock
[[ "$(cat /tmp/site/.cuda_gym_installed 2>/dev/null)" == "$_cuda_gym_key" ]] || { echo "install failed" >&2; exit 1; }
export CUDA_HOME=/usr/local/cuda CUDA_GYM_DATA_DIR="$PWD/.carry/datasets" PYTHONUNBUFFERED=1
export CUDA_GYM_CACHE_DIR="${CUDA_GYM_CACHE_DIR:-/tmp/cuda_gym_cache}" TORCH_CUDA_ARCH_LIST=9.0
