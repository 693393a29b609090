"""npu_preflight passes the release that will serve to the library checks (issue 23 items 4-5).

The role runs on localhost against a host tree with the real 24.1.rc3 driver version file and a
real 910B4 npu-smi sample: pinned to v0.23.0 (default graph mode needs HDK >= 25.5.1 from
v0.21.0rc1) its warnings name the HDK; eager serving has no such warning; an older release
neither. Before, the role never passed the release, so no run printed it.
"""

from __future__ import annotations

import importlib.util
import json
import os
from pathlib import Path

import pytest
from conftest import ANSIBLE_PLAYBOOK, DATA, SAMPLES, run_local_play

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not ANSIBLE_PLAYBOOK.exists(), reason="needs the venv"),
]

_spec = importlib.util.spec_from_file_location("build_tree", DATA / "hosts" / "build_tree.py")
build_tree = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(build_tree)

B4_64 = "npu-smi-info_910B4_anon_busid_10.txt"


def warnings_of(tmp_path: Path, release: str, eager: bool) -> list[str]:
    root = build_tree.build("driver-only", tmp_path / "host")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fake = bin_dir / "npu-smi"
    fake.write_text(
        "#!/bin/sh\n"
        f'if [ "$1" = "info" ] && [ -z "$2" ]; then /bin/cat "{SAMPLES / B4_64}"; exit 0; fi\n'
        "echo unsupported >&2; exit 1\n"
    )
    fake.chmod(0o755)
    out = tmp_path / "warnings.json"
    play = [
        {
            "hosts": "localhost",
            "gather_facts": False,
            "vars": {
                "npu_preflight_root": str(root),
                "npu_preflight_vllm_ascend": release,
                "npu_preflight_enforce_eager": eager,
                "npu_preflight_fail": False,
                "npu_preflight_holders_fatal": False,
                "npu_preflight_port": 18999,
            },
            "roles": ["npu_preflight"],
            "post_tasks": [
                {
                    "name": "Save the warnings",
                    "ansible.builtin.copy": {
                        "content": "{{ npu_preflight_warnings | to_json }}",
                        "dest": str(out),
                    },
                }
            ],
        }
    ]
    env = {"PATH": f"{bin_dir}:{os.environ['PATH']}", "ANSIBLE_NOCOLOR": "1"}
    done = run_local_play(play, tmp_path, env=env, timeout=300)
    assert done.returncode == 0, done.stdout[-4000:]
    return json.loads(out.read_text())


def test_the_pinned_release_brings_its_hdk_warning(tmp_path):
    found = [w for w in warnings_of(tmp_path, "v0.23.0", False) if "25.5.1" in w]
    assert found, "no HDK warning for v0.23.0 on driver 24.1.rc3"
    assert "vllm-ascend v0.23.0" in found[0] and "driver 24.1.rc3" in found[0], found


@pytest.mark.parametrize(("release", "eager"), [("v0.23.0", True), ("v0.20.2rc1", False)])
def test_eager_or_an_older_release_has_none(tmp_path, release, eager):
    assert not [w for w in warnings_of(tmp_path, release, eager) if "25.5.1" in w]
