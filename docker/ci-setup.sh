#!/bin/sh
# Set up this machine for `make demo`, `make test` and CI (Debian/Ubuntu; idempotent; the
# Makefile calls it first, .ci/run through `make test`):
#   1. apt packages when missing: python3, python3-venv (the venv), docker.io (a Docker engine),
#      debootstrap + debian-archive-keyring (a base image when debian:bookworm-slim cannot be pulled),
#      openssh-client (one test reaches a host over SSH),
#   2. a Docker engine that answers: start dockerd when none does,
#   3. the images (docker/build-images.sh, arguments passed through).
# As root it installs and starts what is missing. Otherwise, or when something cannot be done
# here (another DOCKER_HOST that does not answer, no apt-get), it stops at once naming the cause
# and the command to run. Modes:
#   docker/ci-setup.sh               # 1 + 2 + 3 (CI)
#   docker/ci-setup.sh --no-images   # 1 + 2 (make setup: the first step of make demo/test)
#   docker/ci-setup.sh --python      # python3 and venv only (make venv)
# Environment: DOCKERD_LOG (default /var/log/dockerd-ci.log), DOCKERD_WAIT_S (default 60),
# DOCKERD_ARGS (extra dockerd arguments, e.g. --data-root DIR; with them dockerd also listens on
# a unix:// DOCKER_HOST).
set -eu
repo=$(cd "$(dirname "$0")/.." && pwd)
DOCKERD_LOG=${DOCKERD_LOG:-/var/log/dockerd-ci.log}
DOCKERD_WAIT_S=${DOCKERD_WAIT_S:-60}
DOCKERD_ARGS=${DOCKERD_ARGS:-}
DEFAULT_SOCKET=unix:///var/run/docker.sock

log() { echo "setup: $*" >&2; }
die() {
    echo "setup: error: $*" >&2
    exit 1
}

mode=all
case "${1:-}" in
--python) mode=python ;;
--no-images) mode=engine ;;
esac
[ "$mode" = all ] || shift

is_root() { [ "$(id -u)" -eq 0 ]; }
# The command a non-root user is told to run (sudo when there is one).
as_root() {
    if command -v sudo >/dev/null 2>&1; then echo "sudo $*"; else echo "su -c '$*'"; fi
}
setup_cmd="sh $repo/docker/ci-setup.sh"
[ "$mode" = all ] || setup_cmd="$setup_cmd --$([ "$mode" = python ] && echo python || echo no-images)"

# DOCKER_HOST names another engine than the local default socket.
other_host() { [ -n "${DOCKER_HOST:-}" ] && [ "${DOCKER_HOST}" != "$DEFAULT_SOCKET" ] && [ "${DOCKER_HOST}" != unix:///run/docker.sock ]; }

# `docker info` once; sets engine_error to docker's last line when no engine answers.
engine_answers() {
    if out=$(timeout 20 docker info --format '{{.ServerVersion}}' 2>&1 >/dev/null); then
        return 0
    fi
    engine_error=$(printf '%s\n' "$out" | grep -v '^$' | tail -n 1)
    [ -n "$engine_error" ] || engine_error="docker info did not answer within 20 s"
    return 1
}

# ---------------------------------------------------------------- 1. packages
need=""      # required for this mode
optional=""  # installed as root, never a reason to stop
command -v python3 >/dev/null 2>&1 || need="$need python3"
if ! python3 -c 'import venv, ensurepip' >/dev/null 2>&1; then need="$need python3-venv"; fi
engine_up=no
if [ "$mode" != python ]; then
    if ! command -v docker >/dev/null 2>&1; then
        need="$need docker.io"
    elif engine_answers; then
        engine_up=yes
    elif ! command -v dockerd >/dev/null 2>&1 && ! other_host; then
        need="$need docker.io"
    fi
    command -v debootstrap >/dev/null 2>&1 || optional="$optional debootstrap debian-archive-keyring"
fi
# tests/integration/test_deploy_unreachable.py reaches a host over SSH (a closed port).
command -v ssh >/dev/null 2>&1 || optional="$optional openssh-client"
if [ -n "$need" ] || { [ -n "$optional" ] && is_root; }; then
    if ! is_root; then
        die "missing:$need. Run as root: $(as_root "$setup_cmd") (it runs apt-get install$need$optional and starts what is needed), then run make again"
    fi
    if [ -z "$need" ] && ! command -v apt-get >/dev/null 2>&1; then
        optional=""
    else
        command -v apt-get >/dev/null 2>&1 ||
            die "missing:$need$optional and apt-get is not here (not Debian/Ubuntu): install them with this system's package manager, then run make again"
        log "apt-get install$need$optional"
        export DEBIAN_FRONTEND=noninteractive
        apt-get update -q >&2
        # shellcheck disable=SC2086  # word lists on purpose
        apt-get install -y -q --no-install-recommends ca-certificates $need $optional >&2 ||
        die "apt-get install$need$optional failed (see above); fix the package source, then run make again"
    fi
fi
[ "$mode" != python ] || exit 0

# ---------------------------------------------------------------- 2. a Docker engine
if [ "$engine_up" = no ] && ! engine_answers; then
    case "$engine_error" in
    *"permission denied"* | *"Permission denied"*)
        die "the Docker engine refuses this user ($engine_error). Run make as root, or add the user to the docker group: $(as_root "usermod -aG docker $(id -un)") and log in again"
        ;;
    esac
    if other_host && [ -z "$DOCKERD_ARGS" ]; then
        die "no Docker engine answers at DOCKER_HOST=$DOCKER_HOST ($engine_error). Start that engine, or unset DOCKER_HOST to use this machine's (as root, $setup_cmd starts it)"
    fi
    is_root || die "no Docker engine answers ($engine_error). Start one as root: $(as_root "$setup_cmd"), then run make again"
    case "${DOCKER_HOST:-}" in
    "" | "$DEFAULT_SOCKET") listen="" ;;
    unix://*) listen="-H $DOCKER_HOST" ;;
    *) die "no Docker engine answers at DOCKER_HOST=$DOCKER_HOST ($engine_error); only a unix:// socket can be started here. Start that engine, or unset DOCKER_HOST" ;;
    esac
    if [ -z "$DOCKERD_ARGS$listen" ] && [ -d /run/systemd/system ] && command -v systemctl >/dev/null 2>&1; then
        log "no Docker engine answers ($engine_error); systemctl start docker"
        systemctl start docker >&2 || die "systemctl start docker failed: see journalctl -u docker"
        DOCKERD_LOG="journalctl -u docker"
    else
        log "no Docker engine answers ($engine_error); starting dockerd (log: $DOCKERD_LOG)"
        # shellcheck disable=SC2086  # word lists on purpose
        nohup dockerd $listen $DOCKERD_ARGS >"$DOCKERD_LOG" 2>&1 &
        echo $! >"$DOCKERD_LOG.pid"
    fi
    waited=0
    until engine_answers; do
        if [ "$waited" -ge "$DOCKERD_WAIT_S" ]; then
            [ ! -f "$DOCKERD_LOG" ] || tail -n 5 "$DOCKERD_LOG" >&2
            die "dockerd did not answer within ${DOCKERD_WAIT_S} s ($engine_error); its log: $DOCKERD_LOG"
        fi
        sleep 1
        waited=$((waited + 1))
    done
    log "the Docker engine answers after ${waited} s"
fi
[ "$mode" = all ] || exit 0

# ---------------------------------------------------------------- 3. images
exec "$repo/docker/build-images.sh" "$@"
