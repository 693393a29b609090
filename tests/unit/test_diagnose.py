"""`ascend-deploy diagnose` on every signature of error-signatures.md and on messy real logs."""

from __future__ import annotations

import gzip
import json
import random
import subprocess
import sys

import pytest
from conftest import DATA

from ascend_deploy.cli import main
from ascend_deploy.diagnose import Diagnoser, diagnose_file, diagnose_lines, load_rules, normalise
from ascend_deploy.errors import InputError

LOGS = DATA / "logs"
SIGNATURES = json.loads((LOGS / "signatures.json").read_text())

# file -> the rule that must come first (the root cause).
EXPECTED_RULE = {
    "pitfall1_1_sig.log": "soc_version_undetected",
    "pitfall1_2_example.log": "torch_npu_import_failed",
    "pitfall2_1_sig.log": "fp8_not_supported",
    "pitfall2_2_title.log": "fp8_scheme_o_groups",
    "pitfall3_1_example.log": "hccl_port_in_use",
    "pitfall4_1_sig.log": "graph_capture_failed",
    "pitfall4_2_sig.log": "graph_capture_stream_resources",
    "pitfall4_3_sig.log": "mla_head_ratio",
    "pitfall4_4_example.log": "graph_capture_sq_cq_alloc",
    "pitfall5_1_sig.log": "max_len_exceeds_kv_cache",
    "pitfall5_2_example.log": "npu_out_of_memory",
    "pitfall6_1_sig.log": "kv_cache_exhausted",
    "pitfall7_1_sig.log": "modelslim_config_not_found",
    "pitfall7_2_example.log": "garbage_output",
    "pitfall8_1_sig.log": "tp_kv_heads_shape_mismatch",
    "pitfall8_2_example.log": "tp_kv_heads_shape_mismatch",
}

NOISE = [
    "INFO 08-06 09:37:16 [loggers.py:118] Engine 000: Avg prompt throughput: 10.0 tokens/s, "
    "Avg generation throughput: 20.0 tokens/s, Running: 2 reqs, Waiting: 0 reqs, GPU KV cache "
    "usage: 3.1%, Prefix cache hit rate: 0.0%",
    'INFO:     127.0.0.1:51234 - "POST /v1/chat/completions HTTP/1.1" 200 OK',
    "(APIServer pid=1) INFO 09-03 16:28:08 [api_server.py:1885] vLLM API server version 0.11.0",
    "(EngineCore_DP0 pid=29) INFO 09-03 16:28:30 [default_loader.py:262] Loading weights took "
    "3.2 s",
    "WARNING 09-03 16:28:31 [__init__.py:1635] Default sampling parameters have been overridden",
    "(EngineCore_DP0 pid=29) INFO 09-03 16:28:40 [kv_cache_utils.py:1087] GPU KV cache size: "
    "412,160 tokens",
    "(EngineCore_DP0 pid=29) INFO 09-03 16:28:40 [kv_cache_utils.py:1091] Maximum concurrency for "
    "40,960 tokens per request: 10.06x",
]


def log(name: str) -> list[str]:
    return (LOGS / name).read_text(encoding="utf-8").splitlines()


def top(result: dict) -> dict:
    assert result["findings"], result
    return result["findings"][0]


def test_every_signature_file_has_an_expectation():
    assert {s["file"] for s in SIGNATURES} == set(EXPECTED_RULE) | {"pitfall6_2_example.log"}
    assert {s["pitfall"] for s in SIGNATURES} == set(range(1, 9))


@pytest.mark.parametrize("entry", SIGNATURES, ids=[s["file"] for s in SIGNATURES])
def test_signature_names_the_pitfall(entry):
    result = diagnose_file(str(LOGS / entry["file"]))
    if entry["file"] == "pitfall6_2_example.log":
        # The excerpt of issue #2245 is the log *before* the stall: KV usage 21.9 -> 41.5 %
        # with nothing waiting. It is healthy, and must not be called exhausted.
        assert result["findings"] == []
        return
    first = top(result)
    assert first["rule"] == EXPECTED_RULE[entry["file"]]
    assert first["pitfall"] == entry["pitfall"]
    assert first["evidence"] and first["fix"]
    assert all(len(e) <= 400 for e in first["evidence"])


def test_rules_cover_all_pitfalls_and_name_bundle_variables():
    rules = load_rules()
    assert {r.pitfall for r in rules if r.pitfall} == set(range(1, 9))
    ids = {r.id for r in rules}
    for neighbour in (
        "npu_driver_not_loaded",
        "npu_device_open_failed",
        "hccl_timeout",
        "model_files_missing",
        "bad_model_config",
        "npu_device_permission_denied",
    ):
        assert neighbour in ids
    defaults = ""
    for role in ("vllm_service", "ascend_runtime", "model_weights"):
        defaults += (DATA.parent.parent / "roles" / role / "defaults" / "main.yml").read_text()
    for r in rules:
        if r.variable:
            assert f"\n{r.variable}:" in defaults, f"{r.id}: {r.variable} is not a role default"


def test_kv_trend_that_ends_full_is_pitfall_6_with_sizing_context():
    lines = (
        log("pitfall6_2_example.log")
        + NOISE[5:]
        + [
            "INFO 08-06 09:39:16 [loggers.py:118] Engine 000: Avg prompt throughput: 0.0 tokens/s, "
            "Avg generation throughput: 12.1 tokens/s, Running: 61 reqs, Waiting: 39 reqs, "
            "GPU KV cache usage: 99.6%, Prefix cache hit rate: 89.7%"
        ]
    )
    first = top(diagnose_lines(lines))
    assert first["rule"] == "kv_cache_exhausted"
    assert "99.6%" in first["evidence"][0]
    assert any("Maximum concurrency" in e for e in first["evidence"])


def test_final_exception_outranks_warnings_and_stats():
    lines = [
        *NOISE,
        "WARNING 01-12 09:20:00 [scheduler.py:1141] Sequence group 7 is preempted by "
        "PreemptionMode.RECOMPUTE mode because there is not enough KV cache space. This can "
        "affect the end-to-end performance.",
        "INFO 01-12 09:20:10 [loggers.py:118] Engine 000: GPU KV cache usage: 97.0%",
        *log("pitfall5_2_example.log"),
    ]
    result = diagnose_lines(lines)
    assert [f["rule"] for f in result["findings"]][:2] == [
        "npu_out_of_memory",
        "kv_cache_exhausted",
    ]


def test_deq_scale_key_error_is_a_quantization_flag_problem_not_loading():
    lines = [
        '(EngineCore_DP0 pid=29) ERROR 01-12 09:26:18 [core.py:866] File "/vllm-workspace/vllm/'
        'vllm/model_executor/models/utils.py", line 335, in load_weights',
        "(EngineCore_DP0 pid=29) ERROR 01-12 09:26:18 [core.py:866] KeyError: "
        "'layers.0.mlp.gate_up_proj.deq_scale'",
        "(EngineCore_DP0 pid=29) ERROR 01-12 09:26:18 [core.py:866] EngineCore failed to start.",
        "RuntimeError: Engine core initialization failed. See root cause above. Failed core "
        "proc(s): {}",
    ]
    result = diagnose_lines(lines)
    rules = [f["rule"] for f in result["findings"]]
    assert rules[0] == "quant_tensor_key_error"
    assert result["findings"][0]["pitfall"] == 7
    assert result["findings"][0]["variable"] == "vllm_service_quantization"
    assert set(rules[1:]) == {"weight_loading_failed", "engine_core_failed"}


def test_plain_weight_key_error_stays_a_loading_problem():
    result = diagnose_lines(["KeyError: 'model.layers.0.self_attn.q_proj.weight'"])
    assert top(result)["rule"] == "weight_loading_failed"
    assert top(result)["pitfall"] is None


@pytest.mark.parametrize(
    "raw, message, level",
    [
        ("\x1b[1;31mERROR\x1b[0m 02-07 18:18:59 [core.py:1] boom\r\n", "boom", "error"),
        ("(VllmWorker rank=0 pid=123) INFO 08-06 09:37:16 [x.py:1] hello", "hello", "info"),
        (
            "2025-03-26T17:01:03.123456789Z [rank0]: RuntimeError: x failed",
            "RuntimeError: x failed",
            "exception",
        ),
        (
            "Nov 29 12:00:01 npu-host-1 vllm[4242]: ValueError: bad",
            "ValueError: bad",
            "exception",
        ),
        ("vllm-1  | WARNING 01-01 00:00:00 [a.py:2] careful", "careful", "warning"),
        (
            "(ActorHybridWorker pid=1341, ip=172.16.6.36) EJ0003: bind failed",
            "EJ0003: bind failed",
            "error",
        ),
        ('ERROR 09-25 02:23:33 engine.py:400]   File "x.py"', 'File "x.py"', "error"),
    ],
)
def test_normalise_strips_real_prefixes(raw, message, level):
    assert normalise(raw) == (message, level)


def test_messy_log_ansi_crlf_prefixes_interleaved(tmp_path):
    hccl = log("pitfall3_1_example.log")
    rng = random.Random(7)
    lines = []
    for i in range(3000):
        lines.append(rng.choice(NOISE))
        if i == 1500:
            for a, b in zip(hccl, [*hccl[1:], ""], strict=True):  # two processes writing at once
                lines.append(f"\x1b[33m(VllmWorker rank=1 pid=77)\x1b[0m {a}")
                lines.append(f"(VllmWorker rank=0 pid=76) {b}")
    p = tmp_path / "messy.log"
    p.write_bytes("\r\n".join(lines).encode())
    result = diagnose_file(str(p))
    assert top(result)["rule"] == "hccl_port_in_use"
    assert "Failed to bind the IP port" in " ".join(top(result)["evidence"])
    assert "\x1b" not in json.dumps(result)
    # The OOM example's lines are not in this log: nothing but the HCCL cause is reported.
    assert "npu_out_of_memory" not in {f["rule"] for f in result["findings"]}


def test_unknown_failure_is_an_unclassified_guess_with_its_lines():
    lines = [*NOISE, "ERROR 01-01 00:00:00 [x.py:1] something odd", "RuntimeError: never seen"]
    result = diagnose_lines(lines)
    (guess,) = result["findings"]
    assert guess["guess"] is True and guess["rule"] == "unclassified" and guess["confidence"] == 0
    assert guess["evidence"] == ["something odd", "RuntimeError: never seen"]
    assert "npu-smi info" in guess["settle"]
    assert result["last_errors"] == ["something odd", "RuntimeError: never seen"]


def test_healthy_log_gets_no_invented_failure():
    result = diagnose_lines(NOISE * 50 + log("pitfall6_2_example.log"))
    assert result["findings"] == [] and result["last_errors"] == []


def test_emulator_log_lines_diagnose_as_their_pitfall():
    from ascend_sim.vllm_emulator import messages as M

    cases = {
        M.QUANT_NOT_SUPPORTED.format(quant="fp8"): "fp8_not_supported",
        M.FP8_O_GROUPS.format(config_class="Qwen3Config"): "fp8_scheme_o_groups",
        M.ADDRESS_IN_USE: "api_port_in_use",
        M.HCCL_BIND.format(pid=1, stamp2="2026-01-01-00:00:00.000.000"): "hccl_port_in_use",
        M.CAPTURE_END_FAILED: "graph_capture_failed",
        M.NO_CACHE_MEMORY: "no_kv_cache_memory",
        M.MAX_LEN_ABOVE_DERIVED.format(user=99999, derived=40960): "bad_model_config",
        M.HEADS_NOT_DIVISIBLE.format(heads=32, tp=3): "tp_heads_not_divisible",
        M.SIZE_MISMATCH.format(a=128, b=64): "tp_kv_heads_shape_mismatch",
        M.FAILED_INFER_DEVICE: "npu_platform_not_detected",
        M.ACL_INTERNAL: "acl_init_failed_driver_mismatch",
        M.PREEMPTED.format(req="r1", total=3): "kv_cache_exhausted",
    }
    for line, rule in cases.items():
        assert top(diagnose_lines([line]))["rule"] == rule, line


def _run_cli(*args, stdin: bytes | None = None):
    proc = subprocess.run(
        [sys.executable, "-m", "ascend_deploy.cli", "diagnose", *args],
        input=stdin,
        capture_output=True,
        timeout=60,
    )
    return proc.returncode, proc.stdout.decode(), proc.stderr.decode()


def test_cli_json_from_stdin():
    rc, out, err = _run_cli("--json", stdin=(LOGS / "pitfall7_1_sig.log").read_bytes())
    assert rc == 0, err
    doc = json.loads(out)
    assert doc["findings"][0]["pitfall"] == 7
    assert set(doc["findings"][0]) >= {"pitfall", "rule", "title", "evidence", "fix"}


def test_cli_human_output_names_fix_and_variable(capsys):
    assert main(["diagnose", str(LOGS / "pitfall2_1_sig.log")]) == 0
    out = capsys.readouterr().out
    assert "[pitfall 2]" in out and "Fix:" in out and "model_weights_convert" in out


def test_gzip_log(tmp_path):
    p = tmp_path / "vllm.log.gz"
    p.write_bytes(gzip.compress((LOGS / "pitfall3_1_example.log").read_bytes()))
    assert top(diagnose_file(str(p)))["pitfall"] == 3


@pytest.mark.parametrize(
    "content, needle",
    [
        (b"", "the log is empty"),
        (b"\x00\x01\x02\x03" * 100, "binary"),
        (gzip.compress(b"x" * 10000)[:40], "could not be read"),
    ],
)
def test_bad_input_is_one_line_exit_2(tmp_path, content, needle):
    p = tmp_path / ("bad.log.gz" if needle == "could not be read" else "bad.log")
    p.write_bytes(content)
    with pytest.raises(InputError, match=needle):
        diagnose_file(str(p))
    rc, _out, err = _run_cli(str(p))
    assert rc == 2
    assert err.count("\n") == 1 and str(p) in err and "Traceback" not in err


def test_missing_file_and_directory(tmp_path):
    rc, _, err = _run_cli(str(tmp_path / "nope.log"))
    assert rc == 2 and "not found" in err
    rc, _, err = _run_cli(str(tmp_path))
    assert rc == 2 and "is a directory" in err


def test_very_long_line_is_bounded():
    d = Diagnoser()
    d.feed("x" * 2_000_000 + " NPU out of memory. Tried to allocate 1 GiB")
    first = top(d.result())
    assert first["rule"] == "npu_out_of_memory"
    assert len(first["evidence"][0]) <= 400


def test_bad_rules_file_is_named(tmp_path):
    p = tmp_path / "rules.json"
    p.write_text(
        '{"rules": [{"id": "x", "title": "t", "patterns": ["("], "explanation": "", "fix": ""}]}'
    )
    with pytest.raises(InputError, match=r"rules\.json: rules\[0\]: invalid regex"):
        load_rules(str(p))
