"""The bare simulated host image (host_bootstrap's test bed) and the full host's log settings."""

from __future__ import annotations

import json

import yaml
from conftest import REPO

from ascend_sim import images


def test_full_host_daemon_json_is_what_host_bootstrap_writes():
    # deploy.yml runs host_bootstrap on every simulated host; with other settings in the image's
    # daemon.json it would rewrite the file and restart the inner dockerd in every scenario.
    defaults = yaml.safe_load((REPO / "roles/host_bootstrap/defaults/main.yml").read_text())
    shipped = json.loads((REPO / "docker/sim-host/daemon.json").read_text())
    assert shipped == {
        "log-driver": defaults["host_bootstrap_log_driver"],
        "log-opts": {
            "max-size": str(defaults["host_bootstrap_log_max_size"]),
            "max-file": str(defaults["host_bootstrap_log_max_file"]),
        },
    }
    assert "docker/sim-host/daemon.json" in images.context_files("docker/sim-host/Dockerfile")


def test_bare_host_is_built_only_on_request():
    assert "host-bare" not in {s.key for s in images.image_specs()}
    bare = {s.key: s for s in images.image_specs(bare=True)}["host-bare"]
    assert bare.dockerfile == images.BARE_HOST_DOCKERFILE
    assert bare.primary == "ascend-sim/host-bare:latest"
    assert bare.hash_tag_repo == images.BARE_HOST_REPO


def test_bare_host_context_has_its_files_and_no_engine_settings():
    files = images.context_files(images.BARE_HOST_DOCKERFILE)
    for need in (
        "docker/sim-host/etc-default-docker",
        "docker/sim-host/entrypoint.sh",
        "docker/sim-host/npu-smi",
        "src/ascend_sim/host_setup.py",
    ):
        assert need in files
    # The package set comes from a build stage (COPY --from), not from the context, and the bare
    # host has no daemon.json: host_bootstrap writes it.
    assert "docker/sim-host/daemon.json" not in files
    lines = images._logical_lines((REPO / images.BARE_HOST_DOCKERFILE).read_text())
    bare_stage = lines[: lines.index("FROM bare AS debs")]
    assert not [line for line in bare_stage if "docker" in line or "python3-requests" in line]
    assert "COPY --from=debs /debs /opt/ascend-sim/bootstrap-debs" in lines
    assert "ENV ASCEND_SIM_ENGINE=init" in lines
