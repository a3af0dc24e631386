#!/usr/bin/env bash
# Ray's wheel (79 MB) is over the 64 MiB one device call carries, and verl's tools import Ray: carry it in
# two calls to one warm machine (a machine is kept 30 s after a call; /tmp there lasts while it is kept).
#   here:         bash benchmarks/device/ray_wheel.sh prepare     -> .ray/ holds part 1 (ignored by git)
#   call 1:       carry [".ray"],  command: bash benchmarks/device/ray_wheel.sh stash
#   here, at once: bash benchmarks/device/ray_wheel.sh second      -> .ray/ holds part 2 + verl's closure
#   call 2:       carry [".whl", ".ray", ...], command: bash benchmarks/device/ray_wheel.sh join && <the run>
# join checks the reassembled wheel's sha256 and puts every wheel into .whl/ for setup.sh.
set -euo pipefail
RAY=ray-2.60.0-cp312-cp312-manylinux2014_x86_64.whl
PART1=52000000
STORE=/tmp/cuda_gym_ray_wheels
download() {  # the wheels verl's tools import that the image lacks (Python 3.12, x86-64)
  python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
    --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 -d "$STORE" \
    ray==2.60.0 verl==0.9.1 tensordict==0.10.0 pyvers==0.1.0 omegaconf==2.4.0 jsonschema==4.26.0 \
    jsonschema-specifications==2025.9.1 referencing==0.37.0 rpds-py==2026.9.1 orjson==3.13.0 \
    importlib-metadata==10.2.0 dill==0.4.1 jsonpointer==3.12 outcome==1.3.0.post0 rfc3339-validator==0.1.4 \
    sniffio==1.3.1 trio==0.35.0 wcwidth==0.9.4
}
case "${1:-}" in
  prepare)
    cd "$(git rev-parse --show-toplevel)"
    grep -qxF '/.ray/' .git/info/exclude || echo '/.ray/' >> .git/info/exclude
    download
    rm -rf .ray && mkdir .ray
    head -c "$PART1" "$STORE/$RAY" > .ray/ray.part1 ;;
  stash)  # on the device
    mkdir -p /tmp/keep && cp .ray/ray.part1 /tmp/keep/ && ls -la /tmp/keep ;;
  second)
    cd "$(git rev-parse --show-toplevel)"
    rm -rf .ray && mkdir .ray
    tail -c +"$(( PART1 + 1 ))" "$STORE/$RAY" > .ray/ray.part2
    sha256sum "$STORE/$RAY" | cut -d' ' -f1 > .ray/ray.sha256
    for f in "$STORE"/*.whl; do [[ "$(basename "$f")" == "$RAY" ]] || cp "$f" .ray/; done
    du -sh .ray ;;
  join)  # on the device
    cat /tmp/keep/ray.part1 .ray/ray.part2 > ".whl/$RAY"
    if [[ "$(sha256sum ".whl/$RAY" | cut -d' ' -f1)" != "$(cat .ray/ray.sha256)" ]]; then
      rm -f ".whl/$RAY"; echo "the ray wheel did not reassemble (was the machine given back between the calls?)" >&2; exit 1
    fi
    cp .ray/*.whl .whl/ && echo "ray and verl's wheels are in .whl/" ;;
  *) echo "usage: $0 prepare|stash|second|join" >&2; exit 2 ;;
esac
