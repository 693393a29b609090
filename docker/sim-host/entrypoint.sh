#!/bin/sh
# Start a simulated Ascend host (runs under tini as PID 1):
#  1. state: a mounted /etc/ascend-sim/state.json wins; otherwise the preset named by
#     ASCEND_SIM_PRESET is copied there (a restarted container keeps its state file);
#  2. python3 -m ascend_sim.host_setup materialises devices, driver/firmware/CANN trees;
#  3. the inner Docker engine starts and must answer. Its storage driver is overlay2 when the
#     volume at /var/lib/docker can hold an overlay mount (a volume on ext4/xfs: container
#     start 0.4-1 s), vfs otherwise (works everywhere; every container start copies the whole
#     image, 2-4 s for the emulator image, measured here); ASCEND_SIM_STORAGE_DRIVER pins one;
#  4. /run/ascend-sim/ready marks the host as usable; then wait for SIGTERM.
# With ASCEND_SIM_ENGINE=init (the bare host, docker/sim-host/bare.Dockerfile) step 3 is what a
# sysvinit boot does instead: the entrypoint starts no dockerd of its own, it runs
# `/etc/init.d/docker start` when the docker.io package is installed and enabled (an
# /etc/rc2.d/S*docker link), and stops it on SIGTERM; the host is ready without an engine.
set -eu

STATE="${ASCEND_SIM_STATE:-/etc/ascend-sim/state.json}"
PRESETS=/opt/ascend-sim/src/ascend_sim/data/presets
READY=/run/ascend-sim/ready
DOCKERD_LOG=/var/log/dockerd.log
DOCKERD_WAIT_S="${ASCEND_SIM_DOCKERD_WAIT_S:-90}"

log() { echo "sim-host: $*" >&2; }
die() {
    log "error: $*"
    exit 1
}

rm -f "$READY"
mkdir -p "$(dirname "$STATE")" "$(dirname "$READY")"

if [ ! -s "$STATE" ]; then
    [ -n "${ASCEND_SIM_PRESET:-}" ] \
        || die "no state file at $STATE and ASCEND_SIM_PRESET is not set; run with -e ASCEND_SIM_PRESET=<name> or mount a state file"
    preset_file="$PRESETS/${ASCEND_SIM_PRESET}.json"
    if [ ! -f "$preset_file" ]; then
        known=""
        for f in "$PRESETS"/*.json; do
            [ -e "$f" ] && known="$known $(basename "$f" .json)"
        done
        die "unknown preset '${ASCEND_SIM_PRESET}' (no $preset_file); known:${known:- none}"
    fi
    # ascend_sim.state validates the preset and fills in every default.
    python3 - "$ASCEND_SIM_PRESET" "$STATE" <<'PY' || die "preset ${ASCEND_SIM_PRESET} is not a valid state"
import json, sys
from ascend_sim.state import load_preset
from ascend_deploy.errors import AscendDeployError
try:
    state = load_preset(sys.argv[1])
except AscendDeployError as exc:
    sys.exit(f"sim-host: error: {exc}")
with open(sys.argv[2], "w", encoding="utf-8") as fh:
    json.dump(state, fh, indent=2)
PY
    log "state from preset ${ASCEND_SIM_PRESET}"
fi

python3 -c 'import importlib.util, sys; sys.exit(importlib.util.find_spec("ascend_sim.host_setup") is None)' \
    || die "python module ascend_sim.host_setup is missing from /opt/ascend-sim/src; cannot materialise the simulated host"
python3 -m ascend_sim.host_setup --state "$STATE" || die "ascend_sim.host_setup --state $STATE failed (exit $?)"

# A restarted container keeps stale pid files that would stop dockerd from starting.
rm -f /var/run/docker.pid /var/run/docker-ssd.pid /var/run/docker/containerd/containerd.pid

if [ "${ASCEND_SIM_ENGINE:-entrypoint}" = init ]; then
    # shellcheck disable=SC2317  # called by the trap
    stop_init() {
        log "stopping"
        rm -f "$READY"
        [ ! -x /etc/init.d/docker ] || /etc/init.d/docker stop >/dev/null 2>&1 || true
        exit 0
    }
    trap stop_init TERM INT
    if [ -x /etc/init.d/docker ] && ls /etc/rc2.d/S*docker >/dev/null 2>&1; then
        if /etc/init.d/docker start; then
            log "init: /etc/init.d/docker started"
        else
            log "warning: /etc/init.d/docker start failed (exit $?)"
        fi
    fi
    touch "$READY"
    log "ready ($(hostname), init mode: the entrypoint starts no dockerd of its own)"
    while :; do
        sleep 5 &
        wait $! || true
    done
fi
# overlay2 needs a mount of type overlay on the volume's filesystem (not on an overlay root).
overlay_works() {
    probe=/var/lib/docker/.overlay-probe
    rm -rf "$probe"
    mkdir -p "$probe/lower" "$probe/upper" "$probe/work" "$probe/merged" || return 1
    if mount -t overlay overlay \
        -o "lowerdir=$probe/lower,upperdir=$probe/upper,workdir=$probe/work" "$probe/merged" 2>/dev/null; then
        umount "$probe/merged"
        rm -rf "$probe"
        return 0
    fi
    rm -rf "$probe"
    return 1
}
STORAGE_DRIVER="${ASCEND_SIM_STORAGE_DRIVER:-auto}"
if [ "$STORAGE_DRIVER" = auto ]; then
    # A volume that already holds vfs data keeps vfs (its images would be invisible to overlay2).
    if [ -d /var/lib/docker/vfs ] && [ ! -d /var/lib/docker/overlay2 ]; then
        STORAGE_DRIVER=vfs
    elif overlay_works; then
        STORAGE_DRIVER=overlay2
    else
        STORAGE_DRIVER=vfs
    fi
fi
case "$STORAGE_DRIVER" in
    overlay2 | vfs) ;;
    *) die "ASCEND_SIM_STORAGE_DRIVER=$STORAGE_DRIVER: use auto, overlay2 or vfs" ;;
esac

# shellcheck disable=SC2086  # ASCEND_SIM_DOCKERD_ARGS is a word list on purpose
dockerd --storage-driver "$STORAGE_DRIVER" --shutdown-timeout 3 ${ASCEND_SIM_DOCKERD_ARGS:-} >"$DOCKERD_LOG" 2>&1 &
dockerd_pid=$!

waited=0
until docker version >/dev/null 2>&1; do
    if ! kill -0 "$dockerd_pid" 2>/dev/null; then
        tail -n 5 "$DOCKERD_LOG" >&2 || true
        die "the inner dockerd exited; see $DOCKERD_LOG"
    fi
    [ "$waited" -lt "$DOCKERD_WAIT_S" ] || die "the inner dockerd did not answer within ${DOCKERD_WAIT_S} s"
    sleep 1
    waited=$((waited + 1))
done

# shellcheck disable=SC2317  # called by the trap
stop() {
    log "stopping"
    rm -f "$READY"
    kill -TERM "$dockerd_pid" 2>/dev/null || true
    wait "$dockerd_pid" 2>/dev/null || true
    exit 0
}
trap stop TERM INT

touch "$READY"
log "ready ($(hostname), inner dockerd ($STORAGE_DRIVER) after ${waited} s)"
while kill -0 "$dockerd_pid" 2>/dev/null; do
    sleep 5 &
    wait $! || true
done
die "the inner dockerd exited; see $DOCKERD_LOG"
