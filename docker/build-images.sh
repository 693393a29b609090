#!/bin/sh
# Build every image the tests and the demo need; an image is rebuilt only when its inputs
# (Dockerfile, the files it copies, build args, base image id) changed.
#   docker/build-images.sh                 # simulated host + one vLLM-Ascend emulator per row
#   docker/build-images.sh --only host     # just the simulated host
#   docker/build-images.sh --base IMAGE    # another base (default debian:bookworm-slim, else a
#                                          # debootstrap-made ascend-sim/debian:bookworm)
#   docker/build-images.sh --rootfs DIR    # import an existing debootstrap tree as the base
# Options are those of `python3 -m ascend_sim.images build --help`. Needs only python3 and docker.
set -eu
repo=$(cd "$(dirname "$0")/.." && pwd)
PYTHONPATH="$repo/src${PYTHONPATH:+:$PYTHONPATH}" exec "${PYTHON:-python3}" -m ascend_sim.images build "$@"
