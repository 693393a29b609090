#!/bin/sh
# Docker part of CI (called from .ci/run; run as root on a Debian machine; idempotent):
#   1. install docker.io and debootstrap with apt when they are missing,
#   2. start dockerd in the background when no engine answers, and wait for it,
#   3. build the images (docker/build-images.sh, arguments passed through).
set -eu
repo=$(cd "$(dirname "$0")/.." && pwd)
DOCKERD_LOG=${DOCKERD_LOG:-/var/log/dockerd-ci.log}
DOCKERD_WAIT_S=${DOCKERD_WAIT_S:-60}

log() { echo "ci-setup: $*" >&2; }
die() {
    log "error: $*"
    exit 1
}

missing=""
command -v dockerd >/dev/null 2>&1 || missing="$missing docker.io"
command -v debootstrap >/dev/null 2>&1 || missing="$missing debootstrap debian-archive-keyring"
command -v python3 >/dev/null 2>&1 || missing="$missing python3"
if [ -n "$missing" ]; then
    [ "$(id -u)" -eq 0 ] || die "need root to install:$missing"
    log "apt-get install$missing"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -q
    # shellcheck disable=SC2086  # a word list on purpose
    apt-get install -y -q --no-install-recommends ca-certificates $missing
fi

if ! docker info >/dev/null 2>&1; then
    [ "$(id -u)" -eq 0 ] || die "no Docker engine answers and starting dockerd needs root"
    log "starting dockerd (log: $DOCKERD_LOG)"
    nohup dockerd >"$DOCKERD_LOG" 2>&1 &
    waited=0
    until docker info >/dev/null 2>&1; do
        [ "$waited" -lt "$DOCKERD_WAIT_S" ] || {
            tail -n 5 "$DOCKERD_LOG" >&2 || true
            die "dockerd did not answer within ${DOCKERD_WAIT_S} s"
        }
        sleep 1
        waited=$((waited + 1))
    done
    log "dockerd answers after ${waited} s"
fi

exec "$repo/docker/build-images.sh" "$@"
