"""The bundle's Ansible modules through ansible-playbook on localhost (real AnsiballZ).

Each test writes a small playbook, runs it with the repository's ansible.cfg (library/ and
module_utils = src) and reads the registered results back from a JSON file. Inputs are real:
sample npu-smi outputs, safetensors checkpoints, HTTP servers, processes and sockets.
"""

from __future__ import annotations

import hashlib
import http.server
import json
import os
import shutil
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from conftest import ANSIBLE_PLAYBOOK, REPO, SAMPLES, run_local_play

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not ANSIBLE_PLAYBOOK.exists(), reason="needs the venv's ansible-playbook"),
]
MATRIX = json.loads((REPO / "src/ascend_deploy/data/compat_matrix.json").read_text())
RULES = json.loads((REPO / "src/ascend_deploy/data/serve_rules.json").read_text())


def run(tmp_path: Path, tasks: list[dict], check: bool = False) -> dict:
    """Run ``tasks`` (each registers under its ``id``) on localhost; return id -> result."""
    out = tmp_path / "results.json"
    play_tasks = []
    ids = []
    for task in tasks:
        task = dict(task)
        tid = task.pop("id")
        ids.append(tid)
        play_tasks.append({**task, "register": tid, "ignore_errors": True})
    collect = {i: "{{ " + i + " | default({}) }}" for i in ids}
    play_tasks.append(
        {
            "name": "Save results",
            "ansible.builtin.copy": {"content": "{{ _all | to_json }}", "dest": str(out)},
            "vars": {"_all": collect},
            "check_mode": False,
        }
    )
    play = [{"hosts": "localhost", "gather_facts": False, "tasks": play_tasks}]
    env = {
        "ANSIBLE_CALLBACKS_ENABLED": "ansible.builtin.junit",
        "JUNIT_OUTPUT_DIR": str(tmp_path / "junit"),
        "ANSIBLE_REMOTE_TEMP": str(tmp_path / "ansible-remote"),
    }
    done = run_local_play(play, tmp_path, env=env, args=["--check"] if check else [])
    assert out.exists(), done.stdout[-3000:] + done.stderr[-3000:]
    return json.loads(out.read_text())


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def tiny_fp8(tmp_path_factory) -> Path:
    """A Qwen3-shaped FP8 checkpoint with random weights, small enough to convert in seconds."""
    sys.path.insert(0, str(REPO / "src"))
    from ascend_sim.checkpoints import resolve_arch, write_checkpoint

    arch = resolve_arch("qwen3-0.6b", layers=2)
    arch.update(hidden_size=256, intermediate_size=512, vocab_size=2048)
    arch.update(num_attention_heads=32, num_key_value_heads=8)
    out = tmp_path_factory.mktemp("models") / "tiny-fp8"
    write_checkpoint(str(out), arch, fp8=True, seed=3)
    return out


@pytest.fixture(scope="module")
def big_fp8(tmp_path_factory) -> Path:
    """Qwen3-4B-FP8 shaped, sparse on disk (headers real, data holes)."""
    sys.path.insert(0, str(REPO / "src"))
    from ascend_sim.checkpoints import write_checkpoint

    out = tmp_path_factory.mktemp("models") / "qwen3-4b-fp8"
    write_checkpoint(str(out), "qwen3-4b", fp8=True, data="sparse")
    return out


def write_manifest(model: Path) -> None:
    lines = []
    for f in sorted(p for p in model.iterdir() if p.is_file() and not p.name.startswith(".")):
        if f.name == "SHA256SUMS":
            continue
        lines.append(f"{hashlib.sha256(f.read_bytes()).hexdigest()}  {f.name}")
    (model / "SHA256SUMS").write_text("\n".join(lines) + "\n")


# ----------------------------------------------------------------------------- report


def test_report_renders_one_row_per_host_and_writes_json(tmp_path):
    rows = [
        {"host": "sim-0", "cards": "8 x 910B3", "problems": []},
        {"host": "sim-1", "cards": "8 x 910B3", "problems": ["npu.health: NPU 3 Alarm", "x"]},
    ]
    dest = tmp_path / "r" / "rows.json"
    res = run(
        tmp_path,
        [
            {
                "id": "table",
                "ascend_vllm.serving.ascend_report": {
                    "rows": rows,
                    "columns": ["host", "cards", "problems"],
                    "title": "Fleet",
                    "dest": str(dest),
                },
            }
        ],
    )["table"]
    assert res["table"][0] == "Fleet"
    assert res["table"][1].split() == ["HOST", "CARDS", "PROBLEMS"]
    assert res["table"][3].startswith("sim-0") and res["table"][3].endswith("-")
    assert res["table"][4].endswith("npu.health: NPU 3 Alarm; x")
    assert json.loads(dest.read_text()) == rows


def test_report_writes_documents_in_one_call_and_refuses_a_path_as_name(tmp_path):
    out = tmp_path / "reports" / "run1" / "host-a"
    plan = {"tp": 1, "max_model_len": 4096}
    res = run(
        tmp_path,
        [
            {
                "id": "docs",
                "ascend_vllm.serving.ascend_report": {
                    "dir": str(out),
                    "documents": {"plan": plan, "status": {"a": 1}},
                },
            },
            {
                "id": "bad",
                "ascend_vllm.serving.ascend_report": {"dir": str(out), "documents": {"../x": {}}},
            },
            {"id": "neither", "ascend_vllm.serving.ascend_report": {"title": "x"}},
        ],
    )
    assert res["docs"]["changed"] is False
    assert res["docs"]["written"] == [str(out / "plan.json"), str(out / "status.json")]
    assert json.loads((out / "plan.json").read_text()) == plan
    assert "document name '../x' is not a plain file name" in res["bad"]["msg"]
    assert not (tmp_path / "reports" / "run1" / "x.json").exists()
    assert "one of the following is required: rows, documents" in res["neither"]["msg"]


# ----------------------------------------------------------------------------- manifest


def test_manifest_verifies_caches_and_names_bad_files(tmp_path, tiny_fp8):
    model = tmp_path / "m"
    subprocess.run(["cp", "-r", str(tiny_fp8), str(model)], check=True)
    write_manifest(model)
    first = run(
        tmp_path, [{"id": "v", "ascend_vllm.serving.ascend_manifest": {"path": str(model)}}]
    )["v"]
    assert not first.get("failed"), first
    assert first["hashed"] == first["files"] >= 4
    second = run(
        tmp_path, [{"id": "v", "ascend_vllm.serving.ascend_manifest": {"path": str(model)}}]
    )["v"]
    assert second["hashed"] == 0 and second["changed"] is False
    shard = model / "model-00001-of-00001.safetensors"
    data = bytearray(shard.read_bytes())
    data[-1] ^= 0xFF
    shard.write_bytes(bytes(data))
    bad = run(tmp_path, [{"id": "v", "ascend_vllm.serving.ascend_manifest": {"path": str(model)}}])[
        "v"
    ]
    assert bad["failed"] and "model-00001-of-00001.safetensors: sha256" in bad["msg"]
    assert "Fix:" in bad["msg"]


@pytest.mark.parametrize(
    ("content", "expect"),
    [
        (b"", "is empty"),
        (b"\x00\x01\x02binary", "is not text"),
        (b"not a manifest line\n", "line 1 is not"),
        (b"0" * 64 + b"  ../../etc/passwd\n", "leaves the directory"),
    ],
)
def test_manifest_rejects_bad_manifests_with_one_line(tmp_path, content, expect):
    model = tmp_path / "m"
    model.mkdir()
    (model / "SHA256SUMS").write_bytes(content)
    res = run(tmp_path, [{"id": "v", "ascend_vllm.serving.ascend_manifest": {"path": str(model)}}])[
        "v"
    ]
    assert res["failed"] and expect in res["msg"] and "\n" not in res["msg"]


def test_manifest_missing_names_the_command_to_create_it(tmp_path):
    model = tmp_path / "m"
    model.mkdir()
    res = run(tmp_path, [{"id": "v", "ascend_vllm.serving.ascend_manifest": {"path": str(model)}}])[
        "v"
    ]
    assert res["failed"] and "sha256sum" in res["msg"] and str(model) in res["msg"]


# ----------------------------------------------------------------------------- compat


def test_compat_picks_newest_release_the_driver_runs_and_refuses_a_pinned_one(tmp_path):
    res = run(
        tmp_path,
        [
            {
                "id": "new",
                "ascend_vllm.serving.ascend_compat": {
                    "hardware": "a2",
                    "driver": "25.5.0",
                    "matrix": MATRIX,
                },
            },
            {
                "id": "old",
                "ascend_vllm.serving.ascend_compat": {
                    "hardware": "a2",
                    "driver": "24.1.rc2",
                    "matrix": MATRIX,
                },
            },
            {
                "id": "pinned",
                "ascend_vllm.serving.ascend_compat": {
                    "hardware": "a2",
                    "driver": "24.1.rc2",
                    "vllm_ascend": "v0.23.0",
                    "matrix": MATRIX,
                },
            },
            {
                "id": "unknown",
                "ascend_vllm.serving.ascend_compat": {
                    "hardware": "a2",
                    "vllm_ascend": "v9.9.9",
                    "matrix": MATRIX,
                },
            },
        ],
    )
    assert res["new"]["row"]["vllm_ascend"] == "v0.23.0"
    assert res["new"]["image"] == "quay.io/ascend/vllm-ascend:v0.23.0"
    assert res["new"]["pip_requirements"][0].startswith("torch==")
    old = res["old"]
    assert old["row"]["vllm_ascend"] != "v0.23.0"
    assert old["row"]["cann"] not in ("9.1.0", "9.0.0", "8.5.0", "8.5.1")
    assert old["row"]["skipped_for_driver"], old
    assert res["pinned"]["row"]["vllm_ascend"] == "v0.23.0"
    assert res["pinned"]["driver_supports_cann"] is False
    assert res["unknown"]["failed"] and "v9.9.9" in res["unknown"]["msg"]


def _renamed(matrix: dict, old: str, new: str) -> dict:
    doc = json.loads(json.dumps(matrix))
    for row in doc["rows"]:
        if row["vllm_ascend"] == old:
            row["vllm_ascend"] = new
    return doc


def test_compat_and_preflight_use_the_matrix_and_rules_they_are_given(tmp_path, big_fp8):
    """The role's controller lookups reach the library as they are (no file, no patching)."""
    sys.path.insert(0, str(REPO / "tests" / "data" / "hosts"))
    from build_tree import build  # type: ignore[import-not-found]

    root = tmp_path / "root"
    build("a2-toolkit-8.2", root)
    info = json.loads(json.dumps(_npu_info("npu-smi-info_910B4_32GB_24.1.1_partial_7.txt")))
    matrix = _renamed(MATRIX, "v0.9.1", "v0.9.1.post7")
    rules = json.loads(json.dumps(RULES))
    del rules["hardware"]["a2"]
    res = run(
        tmp_path,
        [
            {
                "id": "compat",
                "ascend_vllm.serving.ascend_compat": {"cann": "8.2.RC1", "matrix": matrix},
            },
            {
                "id": "shipped",
                "ascend_vllm.serving.ascend_compat": {"cann": "8.2.RC1", "matrix": MATRIX},
            },
            {
                "id": "pre",
                "ascend_vllm.serving.ascend_preflight": {
                    "root": str(root),
                    "npu_info": info,
                    "model_dir": str(big_fp8),
                    "matrix": matrix,
                    "rules": rules,
                },
            },
            {
                "id": "plan",
                "ascend_vllm.serving.ascend_plan": {
                    "model_dir": str(big_fp8),
                    "hbm_total_mb": 65536,
                    "rules": rules,
                },
            },
        ],
    )
    assert res["compat"]["row"]["vllm_ascend"] == "v0.9.1.post7", res["compat"]
    assert res["compat"]["image"] == "quay.io/ascend/vllm-ascend:v0.9.1.post7"
    assert res["shipped"]["row"]["vllm_ascend"] == "v0.9.1"
    checks = {c["id"]: c for c in res["pre"]["checks"]}
    assert "vllm-ascend:v0.9.1.post7" in checks["compat.runtime"]["evidence"], checks
    assert "unknown hardware 'a2'" in checks["model.plan"]["evidence"]
    assert res["plan"]["failed"] and "unknown hardware 'a2'" in res["plan"]["msg"]


SITE_MATRIX = REPO / "tests" / "data" / "site-matrix"


def test_compat_and_preflight_merge_the_site_matrix_they_are_given(tmp_path):
    """site_matrix (the controller file's text, as the roles pass it, or a parsed document) is
    merged over matrix; v0.30.0 is the fictional release of the test fixture."""
    sys.path.insert(0, str(REPO / "tests" / "data" / "hosts"))
    from build_tree import build  # type: ignore[import-not-found]

    root = tmp_path / "root"
    build("a2-toolkit-8.2", root)
    site_text = (SITE_MATRIX / "site-v0.30.0.json").read_text()
    broken = str(SITE_MATRIX / "site-broken.json")
    info = json.loads(json.dumps(_npu_info("npu-smi-info_910B4_32GB_24.1.1_partial_7.txt")))
    newer_v091 = {**next(r for r in MATRIX["rows"] if r["vllm_ascend"] == "v0.9.1")}
    newer_v091["vllm_ascend"] = "v0.9.1.post7"  # test fixture: a fictional post release
    site = {"matrix": MATRIX, "site_matrix": site_text, "site_matrix_file": "/ctl/site.json"}
    res = run(
        tmp_path,
        [
            {"id": "by_cann", "ascend_vllm.serving.ascend_compat": {"cann": "9.5.0", **site}},
            {
                "id": "by_pin",
                "ascend_vllm.serving.ascend_compat": {
                    "vllm_ascend": "v0.30.0",
                    "hardware": "a3",
                    "installed": {"torch": "2.11.0", "torch_npu": "2.11.0"},
                    **site,
                },
            },
            {
                "id": "shipped",
                "ascend_vllm.serving.ascend_compat": {"cann": "9.5.0", "matrix": MATRIX},
            },
            {
                "id": "broken",
                "ascend_vllm.serving.ascend_compat": {
                    "cann": "9.5.0",
                    "matrix": MATRIX,
                    "site_matrix": (SITE_MATRIX / "site-broken.json").read_text(),
                    "site_matrix_file": broken,
                    "fail_on_error": False,
                },
            },
            {
                "id": "pre",
                "ascend_vllm.serving.ascend_preflight": {
                    "root": str(root),
                    "npu_info": info,
                    "matrix": MATRIX,
                    "site_matrix": {"rows": [newer_v091]},
                    "rules": RULES,
                },
            },
            {
                "id": "pre_broken",
                "ascend_vllm.serving.ascend_preflight": {
                    "root": str(root),
                    "npu_info": info,
                    "matrix": MATRIX,
                    "site_matrix": {"rows": [{"vllm_ascend": "v0.9.1.post7"}]},
                    "rules": RULES,
                },
            },
        ],
    )
    row = res["by_cann"]["row"]
    assert row["vllm_ascend"] == "v0.30.0" and row["origin"] == "site", res["by_cann"]
    assert res["by_cann"]["image"] == "quay.io/ascend/vllm-ascend:v0.30.0"
    assert any("site row from /ctl/site.json" in n for n in row["notes"])
    assert res["by_pin"]["image"] == "quay.io/ascend/vllm-ascend:v0.30.0-a3", res["by_pin"]
    assert res["by_pin"]["pip_requirements"][:2] == ["torch==2.11.0", "torch-npu==2.11.0"]
    assert (
        res["shipped"]["failed"]
        and "no vllm-ascend release supports CANN 9.5.0" in (res["shipped"]["msg"])
    )
    assert res["broken"]["failed"], res["broken"]
    assert res["broken"]["msg"] == (f"site matrix {broken}: row v0.30.0: field torch_npu: missing")
    checks = {c["id"]: c for c in res["pre"]["checks"]}
    assert "vllm-ascend:v0.9.1.post7" in checks["compat.runtime"]["evidence"], checks
    assert res["pre_broken"]["failed"]
    assert res["pre_broken"]["msg"].startswith(
        "site matrix (site_matrix parameter): row v0.9.1.post7: field vllm: missing"
    ), res["pre_broken"]


def _npu_info(sample_name: str) -> dict:
    sys.path.insert(0, str(REPO / "src"))
    from ascend_deploy.host.npu_smi import parse

    return parse((SAMPLES / sample_name).read_text())


# ----------------------------------------------------------------------------- plan


def test_plan_fp8_4b_on_eight_64g_cards_one_replica_per_card(tmp_path, big_fp8):
    res = run(
        tmp_path,
        [
            {
                "id": "p",
                "ascend_vllm.serving.ascend_plan": {
                    "model_dir": str(big_fp8),
                    "hbm_total_mb": 65536,
                    "hbm_used_mb": 3300,
                    "npus": 8,
                    "vllm_ascend": "v0.23.0",
                    "api_key_env": True,
                    "rules": RULES,
                },
            },
            {
                "id": "tp3",
                "ascend_vllm.serving.ascend_plan": {
                    "model_dir": str(big_fp8),
                    "hbm_total_mb": 65536,
                    "npus": 8,
                    "tp": 3,
                    "rules": RULES,
                },
            },
            {
                "id": "quant",
                "ascend_vllm.serving.ascend_plan": {
                    "model_dir": str(big_fp8),
                    "hbm_total_mb": 65536,
                    "quantization": "ascend",
                    "rules": RULES,
                },
            },
        ],
    )
    plan = res["p"]["plan"]
    assert plan["feasible"] and plan["tp"] == 1 and plan["replicas"] == 8
    assert plan["served_model_dir"] == str(big_fp8) + "-bf16"
    assert [r["port"] for r in plan["replica_launch"]] == list(range(8000, 8008))
    assert "--api-key" not in plan["argv"]
    assert "valid sizes: 1, 2, 4, 8" in res["tp3"]["msg"]
    assert res["quant"]["failed"] and "--quantization ascend" in res["quant"]["msg"]


def test_plan_module_merges_additional_config_and_warns_on_removed_env(tmp_path):
    """The role's vllm_service_additional_config / extra_env / host facts reach the planner."""
    res = run(
        tmp_path,
        [
            {
                "id": "p",
                "ascend_vllm.serving.ascend_plan": {
                    "model_dir": str(REPO / "tests/data/models/Qwen3-32B"),
                    "hbm_total_mb": 65536,
                    "npu_ids": [0, 1, 2, 3],
                    "tp": 4,
                    "vllm_ascend": "v0.23.0",
                    "additional_config": {"weight_prefetch_config": {"enabled": True}},
                    "extra_env": {"ASCEND_BUFFER_POOL": "4:8"},
                    "host_cpus": 64,
                    "host_npus": 16,
                    "host_arch": "aarch64",
                    "options": {"estimate_weights": True},
                    "rules": RULES,
                },
            },
            {
                "id": "dup",
                "ascend_vllm.serving.ascend_plan": {
                    "model_dir": str(REPO / "tests/data/models/Qwen3-32B"),
                    "hbm_total_mb": 65536,
                    "extra_args": ["--additional-config", "{}"],
                    "options": {"estimate_weights": True},
                    "rules": RULES,
                },
            },
        ],
    )
    plan = res["p"]["plan"]
    argv = plan["argv"]
    assert json.loads(argv[argv.index("--additional-config") + 1]) == {
        "enable_flashcomm1": True,
        "weight_prefetch_config": {"enabled": True},
    }
    warnings = [n for n in plan["notes"] if n.startswith("WARNING: ")]
    assert any("ASCEND_BUFFER_POOL" in w and "removed in v0.23.0" in w for w in warnings)
    assert any("64 CPUs for 16 NPUs give 4" in w for w in warnings)
    assert res["dup"]["failed"] and "vllm_service_additional_config" in res["dup"]["msg"]


def test_plan_lays_replicas_out_on_the_real_npu_ids(tmp_path, big_fp8):
    """NPUs [2, 5] at TP 2: the spec the role starts as it is (devices, env, name, port)."""
    rules = json.loads(json.dumps(RULES))
    rules["env"].append({"name": "ASCEND_DEPLOY_PROBE", "value": "role-rules", "when": {}})
    res = run(
        tmp_path,
        [
            {
                "id": "p",
                "ascend_vllm.serving.ascend_plan": {
                    "model_dir": str(big_fp8),
                    "hbm_total_mb": 65536,
                    "npu_ids": [2, 5],
                    "tp": 2,
                    "service": "qwen3",
                    "port": 8100,
                    "rules": rules,
                },
            },
            {
                "id": "both",
                "ascend_vllm.serving.ascend_plan": {
                    "model_dir": str(big_fp8),
                    "hbm_total_mb": 65536,
                    "npus": 2,
                    "npu_ids": [2, 5],
                    "rules": RULES,
                },
            },
        ],
    )
    plan = res["p"]["plan"]
    assert plan["feasible"] and plan["replicas"] == 1, plan["reasons"]
    assert plan["replica_launch"] == [
        {
            "name": "qwen3-0",
            "index": 0,
            "npus": [2, 5],
            "devices": [
                "/dev/davinci2",
                "/dev/davinci5",
                "/dev/davinci_manager",
                "/dev/devmm_svm",
                "/dev/hisi_hdc",
            ],
            "port": 8100,
            "env": plan["env"],
            "argv": plan["argv"],
        }
    ]
    assert plan["env"]["ASCEND_RT_VISIBLE_DEVICES"] == "0,1"
    assert plan["env"]["ASCEND_DEPLOY_PROBE"] == "role-rules"
    assert res["both"]["failed"] and "mutually exclusive" in res["both"]["msg"]


def test_plan_takes_the_memory_from_the_chips_ddr_on_310p(tmp_path, big_fp8):
    """310P cards report DDR as Memory-Usage and no HBM: the role passes the chips and the module
    plans with their memory (the role took min of hbm_total_mb, None on 310P, and crashed)."""
    from ascend_deploy.host.npu_smi import parse

    chips_310p = parse((SAMPLES / "npu-smi-info_310P3_no_processes_3.txt").read_text())["chips"]
    a2_sample = SAMPLES / "npu-smi-info_910B4_32GB_24.1.1_partial_7.txt"
    chips_a2 = parse(a2_sample.read_text())["chips"][:2]
    assert chips_310p[0]["hbm_total_mb"] is None and chips_310p[0]["memory_total_mb"] == 21527
    res = run(
        tmp_path,
        [
            {
                "id": "p310",
                "ascend_vllm.serving.ascend_plan": {
                    "model_dir": str(big_fp8),
                    "chips": chips_310p,
                    "hardware": "310p",
                    "rules": RULES,
                },
            },
            {
                "id": "a2",
                "ascend_vllm.serving.ascend_plan": {
                    "model_dir": str(big_fp8),
                    "chips": chips_a2,
                    "npu_ids": [0, 1],
                    "rules": RULES,
                },
            },
            {
                "id": "nofigures",
                "ascend_vllm.serving.ascend_plan": {
                    "model_dir": str(big_fp8),
                    "chips": [{"npu": 3, "hbm_total_mb": None, "memory_total_mb": None}],
                    "rules": RULES,
                },
            },
        ],
    )
    assert res["p310"]["plan"]["memory"]["hbm_total_mb"] == 21527, res["p310"]
    assert res["a2"]["plan"]["memory"]["hbm_total_mb"] == min(c["hbm_total_mb"] for c in chips_a2)
    assert res["nofigures"]["failed"] and "[3]" in res["nofigures"]["msg"]
    assert "hbm_total_mb" in res["nofigures"]["msg"]


# ----------------------------------------------------------------------------- convert


def test_convert_check_mode_then_convert_then_up_to_date(tmp_path, tiny_fp8):
    dst = tmp_path / "tiny-bf16"
    args = {"src": str(tiny_fp8), "dst": str(dst)}
    checked = run(tmp_path, [{"id": "c", "ascend_vllm.serving.ascend_convert": args}], check=True)[
        "c"
    ]
    assert checked["changed"] is True and checked["status"] == "needed"
    assert not dst.exists()
    first = run(tmp_path, [{"id": "c", "ascend_vllm.serving.ascend_convert": args}])["c"]
    assert first["changed"] is True and first["status"] == "converted", first
    assert json.loads((dst / "config.json").read_text()).get("quantization_config") is None
    again = run(tmp_path, [{"id": "c", "ascend_vllm.serving.ascend_convert": args}])["c"]
    assert again["changed"] is False and again["status"] == "up-to-date"


def test_convert_status_of_a_bf16_model_is_not_needed(tmp_path, tiny_fp8):
    dst = tmp_path / "bf16"
    run(
        tmp_path,
        [
            {
                "id": "c",
                "ascend_vllm.serving.ascend_convert": {"src": str(tiny_fp8), "dst": str(dst)},
            }
        ],
    )
    res = run(
        tmp_path,
        [
            {
                "id": "c",
                "ascend_vllm.serving.ascend_convert": {
                    "src": str(dst),
                    "dst": str(dst) + "2",
                    "status_only": True,
                },
            }
        ],
    )["c"]
    assert res["status"] == "not-needed" and res["changed"] is False


def test_convert_garbage_config_is_one_line_naming_the_file(tmp_path):
    src = tmp_path / "junk"
    src.mkdir()
    (src / "config.json").write_bytes(b"\x00\xff garbage")
    res = run(
        tmp_path,
        [
            {
                "id": "c",
                "ascend_vllm.serving.ascend_convert": {"src": str(src), "dst": str(tmp_path / "o")},
            }
        ],
    )["c"]
    assert res["failed"] and "config.json" in res["msg"] and "\n" not in res["msg"]


# ----------------------------------------------------------------------------- procs


def test_procs_names_in_command_lines_never_make_a_process_ours(tmp_path):
    """Issue 11 E: `vllm serve` of another team is foreign even for the service called vllm.

    Ours are only processes in containers labelled ascend-deploy.service
    (tests/unit/host/test_procs.py and tests/integration/test_undeploy.py show those with real
    containers).
    """
    port_a, port_b = free_port(), free_port()
    server = (
        "import socket,sys,time; s=socket.socket(); "
        "s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1); "
        "s.bind(('127.0.0.1', int(sys.argv[1]))); s.listen(); time.sleep(120)"
    )
    launcher = tmp_path / "vllm"  # .../vllm serve /models/other-team, as `ps` shows it
    launcher.write_text(f"#!{sys.executable}\n{server.replace('; ', chr(10))}\n")
    launcher.chmod(0o755)
    team = subprocess.Popen([str(launcher), str(port_a), "serve", "/models/other-team"])
    word = subprocess.Popen([sys.executable, "-c", server, str(port_b), "vllm", "vllm-0"])
    try:
        time.sleep(0.5)
        args = {"ports": [port_a, port_b], "service": "vllm"}
        res = run(
            tmp_path,
            [
                {"id": "report", "ascend_vllm.serving.ascend_procs": args},
                {
                    "id": "stop",
                    "ascend_vllm.serving.ascend_procs": {**args, "state": "absent", "grace_s": 5},
                },
                {
                    "id": "opt_in",
                    "ascend_vllm.serving.ascend_procs": {
                        **args,
                        "state": "absent",
                        "kill_foreign": True,
                    },
                    "check_mode": True,
                },
            ],
        )
        assert res["report"]["managed"] == []
        assert sorted(h["pid"] for h in res["report"]["foreign"]) == sorted([team.pid, word.pid])
        assert res["stop"]["stopped"] == [] and res["stop"]["changed"] is False
        # with the opt-in, what would be ended is described: command, owner, port
        would = {s["pid"]: s for s in res["opt_in"]["stopped"]}
        assert would[team.pid]["result"] == "would stop" and would[team.pid]["foreign"] is True
        assert "/models/other-team" in would[team.pid]["argv"]
        assert would[team.pid]["port"] == port_a and would[team.pid]["user"]
        assert team.poll() is None and word.poll() is None, "a foreign process was ended"
    finally:
        for p in (team, word):
            p.kill()
            p.wait()


def test_procs_npu_holders_count_only_on_our_npus_and_kill_foreign_frees_memory(tmp_path):
    """A foreign job on another NPU is not in our way; with kill_foreign its memory is plannable."""
    sleeper = [sys.executable, "-c", "import time; time.sleep(120)"]
    on_ours, elsewhere = subprocess.Popen([*sleeper, "batch-a"]), subprocess.Popen(sleeper)
    chips = [
        {"npu": n, "chip": 0, "hbm_total_mb": 65536, "hbm_used_mb": u}
        for n, u in [(2, 40000), (5, 9000)]
    ]
    procs = [
        {"npu": 2, "chip": 0, "pid": on_ours.pid, "name": "python", "memory_mb": 39000},
        {"npu": 5, "chip": 0, "pid": elsewhere.pid, "name": "python", "memory_mb": 8000},
    ]
    args = {
        "service": "qwen3",
        "npus": [2, 3],
        "npu_info": {"chips": chips, "processes": procs},
    }
    try:
        res = run(
            tmp_path,
            [
                {"id": "list", "ascend_vllm.serving.ascend_procs": args},
                {
                    "id": "opt_in",
                    "ascend_vllm.serving.ascend_procs": {**args, "kill_foreign": True},
                    "check_mode": True,
                },
            ],
        )
        assert [h["pid"] for h in res["list"]["foreign"]] == [on_ours.pid]
        assert res["list"]["others_used_mb"] == {"2": 40000, "5": 9000}
        # Opted in: the job on NPU 2 will be ended, so only what no process claims stays in use.
        assert res["opt_in"]["others_used_mb"]["2"] == 1000
        assert res["opt_in"]["stopped"] == []  # state present: it lists, it never ends
        assert on_ours.poll() is None and elsewhere.poll() is None
    finally:
        for p in (on_ours, elsewhere):
            p.kill()
            p.wait()


# ----------------------------------------------------------------------------- health


class _Health(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200 if self.path == "/health" else 404)
        self.end_headers()

    def log_message(self, *args):
        pass


def test_health_ready_replica_and_unreachable_one(tmp_path):
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Health)
    thread = threading.Thread(target=srv.serve_forever, daemon=True)
    thread.start()
    try:
        port = srv.server_address[1]
        res = run(
            tmp_path,
            [
                {
                    "id": "ok",
                    "ascend_vllm.serving.vllm_health": {
                        "replicas": [{"name": "r0", "port": port}],
                        "docker": "",
                    },
                },
                {
                    "id": "down",
                    "ascend_vllm.serving.vllm_health": {
                        "replicas": [
                            {"name": "r0", "port": port},
                            {"name": "r1", "port": free_port()},
                        ],
                        "docker": "",
                        "timeout": 2,
                        "interval": 0.5,
                    },
                },
            ],
        )
    finally:
        srv.shutdown()
    assert res["ok"]["healthy"] is True and res["ok"]["ready"] == ["r0"]
    down = res["down"]
    assert down["healthy"] is False and down["ready"] == ["r0"]
    assert down["failures"][0]["name"] == "r1" and down["cause"] == "timeout"


# ----------------------------------------------------------------------------- deployed record

EMULATOR_IMAGE = "quay.io/ascend/vllm-ascend:v0.23.0"


def _docker_image_present(ref: str) -> bool:
    if not shutil.which("docker"):
        return False
    done = subprocess.run(["docker", "image", "inspect", ref], capture_output=True, check=False)
    return done.returncode == 0


@pytest.mark.docker
def test_deployed_record_then_check_names_each_drift(tmp_path):
    """Record a deployment (real container, env file, model dir, /health), then drift it."""
    if not _docker_image_present(EMULATOR_IMAGE):
        pytest.skip(f"needs the Docker engine and {EMULATOR_IMAGE} (docker/build-images.sh)")
    service = f"adtest{os.getpid()}"
    state = tmp_path / "state"
    state.mkdir()
    env_file = state / "service.env"
    env_file.write_text("VLLM_API_KEY=secret\n")
    env_file.chmod(0o600)
    model = tmp_path / "model"
    model.mkdir()
    (model / "model.safetensors").write_bytes(b"x" * 64)
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Health)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    port = srv.server_address[1]
    labels = ["--label", f"ascend-deploy.service={service}", "--label", "ascend-deploy.spec=s0"]
    sleeper = ["--entrypoint", "sleep", EMULATOR_IMAGE, "600"]
    _definition(state, {f"{service}-0": "s0"})
    subprocess.run(
        ["docker", "run", "-d", "--name", f"{service}-0", *labels, *sleeper],
        check=True,
        capture_output=True,
    )
    common = {"state_dir": str(state), "service": service}
    check = {
        "ascend_vllm.serving.ascend_deployed": {**common, "state": "check", "desired": "a" * 64}
    }
    other = {
        "ascend_vllm.serving.ascend_deployed": {**common, "state": "check", "desired": "b" * 64}
    }
    try:
        res = run(
            tmp_path,
            [
                {"id": "before", **check},
                {
                    "id": "rec",
                    "ascend_vllm.serving.ascend_deployed": {
                        **common,
                        "state": "present",
                        "desired": "a" * 64,
                        "files": ["service.env", "verified-definition"],
                        "dirs": [str(model)],
                        "ports": [port],
                        "facts": {"vllm_service_result": {"ports": [port], "changed": False}},
                    },
                },
                {"id": "same", **check},
                {"id": "other", **other},
            ],
        )
        assert res["before"]["converged"] is False
        assert res["before"]["reasons"] == ["no record of a verified deployment"]
        assert res["rec"]["changed"] is False and res["rec"]["path"] == str(state / "deployed.json")
        assert res["same"]["converged"] is True and res["same"]["reasons"] == []
        assert res["same"]["facts"]["vllm_service_result"]["ports"] == [port]
        assert "secret" not in (state / "deployed.json").read_text()
        assert res["other"]["converged"] is False and res["other"]["facts"] == {}
        assert res["other"]["reasons"] == [
            "the desired state differs (variables, bundle or model manifest changed)"
        ]

        # Each drift alone is named; undoing the content (not the mtime) of a file converges.
        env_file.write_text("VLLM_API_KEY=other\n")
        drift = [run(tmp_path, [{"id": "c", **check}])["c"]["reasons"]]
        env_file.write_text("VLLM_API_KEY=secret\n")
        (state / "verified-definition").write_text("abc\n")  # recorded as absent
        drift.append(run(tmp_path, [{"id": "c", **check}])["c"]["reasons"])
        (state / "verified-definition").unlink()
        os.utime(model / "model.safetensors", ns=(1, 1))
        drift.append(run(tmp_path, [{"id": "c", **check}])["c"]["reasons"])
        stop = ["docker", "stop", "-t", "0", f"{service}-0"]
        subprocess.run(stop, check=True, capture_output=True)
        srv.shutdown()
        srv.server_close()
        drift.append(run(tmp_path, [{"id": "c", **check}])["c"]["reasons"])
    finally:
        subprocess.run(["docker", "rm", "-f", f"{service}-0"], capture_output=True, check=False)
    assert drift[0] == ["file service.env changed"]
    assert drift[1] == ["file verified-definition changed"]
    assert drift[2] == [f"files under {model} changed"]
    assert drift[3] == [f"container {service}-0 is not running", f"files under {model} changed"]


def _definition(state, specs: dict[str, str]) -> None:
    """The service's containers.json as vllm_service writes it (replica name -> spec label)."""
    state.mkdir(parents=True, exist_ok=True)
    replicas = [{"name": n, "labels": {"ascend-deploy.spec": s}} for n, s in specs.items()]
    (state / "containers.json").write_text(json.dumps({"replicas": replicas}))


def test_deployed_health_is_asked_only_when_everything_else_matches(tmp_path):
    """A converged record whose replica does not answer /health is not converged."""
    state = tmp_path / "state"
    _definition(state, {})
    port = free_port()
    res = run(
        tmp_path,
        [
            {
                "id": "rec",
                "ascend_vllm.serving.ascend_deployed": {
                    "state": "present",
                    "state_dir": str(state),
                    "service": f"none{os.getpid()}",
                    "desired": "a" * 64,
                    "ports": [port],
                },
            },
            {
                "id": "c",
                "ascend_vllm.serving.ascend_deployed": {
                    "state": "check",
                    "state_dir": str(state),
                    "service": f"none{os.getpid()}",
                    "desired": "a" * 64,
                },
            },
            {
                "id": "bad",
                "ascend_vllm.serving.ascend_deployed": {
                    "state": "present",
                    "state_dir": str(state),
                },
            },
        ],
    )
    assert res["c"]["converged"] is False
    assert len(res["c"]["reasons"]) == 1
    assert res["c"]["reasons"][0].startswith(f"replica on port {port}: ")
    assert res["bad"]["failed"] and res["bad"]["msg"] == "state=present needs service, desired"


@pytest.mark.docker
def test_deployed_check_reports_restarts_of_a_crashing_replica(tmp_path):
    """Issue 16 §5: a replica its restart policy restarted after a crash looked converged."""
    if not _docker_image_present(EMULATOR_IMAGE):
        pytest.skip(f"needs the Docker engine and {EMULATOR_IMAGE} (docker/build-images.sh)")
    service = f"adrst{os.getpid()}"
    name = f"{service}-0"
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Health)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    port = srv.server_address[1]
    # Crashes (exit 1) each time /tmp/crash appears; the restart policy brings it back.
    loop = "while [ ! -e /tmp/crash ]; do sleep 0.1; done; rm -f /tmp/crash; exit 1"
    run_args = ["docker", "run", "-d", "--name", name, "--restart", "unless-stopped"]
    run_args += ["--label", f"ascend-deploy.service={service}", "--label", "ascend-deploy.spec=s0"]
    subprocess.run(
        [*run_args, "--entrypoint", "sh", EMULATOR_IMAGE, "-c", loop],
        check=True,
        capture_output=True,
    )
    common = {"state_dir": str(tmp_path / "state"), "service": service, "desired": "a" * 64}
    _definition(tmp_path / "state", {name: "s0"})

    def restarts() -> int:
        out = subprocess.run(
            ["docker", "inspect", "-f", "{{.RestartCount}} {{.State.Running}}", name],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.split()
        return int(out[0]) if out[1] == "true" else -1

    try:
        rec = {
            "ascend_vllm.serving.ascend_deployed": {**common, "state": "present", "ports": [port]}
        }
        checks = [
            {"id": "t0", "ascend_vllm.serving.ascend_deployed": {**common, "state": "check"}},
            {
                "id": "t1",
                "ascend_vllm.serving.ascend_deployed": {
                    **common,
                    "state": "check",
                    "restart_threshold": 2,
                },
            },
        ]
        before = run(tmp_path, [{"id": "rec", **rec}, checks[0]])
        for _ in range(2):  # two crashes, each restarted by the policy
            count = restarts()
            deadline = time.monotonic() + 60
            while (now := restarts()) != count + 1:
                assert time.monotonic() < deadline, f"no restart after a crash ({now})"
                # Ask for one crash; again only while it is still running uncrashed (an exec that
                # met the container between two states is lost), never while it restarts.
                if now == count:
                    subprocess.run(
                        ["docker", "exec", name, "touch", "/tmp/crash"], capture_output=True
                    )
                time.sleep(1)
        after = run(tmp_path, checks)
    finally:
        subprocess.run(["docker", "rm", "-f", name], capture_output=True, check=False)
        srv.shutdown()
    assert before["t0"]["converged"] is True and before["t0"]["restarts"] == {}
    assert after["t0"]["converged"] is False
    assert after["t0"]["restarts"] == {name: 2}
    assert after["t0"]["reasons"] == [
        f"container {name} restarted 2 time(s) since the last verification "
        "(more than 0; its restart policy hides a crash)"
    ]
    # At or below the threshold: converged, and the restarts are still reported.
    assert after["t1"]["converged"] is True and after["t1"]["restarts"] == {name: 2}


# ----------------------------------------------------------------------------- versions/preflight


def test_versions_and_preflight_on_a_fake_host_tree(tmp_path):
    sys.path.insert(0, str(REPO / "tests" / "data" / "hosts"))
    from build_tree import build  # type: ignore[import-not-found]

    root = tmp_path / "root"
    build("a2-cann-8.5", root)
    sys.path.insert(0, str(REPO / "src"))
    from ascend_deploy.host.npu_smi import parse

    info = parse((SAMPLES / "npu-smi-info_910B4_32GB_24.1.1_partial_7.txt").read_text())
    res = run(
        tmp_path,
        [
            {"id": "versions", "ascend_vllm.serving.ascend_versions": {"root": str(root)}},
            {
                "id": "pre",
                "ascend_vllm.serving.ascend_preflight": {
                    "root": str(root),
                    "npu_info": info,
                    "port": free_port(),
                    "service": "qwen3",
                    "matrix": MATRIX,
                    "rules": RULES,
                },
            },
        ],
    )
    facts = res["versions"]["ansible_facts"]["ascend_versions"]
    assert facts["driver"]["version"] == "24.1.rc2.2"
    assert facts["cann"]["version"] == "8.5.0"
    pre = res["pre"]
    assert pre["ok"] is False
    failing = [c for c in pre["checks"] if c["status"] == "fail"]
    assert any("24.1.rc2.2" in c["evidence"] and c["fix"] for c in failing), failing
