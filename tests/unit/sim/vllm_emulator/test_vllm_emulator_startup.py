"""Start-up of the emulated `vllm serve`: each pitfall with vLLM-Ascend's exact text.

The emulator runs as a real child process against a sandbox root (devices, driver mounts,
host state) and real safetensors checkpoints: a sparse full-size Qwen3-4B layout (headers
only, so memory numbers are the real ones) and a tiny random Qwen3.
"""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
import time

import pytest

from ascend_deploy.model.info import inspect_model
from ascend_deploy.planning import compat
from ascend_deploy.planning.memory import DEFAULT_MODEL
from ascend_deploy.planning.rules import block_fp8_rule, shipped_rules
from ascend_deploy.versioning import version_key
from ascend_sim.checkpoints import with_yarn, write_checkpoint
from ascend_sim.npu_registry import live_holders
from ascend_sim.tokenizer import tokenizer_json
from ascend_sim.vllm_emulator import messages as M
from ascend_sim.vllm_emulator.args import parse_serve_args
from ascend_sim.vllm_emulator.device import REGISTRY_REL
from ascend_sim.vllm_emulator.sandbox import (
    Emulator,
    default_state,
    emulator_env,
    make_root,
    preset_state,
    write_row,
    write_tiny_random_model,
)
from ascend_sim.vllm_emulator.versions import behaviour_for

GIB = 1 << 30


def _add_tokenizer(model_dir) -> None:
    with open(os.path.join(model_dir, "tokenizer.json"), "w", encoding="utf-8") as fh:
        json.dump(tokenizer_json(), fh)


@pytest.fixture(scope="module")
def q4b_fp8(tmp_path_factory):
    d = str(tmp_path_factory.mktemp("q4bfp8") / "Qwen3-4B-FP8")
    write_checkpoint(d, arch="qwen3-4b", fp8=True, data="sparse")
    _add_tokenizer(d)
    return d


tiny_model = write_tiny_random_model


def sandbox(tmp_path, row="v0.23.0", state=None, driver=None, devices=None, **env) -> dict:
    root = make_root(str(tmp_path / "root"), state=state, driver_version=driver, devices=devices)
    row_path = write_row(str(tmp_path / "row.json"), row)
    return emulator_env(root, row_path, **env)


def run(args: list[str], env: dict, timeout: float = 60) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", "ascend_sim.vllm_emulator", "serve", *args]
    return subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout)


def serve_args(model: str, *extra: str) -> list[str]:
    return [model, "--host", "127.0.0.1", "--port", "0", *extra]


# -- command line ---------------------------------------------------------------------------
def test_unknown_argument_is_an_argparse_error(tmp_path, tiny_random_model):
    res = run([tiny_random_model, "--max-model-lenght", "4096"], sandbox(tmp_path))
    assert res.returncode == 2
    assert "vllm: error: unrecognized arguments: --max-model-lenght" in res.stderr
    assert "Traceback" not in res.stderr


def test_real_argument_names_and_underscore_spelling():
    a = parse_serve_args(
        [
            "/m",
            "--max_model_len",
            "4096",
            "--served-model-name",
            "a",
            "b",
            "-tp",
            "2",
            "--gpu-memory-utilization",
            "0.8",
            "--enforce-eager",
            "--quantization",
            "ascend",
            "--api-key",
            "k",
            "--swap-space",
            "8",
            "--dtype",
            "bfloat16",
            "--trust-remote-code",
            "--reasoning-parser",
            "qwen3",
            "--max-num-seqs",
            "16",
        ]
    )
    assert (a.max_model_len, a.served_model_name, a.tensor_parallel_size) == (4096, ["a", "b"], 2)
    assert (a.gpu_memory_utilization, a.enforce_eager, a.quantization) == (0.8, True, "ascend")
    assert (a.api_key, a.swap_space, a.dtype, a.trust_remote_code) == ("k", 8.0, "bfloat16", True)
    assert (a.reasoning_parser, a.max_num_seqs) == ("qwen3", 16)


def test_bad_utilization_value_is_rejected(tmp_path, tiny_random_model):
    res = run([tiny_random_model, "--gpu-memory-utilization", "1.5"], sandbox(tmp_path))
    assert res.returncode == 2
    assert "--gpu-memory-utilization: must be in (0, 1], got 1.5" in res.stderr


def test_missing_model_directory_is_one_line_exit_2(tmp_path):
    res = run(serve_args(str(tmp_path / "nope")), sandbox(tmp_path))
    assert res.returncode == 2
    assert res.stderr.strip().splitlines()[-1].endswith("nope: model directory not found")
    assert "Traceback" not in res.stderr


def test_garbage_config_is_one_line_exit_2(tmp_path, tiny_random_model):
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "config.json").write_bytes(b"\x00\x01garbage")
    res = run(serve_args(str(bad)), sandbox(tmp_path))
    assert res.returncode == 2
    assert "config.json: config.json is not valid JSON" in res.stderr
    assert "Traceback" not in res.stderr


def test_missing_row_file_names_it(tmp_path, tiny_random_model):
    env = sandbox(tmp_path)
    env["ASCEND_SIM_ROW"] = str(tmp_path / "missing-row.json")
    res = run(serve_args(tiny_random_model), env)
    assert res.returncode == 2
    assert "missing-row.json: image row file not found" in res.stderr


# -- pitfall 1: devices, mounts, driver -------------------------------------------------------
def test_no_devices_means_no_platform(tmp_path, tiny_random_model):
    res = run(serve_args(tiny_random_model), sandbox(tmp_path, devices=0))
    assert res.returncode == 1
    assert M.NO_PLATFORM in res.stdout
    assert res.stderr.strip() == M.FAILED_INFER_DEVICE


def test_visible_device_not_mounted(tmp_path, tiny_random_model):
    # Two devices mounted are 0 and 1 in the container: 5 is dropped, set_device fails.
    env = sandbox(tmp_path, devices=2, ASCEND_RT_VISIBLE_DEVICES="5")
    res = run(serve_args(tiny_random_model), env)
    assert res.returncode == 1
    assert M.SET_VISIBLE_FAILED.format(device=0, mask="5") in res.stderr
    assert M.RT_SET_DEVICE_FAILED in res.stderr


def test_host_id_mask_fails_and_container_numbering_starts(tmp_path, tiny_random_model):
    """The old mapping (only /dev/davinci4 mounted, mask 4) fails; mask 0 starts on chip 4."""
    old = sandbox(tmp_path / "old", devices=5, ASCEND_RT_VISIBLE_DEVICES="4")
    dev = os.path.join(old["ASCEND_SIM_ROOT"], "dev")
    for i in range(4):
        os.remove(os.path.join(dev, f"davinci{i}"))
    res = run(serve_args(tiny_random_model), old)
    assert res.returncode == 1
    assert M.SET_VISIBLE_FAILED.format(device=0, mask="4") in res.stderr
    old["ASCEND_RT_VISIBLE_DEVICES"] = "0"
    from ascend_sim.vllm_emulator import device

    os.environ["ASCEND_SIM_ROOT"] = old["ASCEND_SIM_ROOT"]
    os.environ["ASCEND_RT_VISIBLE_DEVICES"] = "0"
    try:
        probed = device.probe()
    finally:
        del os.environ["ASCEND_RT_VISIBLE_DEVICES"]
        del os.environ["ASCEND_SIM_ROOT"]
    assert probed.mounted == [4] and probed.visible == [4] and probed.usable


def test_driver_mount_missing(tmp_path, tiny_random_model):
    env = sandbox(tmp_path)
    os.remove(os.path.join(env["ASCEND_SIM_ROOT"], "usr/local/Ascend/driver/version.info"))
    res = run(serve_args(tiny_random_model), env)
    assert res.returncode == 1
    assert M.FAILED_INFER_DEVICE in res.stderr


def test_driver_too_old_for_image_cann(tmp_path, tiny_random_model):
    # v0.13.0 ships CANN 8.5.0 (C25, lists C21-C25); driver 24.1.rc3 (C19) lists C13-C19.
    state = preset_state("a2-old-driver")
    res = run(serve_args(tiny_random_model), sandbox(tmp_path, row="v0.13.0", state=state))
    assert res.returncode == 1
    assert "error code is 500001" in res.stderr
    assert M.ACL_INTERNAL in res.stderr
    assert "ERR00100 PTA call acl api failed" in res.stdout


def test_old_driver_preset_fails_the_image_whose_cann_excludes_it(tmp_path, tiny_random_model):
    # a2-old-driver: HDK 24.1.rc3 (C19, lists C13-C19); v0.23.0 carries CANN 9.1.0 (C31,
    # lists C23, C25, C31): neither version file names the other (device.cann_runs_on_driver).
    state = preset_state("a2-old-driver")
    res = run(serve_args(tiny_random_model), sandbox(tmp_path, row="v0.23.0", state=state))
    assert res.returncode == 1
    assert "NPU function error: at_npu::native::AclSetCompileopt" in res.stderr
    assert "error code is 500001" in res.stderr


def test_old_driver_preset_runs_the_image_without_a_published_refusal(tmp_path, tiny_random_model):
    # v0.11.0 carries CANN 8.3.RC2 (C23). The driver's compatible_version (C13..C19) does not
    # name it, but the CANN's own list names the driver's train C19 (as CANN 8.2.RC1's does:
    # published for HDK 24.1.rc3), so it runs; ascend_deploy.planning.compat has no statement
    # either.
    from ascend_deploy.planning.compat import driver_supports_cann

    assert driver_supports_cann("24.1.rc3", "8.3.RC2") is None
    env = sandbox(tmp_path, row="v0.11.0", state=preset_state("a2-old-driver"))
    with Emulator(serve_args(tiny_random_model, "--enforce-eager"), env).start() as emu:
        assert emu.ready, emu.output()


@pytest.mark.parametrize("row", ["v0.23.0", "v0.11.0"])
def test_current_driver_preset_starts_both_images(tmp_path, tiny_random_model, row):
    env = sandbox(tmp_path, row=row, state=preset_state("a2-910b3-8x64g"))
    with Emulator(serve_args(tiny_random_model, "--enforce-eager"), env).start() as emu:
        assert emu.ready, emu.output()


# -- pitfall 2: FP8 ---------------------------------------------------------------------------
def test_fp8_rejected_with_old_message_on_v0_11(tmp_path, q4b_fp8):
    res = run(serve_args(q4b_fp8), sandbox(tmp_path, row="v0.11.0"))
    assert res.returncode == 1
    assert res.stderr.strip() == "ValueError: fp8 quantization is currently not supported in npu."


def test_fp8_later_failure_mode_on_v0_23(tmp_path, q4b_fp8):
    res = run(serve_args(q4b_fp8), sandbox(tmp_path, row="v0.23.0"))
    assert res.returncode == 1
    assert "AttributeError: 'Qwen3Config' object has no attribute 'o_groups'" in res.stderr
    assert "fp8 quantization is currently not supported" not in res.stderr + res.stdout


def _fp8_row(release: str, hardware: str) -> dict:
    """The emulator's image row for a matrix release on ``hardware`` (CANN as resolved)."""
    row = compat.find_row(release)
    return {
        "vllm_ascend": row["vllm_ascend"],
        "vllm": row["vllm"].split("/")[0],
        "torch": row["torch"],
        "torch_npu": row["torch_npu"],
        "cann": compat.row_cann(row, hardware),
        "hardware": hardware,
    }


# Upstream per tag (platform.py supported_quantization; fp8_config.py / methods/fp8.py and
# issue #14467): refused up to v0.20.2rc1, o_groups from v0.21.0rc1 to v0.25.1rc1, any device.
FP8_BY_RELEASE = [
    (
        r["vllm_ascend"],
        "refused" if version_key(r["vllm_ascend"]) < version_key("v0.21.0rc1") else "o_groups",
    )
    for r in compat.load_matrix()
    if version_key(r["vllm_ascend"]) >= version_key("v0.17.0rc1")
]


@pytest.mark.parametrize("hardware", ["a2", "a3", "a5", "310p"])
@pytest.mark.parametrize(("release", "outcome"), FP8_BY_RELEASE)
def test_block_fp8_fails_per_release_on_every_device(tmp_path, q4b_fp8, release, outcome, hardware):
    res = run(serve_args(q4b_fp8), sandbox(tmp_path, row=_fp8_row(release, hardware)))
    assert res.returncode == 1, res.stdout[-2000:]
    if outcome == "refused":
        assert res.stderr.strip() == M.QUANT_NOT_SUPPORTED.format(quant="fp8")
    else:
        assert M.FP8_O_GROUPS.format(config_class="Qwen3Config") in res.stderr
        assert "not supported in npu" not in res.stderr + res.stdout


def test_block_fp8_rules_agree_with_the_emulators_allow_list_and_message():
    rules = shipped_rules()
    for row in compat.load_matrix():
        rule = block_fp8_rule(rules, row["vllm_ascend"])
        assert rule is not None, row["vllm_ascend"]
        allowed = "fp8" in behaviour_for(row["vllm_ascend"]).supported_quantization
        assert allowed == (rule["outcome"] != "refused"), row["vllm_ascend"]
    errors = {r["outcome"]: r["error"] for r in rules["block_fp8"]["releases"]}
    assert errors == {
        "refused": M.QUANT_NOT_SUPPORTED.format(quant="fp8"),
        "load_error": M.FP8_O_GROUPS,
    }


def test_block_fp8_on_a_release_no_rule_covers_says_it_is_emulated(tmp_path, q4b_fp8):
    row = dict(_fp8_row("v0.25.1rc1", "a5"), vllm_ascend="v0.27.1rc1")
    res = run(serve_args(q4b_fp8), sandbox(tmp_path, row=row))
    assert res.returncode == 1
    assert M.FP8_NO_RULE.format(release="v0.27.1rc1") in res.stderr


def test_quantization_method_not_in_the_releases_allow_list(tmp_path, tiny_random_model):
    res = run(
        serve_args(tiny_random_model, "--quantization", "compressed-tensors"),
        sandbox(tmp_path, row="v0.11.0"),
    )
    assert res.returncode == 1
    assert res.stderr.strip() == (
        "ValueError: compressed-tensors quantization is currently not supported in npu."
    )
    res = run(
        serve_args(tiny_random_model, "--quantization", "fp8"), sandbox(tmp_path, row="v0.11.0")
    )
    assert res.stderr.strip() == "ValueError: fp8 quantization is currently not supported in npu."


# -- pitfall 3: port bound, HCCL port -----------------------------------------------------------
def test_port_already_bound(tmp_path, tiny_random_model):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen(1)
        port = s.getsockname()[1]
        res = run(
            [tiny_random_model, "--host", "127.0.0.1", "--port", str(port)], sandbox(tmp_path)
        )
    assert res.returncode == 1
    assert res.stderr.strip() == "OSError: [Errno 98] Address already in use"


def test_hccl_port_taken_with_tp2(tmp_path, tiny_random_model):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen(1)
        port = s.getsockname()[1]
        env = sandbox(tmp_path, HCCL_IF_BASE_PORT=str(port), HCCL_OP_EXPANSION_MODE="AIV")
        res = run(serve_args(tiny_random_model, "-tp", "2"), env)
    assert res.returncode == 1
    assert "HcclGetRootInfo(&hcclID), error code is 11" in res.stderr
    assert (
        "Failed to bind the IP port. Reason: The IP address and port have been bound" in res.stderr
    )
    assert f"host nic listen start failed, port[{port}], return[11]" in res.stderr


# -- pitfall 4: graph capture -------------------------------------------------------------------
def test_broken_graph_capture_fails_unless_eager(tmp_path, tiny_random_model):
    env = sandbox(tmp_path, state=preset_state("a2-graph-broken"))
    res = run(serve_args(tiny_random_model), env)
    assert res.returncode == 1
    assert "AclmdlRICaptureEnd(capture_stream_, &model_ri_), error code is 507903" in res.stderr
    assert "EZ9999: Inner Error!" in res.stderr
    with Emulator(serve_args(tiny_random_model, "--enforce-eager"), env).start() as emu:
        assert emu.ready, emu.output()
        assert "Cudagraph is disabled under eager mode" in emu.output()


def test_tp2_capture_needs_aiv_expansion_mode(tmp_path, tiny_random_model):
    free = socket.socket()
    free.bind(("127.0.0.1", 0))
    hccl_port = str(free.getsockname()[1])
    free.close()
    env = sandbox(tmp_path, HCCL_IF_BASE_PORT=hccl_port)
    res = run(serve_args(tiny_random_model, "-tp", "2"), env)
    assert res.returncode == 1
    assert "error code is 507903" in res.stderr
    env["HCCL_OP_EXPANSION_MODE"] = "AIV"
    with Emulator(serve_args(tiny_random_model, "-tp", "2"), env).start() as emu:
        assert emu.ready, emu.output()
        assert "Graph capturing finished in 1 secs" in emu.output()


# -- pitfall 5: memory --------------------------------------------------------------------------
def _state(hbm_total_mb: int, idle: int = 3300) -> dict:
    return default_state(hbm_total_mb=hbm_total_mb, idle_hbm_used_mb=idle)


def test_weights_do_not_fit_npu_out_of_memory(tmp_path, qwen3_4b):
    res = run(serve_args(qwen3_4b, "--enforce-eager"), sandbox(tmp_path, state=_state(8192)))
    assert res.returncode == 1
    assert (
        "RuntimeError: NPU out of memory. Tried to allocate 2.00 GiB (NPU 0; 8.00 GiB total"
        in res.stderr
    )


def test_no_memory_left_for_cache_blocks(tmp_path, qwen3_4b):
    res = run(serve_args(qwen3_4b), sandbox(tmp_path, row="v0.13.0", state=_state(16384)))
    assert res.returncode == 1
    assert M.NO_CACHE_MEMORY in res.stderr


def test_max_model_len_larger_than_kv_cache_uses_planner_numbers(tmp_path, qwen3_4b):
    env = sandbox(tmp_path, row="v0.13.0", state=_state(32768))
    res = run(serve_args(qwen3_4b, "--gpu-memory-utilization", "0.6"), env)
    assert res.returncode == 1
    facts = inspect_model(qwen3_4b)
    b = DEFAULT_MODEL.budget(facts, 32768, 3300, 0.6)
    tokens = b["kv_capacity_tokens"]
    assert 0 < tokens < 40960
    needed = 40960 * 147456 / GIB
    expected = M.MAX_LEN_TOO_LARGE.format(
        max_len=40960, needed=needed, available=b["kv_budget_mb"] / 1024, estimate=tokens
    )
    assert expected in res.stderr
    # The same card at --max-model-len equal to the capacity starts and reports that size.
    with Emulator(
        serve_args(qwen3_4b, "--gpu-memory-utilization", "0.6", "--max-model-len", str(tokens)), env
    ).start() as emu:
        assert emu.ready, emu.output()
        assert f"GPU KV cache size: {tokens:,} tokens" in emu.output()
        assert f"Maximum concurrency for {tokens:,} tokens per request: 1.00x" in emu.output()


def test_max_model_len_above_model_limit(tmp_path, qwen3_4b):
    res = run(serve_args(qwen3_4b, "--max-model-len", "50000"), sandbox(tmp_path))
    assert res.returncode == 1
    assert (
        "User-specified max_model_len (50000) is greater than the derived max_model_len "
        in res.stderr
    )
    assert "(max_position_embeddings=40960 " in res.stderr


def test_yarn_raises_the_model_limit_as_vllm_derives_it(tmp_path):
    """Qwen3 with YaRN (factor 4, original 32768): vLLM accepts up to 131072 tokens."""
    d = tmp_path / "Qwen3-4B-yarn"
    write_checkpoint(str(d), arch=with_yarn("qwen3-4b"), fp8=False, data="sparse")
    _add_tokenizer(str(d))
    env = sandbox(tmp_path, state=_state(32768))
    res = run(serve_args(str(d), "--max-model-len", "140000"), env)
    assert res.returncode == 1
    assert "User-specified max_model_len (140000) is greater than the derived" in res.stderr
    assert "(max_position_embeddings=131072 " in res.stderr
    # Above max_position_embeddings 40960 but within the YaRN limit: the model check passes
    # and start-up goes on to the KV-cache check (a 32 GB card does not hold 131072 tokens).
    res = run(serve_args(str(d), "--max-model-len", "131072"), env)
    assert res.returncode == 1
    assert "is greater than the derived" not in res.stderr
    assert "To serve at least one request with the models's max seq len (131072)" in res.stderr


def test_memory_held_by_another_process_reduces_kv_and_is_registered(tmp_path, qwen3_4b):
    env = sandbox(tmp_path, row="v0.13.0")
    procs_dir = os.path.join(env["ASCEND_SIM_ROOT"], REGISTRY_REL)
    facts = inspect_model(qwen3_4b)
    args = serve_args(qwen3_4b, "--max-model-len", "8192")
    with Emulator([*args, "--gpu-memory-utilization", "0.4"], env).start() as first:
        assert first.ready, first.output()
        holders = live_holders(procs_dir)
        assert [(h.npu, h.chip, h.name, h.pid) for h in holders] == [
            (0, 0, "python", first.proc.pid)
        ]
        held_mb = holders[0].memory_mb
        b = DEFAULT_MODEL.budget(facts, 65536, 3300, 0.4)
        kv_mb = b["kv_capacity_tokens"] * b["kv_bytes_per_token_per_npu"] // (1 << 20)
        fixed = sum(b[k] for k in ("weights_per_npu_mb", "activation_mb", "graph_capture_mb"))
        # The emulated engine sizes in bytes on its own; the planner rounds each term up to
        # whole MB, so the two agree within a few MB (the planner on the safe side).
        assert abs(held_mb - (fixed + b["runtime_reserve_mb"] + kv_mb)) <= 4
        # A second instance on the same NPU counts the first one's memory as used.
        with Emulator(args, env).start() as second:
            assert second.ready, second.output()
            shared = DEFAULT_MODEL.budget(facts, 65536, 3300 + held_mb, 0.9)
            alone = DEFAULT_MODEL.budget(facts, 65536, 3300, 0.9)
            assert shared["kv_capacity_tokens"] < alone["kv_capacity_tokens"]
            logged = int(
                re.findall(r"GPU KV cache size: ([\d,]+) tokens", second.output())[-1].replace(
                    ",", ""
                )
            )
            block = shared["kv_bytes_per_token_per_npu"] * 128
            assert 0 <= (logged - shared["kv_capacity_tokens"]) // 128 * block <= 3 * 2**20 + block
            assert len(live_holders(procs_dir)) == 2
    deadline = time.monotonic() + 5
    while live_holders(procs_dir) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert live_holders(procs_dir) == []


def test_memory_registered_from_another_container_counts_and_is_kept(tmp_path, qwen3_4b):
    env = sandbox(tmp_path, row="v0.13.0")
    procs_dir = os.path.join(env["ASCEND_SIM_ROOT"], REGISTRY_REL)
    # What an emulated vLLM in another container (another PID namespace) leaves in the
    # shared registry: its PID there is 1; we cannot see that process from here.
    other = {
        "pid": 1,
        "ns_pid": 1,
        "pid_ns": "pid:[4026530000]",
        "npu": 0,
        "chip": 0,
        "name": "python",
        "memory_mb": 20000,
    }
    entry = os.path.join(procs_dir, "4026530000-1-0-0.json")
    with open(entry, "w", encoding="utf-8") as fh:
        json.dump(other, fh)
    with Emulator(serve_args(qwen3_4b, "--max-model-len", "8192"), env).start() as emu:
        assert emu.ready, emu.output()
        expect = DEFAULT_MODEL.budget(inspect_model(qwen3_4b), 65536, 3300 + 20000, 0.9)
        assert f"GPU KV cache size: {expect['kv_capacity_tokens']:,} tokens" in emu.output()
    assert os.path.exists(entry)


# -- pitfall 7: --quantization ascend without ModelSlim description ----------------------------
def test_ascend_quantization_on_float_model_v0_23_modelslim_error(tmp_path, tiny_random_model):
    res = run(
        serve_args(tiny_random_model, "--quantization", "ascend"), sandbox(tmp_path, row="v0.23.0")
    )
    assert res.returncode == 1
    assert "ERROR: ModelSlim Quantization Config Not Found" in res.stderr
    # modelslim_config.py@v0.17.0rc1 and later: "the model '{model_name}'" (not "the model at").
    assert f"but the model '{tiny_random_model}' does not contain the required" in res.stderr
    assert "the model at" not in res.stderr
    assert "quantization config file ('quant_model_description.json')." in res.stderr


def test_ascend_quantization_on_float_model_v0_15_says_the_model_at(tmp_path, tiny_random_model):
    """modelslim_config.py@v0.15.0rc1 words the box's second line "but the model at '...'"."""
    res = run(
        serve_args(tiny_random_model, "--quantization", "ascend"),
        sandbox(tmp_path, row="v0.15.0rc1"),
    )
    assert res.returncode == 1
    assert "ERROR: ModelSlim Quantization Config Not Found" in res.stderr
    assert f"but the model at '{tiny_random_model}' does not contain the required" in res.stderr


@pytest.mark.parametrize("row", ["v0.11.0", "v0.14.0rc1", "v0.16.0rc1"])
def test_ascend_quantization_on_float_model_cannot_find_the_config_file(
    tmp_path, tiny_random_model, row
):
    """Releases whose ModelSlim config lists quant_model_description.json in
    get_config_filenames(): vLLM's get_quant_config refuses while the config is built."""
    res = run(serve_args(tiny_random_model, "--quantization", "ascend"), sandbox(tmp_path, row=row))
    assert res.returncode == 1
    assert res.stderr.strip().endswith("ValueError: Cannot find the config file for ascend")
    assert M.ASCEND_QUANT_SLOW in res.stdout + res.stderr
    assert "ModelSlim Quantization Config Not Found" not in res.stderr
    assert "Starting vLLM API server" not in res.stdout + res.stderr


@pytest.mark.parametrize("row", ["v0.15.0rc1", "v0.17.0rc1"])
def test_ascend_quantization_on_float_model_boxed_error_where_upstream_has_it(
    tmp_path, tiny_random_model, row
):
    res = run(serve_args(tiny_random_model, "--quantization", "ascend"), sandbox(tmp_path, row=row))
    assert res.returncode == 1
    assert "ERROR: ModelSlim Quantization Config Not Found" in res.stderr
    assert "Cannot find the config file" not in res.stderr


def test_no_release_serves_a_float_model_with_the_ascend_flag():
    """The float + --quantization ascend garbage is not upstream's: every release refuses it."""
    from ascend_sim.vllm_emulator.versions import BEHAVIOUR

    assert {b.ascend_flag_on_float for _v, b in BEHAVIOUR} == {
        "config_not_found",
        "modelslim_error",
    }


# -- pitfall 8: TP vs heads ---------------------------------------------------------------------
def test_tp_not_dividing_attention_heads(tmp_path, qwen3_4b):
    res = run(serve_args(qwen3_4b, "-tp", "3"), sandbox(tmp_path))
    assert res.returncode == 1
    assert res.stderr.strip() == (
        "ValueError: Total number of attention heads (32) must be divisible by tensor "
        "parallel size (3)."
    )


def test_tp_neither_dividing_nor_multiple_of_kv_heads_fails_as_vllm(tmp_path):
    # 6 heads divide by 3, but 3 is not a multiple of the 2 KV heads: QKVParallelLinear's
    # divide(tp_size, total_num_kv_heads) asserts (vllm/distributed/utils.py).
    model = tiny_model(str(tmp_path / "h6kv2"), heads=6, kv_heads=2)
    env = sandbox(tmp_path, HCCL_OP_EXPANSION_MODE="AIV", HCCL_IF_BASE_PORT="0")
    res = run(serve_args(model, "-tp", "3", "--enforce-eager"), env)
    assert res.returncode == 1
    assert "AssertionError: 3 is not divisible by 2" in res.stderr
    assert "shape" not in res.stderr and "size of tensor" not in res.stderr


def test_tp_multiple_of_kv_heads_is_served_with_replicated_kv_heads(tmp_path, tiny_random_model):
    # 4 heads, 2 KV heads at TP 4: vLLM replicates each KV head on 2 ranks and serves, as
    # vLLM-Ascend serves Qwen3-235B-A22B (4 KV heads) at TP 8.
    env = sandbox(tmp_path, HCCL_OP_EXPANSION_MODE="AIV", HCCL_IF_BASE_PORT="0")
    with Emulator(serve_args(tiny_random_model, "-tp", "4", "--enforce-eager"), env).start() as emu:
        assert emu.ready, emu.output()
        assert "size of tensor a" not in emu.output()


def test_tp_more_than_visible_devices(tmp_path, tiny_random_model):
    env = sandbox(tmp_path, ASCEND_RT_VISIBLE_DEVICES="0", HCCL_IF_BASE_PORT="0")
    res = run(serve_args(tiny_random_model, "-tp", "2"), env)
    assert res.returncode == 1
    assert "tensor_parallel_size=2 needs 2 NPUs but only 1 are visible" in res.stderr


# -- the happy path -----------------------------------------------------------------------------
def test_healthy_start_log_lines_in_order(tmp_path, qwen3_4b):
    env = sandbox(tmp_path)
    with Emulator(serve_args(qwen3_4b, "--max-model-len", "16384"), env).start() as emu:
        assert emu.ready, emu.output()
        out = emu.lines
        order = [
            "vLLM API server version 0.23.0",
            "Platform plugin ascend is activated",
            "Set PYTORCH_NPU_ALLOC_CONF=expandable_segments:True",
            "Using max model len 16384",
            "Available KV cache memory:",
            "GPU KV cache size:",
            "Maximum concurrency for 16,384 tokens per request:",
            "Graph capturing finished",
            "Starting vLLM API server 0 on http://127.0.0.1:",
            "Application startup complete.",
        ]
        idx = [next(i for i, line in enumerate(out) if key in line) for key in order]
        assert idx == sorted(idx)
        assert out[0].startswith(f"(APIServer pid={emu.proc.pid}) INFO ")
        facts = inspect_model(qwen3_4b)  # v0.23.0: vLLM's profiling model
        tokens = DEFAULT_MODEL.budget(facts, 65536, 3300, 0.9, profiling=True)["kv_capacity_tokens"]
        assert f"GPU KV cache size: {tokens:,} tokens" in emu.output()


@pytest.mark.parametrize(
    "row, printed, absent",
    [
        # worker_v1.py up to v0.14.0rc1 (real log: vllm-ascend issue #5044)
        (
            "v0.14.0rc1",
            r"\[worker_v1\.py:\d+\] Available memory: \d+, total memory: \d+$",
            "Available KV",
        ),
        # vLLM's memory profiling from v0.15.0rc1 (worker.py@v0.23.0:594)
        (
            "v0.15.0rc1",
            r"\[worker\.py:\d+\] Available KV cache memory: [\d.]+ GiB$",
            "Available memory:",
        ),
        (
            "v0.23.0",
            r"\[worker\.py:\d+\] Available KV cache memory: [\d.]+ GiB$",
            "Available memory:",
        ),
    ],
)
def test_memory_line_is_the_releases_own(tmp_path, tiny_random_model, row, printed, absent):
    with Emulator(serve_args(tiny_random_model), sandbox(tmp_path, row=row)).start() as emu:
        assert emu.ready, emu.output()
        out = emu.output()
    assert any(re.search(printed, line) for line in out.splitlines()), out
    assert absent not in out
    # NPUModelRunner.load_model at every tag (model_runner_v1.py@v0.11.0, @v0.23.0), never
    # the CUDA runner's "Model loading took ... GiB and ... seconds".
    assert re.search(
        r"\[model_runner_v1\.py:\d+\] Loading model weights took [\d.]+ GB$", out, re.M
    )
    assert "Model loading took" not in out


def test_v0_11_does_not_set_alloc_conf(tmp_path, tiny_random_model):
    env = sandbox(tmp_path, row="v0.11.0")
    with Emulator(serve_args(tiny_random_model), env).start() as emu:
        assert emu.ready, emu.output()
        assert "vLLM API server version 0.11.0" in emu.lines[0]
        assert "Set PYTORCH_NPU_ALLOC_CONF" not in emu.output()  # only since v0.14.0rc1


# -- every host shape: a device is a chip (issue 21 §5) ------------------------------------------
def _only_device(env: dict, keep: int, count: int) -> None:
    dev = os.path.join(env["ASCEND_SIM_ROOT"], "dev")
    for i in range(count):
        if i != keep:
            os.remove(os.path.join(dev, f"davinci{i}"))


def _kv_gib(output: str) -> float:
    return float(re.findall(r"Available KV cache memory: ([\d.]+) GiB", output)[-1])


def test_a_300i_duo_chip_serves_from_its_ddr(tmp_path, tiny_random_model):
    # 310P chips report DDR (Memory-Usage), no HBM: the engine sizes from that chip's memory
    env = sandbox(tmp_path, state=preset_state("310p3-duo-2x"), devices=4)
    args = serve_args(tiny_random_model, "--enforce-eager", "--dtype", "float16")
    with Emulator(args, env).start() as emu:
        assert emu.ready, emu.output()
        assert 0 < _kv_gib(emu.output()) < 44280 / 1024


def test_a_device_is_the_chip_with_that_logic_id_not_npu_times_chips(tmp_path, tiny_random_model):
    # A 300I Duo whose npu-smi NPU ids are 1 and 2 (as real hosts print them): device 2 is NPU 2
    # chip 0, and that chip's memory in use is what the engine sizes its KV cache from.
    state = preset_state("310p3-duo-2x")
    state["card"]["npu_ids"] = [1, 2]
    state["chips"] = [{"npu": 2, "chip": 0, "memory_used_mb": 30000}]
    args = serve_args(tiny_random_model, "--enforce-eager", "--dtype", "float16")
    kv = {}
    for device in (1, 2):
        env = sandbox(
            tmp_path / f"d{device}", state=state, devices=4, ASCEND_RT_VISIBLE_DEVICES="0"
        )
        _only_device(env, device, 4)
        with Emulator(args, env).start() as emu:
            assert emu.ready, emu.output()
            kv[device] = _kv_gib(emu.output())
    assert kv[2] < kv[1] - 20, kv  # 30 GB of that chip's DDR are in use


def test_an_a3_die_is_its_own_device(tmp_path, tiny_random_model):
    # 16 dies: /dev/davinci9 is die 1 of card 4; HBM in use there, not on die 0 (davinci8)
    state = preset_state("a3-ascend910-16chip")
    state["chips"] = [{"npu": 4, "chip": 1, "hbm_used_mb": 40000}]
    kv = {}
    for device in (8, 9):
        env = sandbox(
            tmp_path / f"d{device}", state=state, devices=16, ASCEND_RT_VISIBLE_DEVICES="0"
        )
        _only_device(env, device, 16)
        with Emulator(serve_args(tiny_random_model, "--enforce-eager"), env).start() as emu:
            assert emu.ready, emu.output()
            kv[device] = _kv_gib(emu.output())
    assert kv[9] < kv[8] - 30, kv


# -- vLLM's start-up memory check (v0.15.0rc1+) --------------------------------------------------
def test_v0_23_refuses_to_start_when_free_memory_is_below_the_request(tmp_path, qwen3_4b):
    """worker.py _init_device: a 64 GB card (3300 MB idle) where this test process holds
    8700 MB; 0.9 of its 62236 MB device total is more than the 53536 MB free."""
    from ascend_sim.npu_registry import register, unregister

    env = sandbox(tmp_path)
    entry = register(os.path.join(env["ASCEND_SIM_ROOT"], REGISTRY_REL), 0, 0, "python", 8700)
    try:
        res = run(serve_args(qwen3_4b), env)
    finally:
        unregister(entry)
    assert res.returncode == 1
    assert (
        "ValueError: Free memory on device (52.28/60.78 GiB) on startup is less than desired "
        "GPU memory utilization (0.9, 54.7 GiB). Decrease GPU memory utilization or reduce GPU "
        "memory used by other processes."
    ) in res.stderr
    # v0.13.0 with a holder starts with a smaller cache: the test above with row v0.13.0.
