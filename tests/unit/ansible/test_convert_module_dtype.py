"""The ascend_convert module's dtype through ansible-playbook: auto follows the serving rules
(float16 on 310p, which has no BF16), and the FP16 conversion is what the library writes."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pytest
from conftest import ANSIBLE_PLAYBOOK, DATA, REPO, run_local_play

pytestmark = pytest.mark.skipif(
    not ANSIBLE_PLAYBOOK.exists(), reason="needs the project venv's ansible-playbook"
)
RULES = json.loads((REPO / "src" / "ascend_deploy" / "data" / "serve_rules.json").read_text())


def convert(tmp_path: Path, args: dict) -> dict:
    out = tmp_path / "result.json"
    play = [
        {
            "hosts": "localhost",
            "gather_facts": False,
            "tasks": [
                {
                    "name": "Convert",
                    "ascend_vllm.serving.ascend_convert": args,
                    "register": "conv",
                    "ignore_errors": True,
                },
                {
                    "name": "Save the result",
                    "ansible.builtin.copy": {"content": "{{ conv | to_json }}", "dest": str(out)},
                },
            ],
        }
    ]
    done = run_local_play(play, tmp_path, env={"ANSIBLE_NOCOLOR": "1"}, python=sys.executable)
    assert out.exists(), done.stdout + done.stderr
    return json.loads(out.read_text())


@pytest.mark.parametrize(("hardware", "dtype"), [("310p", "float16"), ("a2", "bfloat16")])
def test_auto_dtype_follows_the_hardware(tmp_path, hardware, dtype):
    src = shutil.copytree(DATA / "tiny-qwen3-fp8", tmp_path / "fp8")
    args = {"src": str(src), "dst": str(tmp_path / "out"), "dtype": "auto", "status_only": True}
    got = convert(tmp_path, {**args, "hardware": hardware, "rules": RULES})
    assert (got.get("status"), got.get("dtype")) == ("needed", dtype), got


def test_auto_without_hardware_is_refused(tmp_path):
    got = convert(tmp_path, {"src": str(tmp_path), "dst": str(tmp_path / "o"), "dtype": "auto"})
    assert got.get("failed") and "hardware" in got["msg"], got


def test_float16_conversion_and_its_status(tmp_path):
    pytest.importorskip("numpy")
    pytest.importorskip("ml_dtypes")
    src = shutil.copytree(DATA / "tiny-qwen3-fp8", tmp_path / "fp8")
    dst = tmp_path / "fp16"
    args = {"src": str(src), "dst": str(dst), "verify": True}
    got = convert(tmp_path, {**args, "dtype": "float16"})
    assert got.get("changed") and got["status"] == "converted" and got["dtype"] == "float16", got
    assert json.loads((dst / "config.json").read_text())["torch_dtype"] == "float16"
    assert convert(tmp_path, {**args, "dtype": "float16", "status_only": True})["status"] == (
        "up-to-date"
    )
    # The default (bfloat16) sees the FP16 copy as one to convert again.
    assert convert(tmp_path, {**args, "status_only": True})["status"] == "needed"


@pytest.mark.parametrize(
    ("requested", "hardware", "want"),
    [
        ("auto", "310p", "float16"),
        ("auto", "310P", "float16"),
        ("auto", "a2", "bfloat16"),
        ("auto", "a3", "bfloat16"),
        ("auto", "unknown-hw", "bfloat16"),
        ("bfloat16", "310p", "bfloat16"),
        ("float16", "a2", "float16"),
    ],
)
def test_role_dtype_is_the_librarys_decision(tmp_path, requested, hardware, want):
    """model_weights_convert_dtype (roles/model_weights/vars/main.yml) decides as
    ascend_deploy.fp8.numeric.conversion_dtype does, from the same serving rules."""
    from ascend_deploy.fp8.numeric import conversion_dtype

    role = REPO / "roles" / "model_weights"
    hw = RULES["hardware"].get(hardware.lower())
    assert conversion_dtype(requested, hw) == want
    out = tmp_path / "dtype.txt"
    play = [
        {
            "hosts": "localhost",
            "gather_facts": False,
            "vars_files": [str(role / "vars" / "main.yml")],
            "vars": {
                "role_path": str(role),
                "model_weights_dtype": requested,
                "model_weights_hardware": hardware,
            },
            "tasks": [
                {
                    "name": "Save the dtype",
                    "ansible.builtin.copy": {
                        "content": "{{ model_weights_convert_dtype }}",
                        "dest": str(out),
                    },
                }
            ],
        }
    ]
    done = run_local_play(play, tmp_path, env={"ANSIBLE_NOCOLOR": "1"}, python=sys.executable)
    assert out.exists(), done.stdout + done.stderr
    assert out.read_text() == want
