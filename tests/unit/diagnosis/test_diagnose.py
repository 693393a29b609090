"""`ascend-deploy diagnose` on every pitfall signature (tests/data/logs) and on messy real logs."""

from __future__ import annotations

import gzip
import json
import random
import subprocess
import sys

import pytest
from conftest import DATA, REPO

from ascend_deploy.cli import main
from ascend_deploy.diagnosis.engine import (
    Diagnoser,
    diagnose_file,
    diagnose_lines,
    load_rules,
    normalise,
)
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
        defaults += (REPO / "roles" / role / "defaults" / "main.yml").read_text()
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
    """An out-of-memory after requests were served, with preemption and KV usage climbing, is
    the load outgrowing the memory (pitfall 6), ranked above the statistics that led to it."""
    lines = [
        *NOISE,
        "WARNING 01-12 09:20:00 [scheduler.py:1141] Sequence group 7 is preempted by "
        "PreemptionMode.RECOMPUTE mode because there is not enough KV cache space. This can "
        "affect the end-to-end performance.",
        "INFO 01-12 09:20:10 [loggers.py:118] Engine 000: GPU KV cache usage: 97.0%",
        *log("pitfall5_2_example.log"),
    ]
    result = diagnose_lines(lines)
    assert [f["rule"] for f in result["findings"]][:2] == ["oom_under_load", "kv_cache_exhausted"]
    assert result["findings"][0]["pitfall"] == 6
    assert any(e.startswith("served before:") for e in result["findings"][0]["evidence"])


def test_start_up_oom_without_served_requests_stays_pitfall_5():
    """The same out-of-memory in a start-up that never answered a request is pitfall 5."""
    result = diagnose_lines(log("pitfall5_2_example.log"))
    assert top(result)["rule"] == "npu_out_of_memory"
    assert top(result)["pitfall"] == 5


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
    """The rules call a bare KeyError on a weight a loading problem (a consequence); with
    nothing more specific the learned stage decides, and ranks quantization first, as the real
    logs of this shape in the corpus were (ModelSlim descriptions that miss a layer)."""
    line = "KeyError: 'model.layers.0.self_attn.q_proj.weight'"
    d = Diagnoser(model=False)
    d.feed(line)
    assert top(d.result())["rule"] == "weight_loading_failed"
    assert top(d.result())["pitfall"] is None
    result = diagnose_lines([line])
    assert result["stage"] == "learned"
    assert top(result)["pitfall"] == 7 and top(result)["guess"] is True
    assert "weight_loading_failed" in [f["rule"] for f in result["findings"][1:]]
    assert result["ranking"][0]["class"] == "7"


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
    d = Diagnoser(model=False)  # rules only: nothing points to a class
    for line in lines:
        d.feed(line)
    result = d.result()
    (guess,) = result["findings"]
    assert guess["guess"] is True and guess["rule"] == "unclassified" and guess["confidence"] == 0
    assert guess["evidence"] == ["something odd", "RuntimeError: never seen"]
    assert "npu-smi info" in guess["settle"]
    assert result["last_errors"] == ["something odd", "RuntimeError: never seen"]


def test_unknown_failure_gets_a_ranked_guess_from_the_learned_stage():
    """Never empty on a failure: the learned stage names a class, its confidence, the top three
    classes, the lines that drove it and the commands that settle it."""
    lines = [*NOISE, "ERROR 01-01 00:00:00 [x.py:1] something odd", "RuntimeError: never seen"]
    result = diagnose_lines(lines)
    guess = result["findings"][0]
    assert result["stage"] == "learned" and guess["stage"] == "learned"
    assert guess["guess"] is True and guess["rule"] != "unclassified"
    assert 0 < guess["confidence"] < 1 and guess["evidence"] and guess["settle"]
    assert [r["confidence"] for r in result["ranking"]] == sorted(
        (r["confidence"] for r in result["ranking"]), reverse=True
    )
    assert len({r["class"] for r in result["ranking"]}) == 3
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
        M.FREE_MEMORY_LOW.format(
            free=52.28, total=60.78, util=0.9, requested=54.7
        ): "free_memory_below_utilization",
        M.MAX_LEN_ABOVE_DERIVED.format(user=99999, derived=40960): "bad_model_config",
        M.HEADS_NOT_DIVISIBLE.format(heads=32, tp=3): "tp_heads_not_divisible",
        M.KV_NOT_DIVISIBLE.format(numerator=6, denominator=4): "tp_kv_heads_shape_mismatch",
        M.FAILED_INFER_DEVICE: "npu_platform_not_detected",
        M.ACL_INTERNAL: "acl_init_failed_driver_mismatch",
        M.PREEMPTED.format(req="r1", total=3): "kv_cache_exhausted",
    }
    for line, rule in cases.items():
        assert top(diagnose_lines([line]))["rule"] == rule, line


@pytest.mark.parametrize("row", ["v0.14.0rc1", "v0.15.0rc1", "v0.17.0rc1", "v0.23.0"])
def test_emulator_wording_of_each_release_diagnoses_the_same(row):
    """A log from either side of a wording change (messages.BY_RELEASE) gets the same finding."""
    from ascend_sim.vllm_emulator import messages as M

    box = M.modelslim_not_found("/models/q", [], M.for_release("modelslim_model_line", row))
    assert top(diagnose_lines(box))["rule"] == "modelslim_config_not_found"
    memory = [
        line.format(available=0, total=65452113920, gib=0.0)
        for line in (M.for_release(k, row) for k in ("available_memory", "available_kv_memory"))
        if line
    ]
    oom = [M.MODEL_WEIGHTS_TOOK.format(gb=7.5), *memory, "RuntimeError: NPU out of memory. Tried"]
    finding = top(diagnose_lines(oom))
    assert finding["rule"] == "npu_out_of_memory"
    # the load line is sizing context on every release (the old "Model loading took" was CUDA's)
    assert M.MODEL_WEIGHTS_TOOK.format(gb=7.5) in finding["evidence"]


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
        (gzip.compress(b"x" * 10000, mtime=0)[:40], "could not be read"),
    ],
    # Explicit ids: every xdist worker must collect the same test names (a gzip header's
    # timestamp in an id made two workers' collections differ when they started a second apart).
    ids=["empty", "binary", "truncated-gzip"],
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


# ----------------------------------------------------------------------------- issue 12: engine

from ascend_deploy.diagnosis import engine  # noqa: E402
from ascend_deploy.diagnosis.engine import diagnose_text, parse_rules  # noqa: E402

WRAP_RULES = {
    "rules": [
        {
            "id": "heads",
            "pitfall": 8,
            "title": "t",
            "patterns": [{"regex": r"must be divisible by tensor parallel size", "window": 3}],
            "explanation": "e",
            "fix": "f",
        },
        {
            "id": "heads_type",
            "pitfall": 8,
            "title": "t",
            "specificity": 10,
            "patterns": [
                {
                    "exception": "ValueError",
                    "regex": r"^Total number of attention heads",
                    "window": 2,
                }
            ],
            "explanation": "e",
            "fix": "f",
        },
        {
            "id": "oom",
            "pitfall": 5,
            "title": "t",
            "patterns": ["NPU out of memory"],
            "keywords": [r"\bmemory\b", r"\bHBM\b"],
            "settle": ["npu-smi info -t usages"],
            "explanation": "e",
            "fix": "f",
        },
    ],
    "codes": [
        {"scheme": "cann", "code": "EL0004", "meaning": "memory", "rule": "oom", "specificity": 40},
        {"scheme": "cann", "family": "EL", "meaning": "driver", "rule": "oom", "guess": True},
        {"scheme": "acl", "code": "207018", "meaning": "device memory exhausted", "rule": "oom"},
        {"scheme": "hccl", "code": "9", "meaning": "timeout", "rule": None},
    ],
    "exceptions": [{"type": "OutOfMemoryError", "rule": "oom", "specificity": 30}],
}


def wrap_rules():
    return parse_rules(WRAP_RULES, "test rules")


@pytest.mark.parametrize(
    "text",
    [
        # terminal wrap at a word boundary (issue paste) and in the middle of a word
        "ValueError: Total number of attention heads (40) must be divisible by\n"
        "tensor parallel size (3).",
        "ValueError: Total number of attention heads (40) must be divisible by tens\n"
        "or parallel size (3).",
        # three lines, each with a worker prefix and ANSI colours
        "\x1b[31m(VllmWorker rank=1 pid=77)\x1b[0m ValueError: Total number of attention heads"
        " (40) must\n(VllmWorker rank=1 pid=77) be divisible by tensor\n"
        "(VllmWorker rank=1 pid=77) parallel size (3).",
    ],
)
def test_windowed_pattern_matches_a_wrapped_message_once(text):
    result = diagnose_text(text + "\n", wrap_rules())
    first = result["findings"][0]
    assert first["rule"] == "heads" and first["matches"] == 1 and not first["guess"]
    assert "parallel size (3)" in first["evidence"][0]
    assert [f["rule"] for f in result["findings"]] == ["heads", "heads_type"]


def test_window_does_not_join_lines_far_apart():
    text = "ValueError: x must be divisible by\n" + "INFO ok\n" * 5 + "tensor parallel size\n"
    assert diagnose_text(text, wrap_rules())["findings"][0]["guess"] is True


def test_exception_pattern_needs_the_type_and_searches_the_message():
    rules = wrap_rules()
    first = diagnose_text("ValueError: Total number of attention heads (3)\n", rules)["findings"][0]
    assert first["rule"] == "heads_type" and not first["guess"]
    # same words, not a ValueError line: no match by the exception pattern
    r = diagnose_text("WARNING x Total number of attention heads (3)\n", rules)
    assert r["findings"] == []


def test_wrapped_message_across_read_blocks(monkeypatch, tmp_path):
    monkeypatch.setattr(engine, "BLOCK", 4096)
    noise = ("INFO 08-06 09:37:16 [x.py:1] step done\n" * 200).encode()
    cut = len(noise) - len(noise) % 4096  # the message starts right before a block boundary
    body = (
        noise[: cut - 20]
        + b"\nValueError: Total number of attention heads (40) must be divisible by\n"
    )
    body += b"tensor parallel size (3).\n" + noise
    p = tmp_path / "wrapped.log"
    p.write_bytes(body)
    result = diagnose_file(str(p), wrap_rules())
    assert result["findings"][0]["rule"] == "heads"
    assert result["lines"] == body.count(b"\n")


@pytest.mark.parametrize(
    "line, rule, note",
    [
        (
            "EL0004: [PID: 9] 2025-01-01-00:00:00.000.000 Failed to allocate memory.",
            "oom",
            "EL0004: memory",
        ),
        (
            "RuntimeError: NPU function error: aclrtMalloc, error code is 207018",
            "oom",
            "207018: device",
        ),
        (
            "[ERROR] RUNTIME(1234,python):2025-03-26-17:01:02.816.428 [mem.cc:1]1 ret=207018",
            "oom",
            "207018",
        ),
    ],
)
def test_error_codes_map_to_their_class_with_the_meaning(line, rule, note):
    first = diagnose_text(line + "\n", wrap_rules())["findings"][0]
    assert first["rule"] == rule and first["guess"] is False
    assert any(note in e and "code)" in e for e in first["evidence"])


def test_code_family_only_feeds_a_guess_with_confidence_and_settle_commands():
    first = diagnose_text("RuntimeError: EL0999: driver said no\n", wrap_rules())["findings"][0]
    assert first["guess"] is True and first["rule"] == "oom"
    assert 0 < first["confidence"] < 1
    assert first["settle"] == ["npu-smi info -t usages"]
    assert "EL0999" in first["evidence"][0]


def test_exception_type_maps_to_a_class():
    first = diagnose_text("torch.OutOfMemoryError: boom\n", wrap_rules())["findings"][0]
    assert first["rule"] == "oom" and first["guess"] is False


def test_guess_ranks_by_keywords_on_failure_lines_only():
    text = "INFO memory pool ready\nRuntimeError: HBM is gone\n"
    first = diagnose_text(text, wrap_rules())["findings"][0]
    assert first["guess"] is True and first["rule"] == "oom"
    assert first["evidence"] == ["RuntimeError: HBM is gone"]
    # keywords on healthy lines alone do not make a failure
    assert diagnose_text("INFO memory pool ready\nINFO HBM 60%\n", wrap_rules())["findings"] == []


def test_program_lines_saying_failed_are_not_an_invented_failure():
    text = (
        "WARNING 01-01 00:00:00 [a.py:1] careful\n"
        "INFO 01-01 00:00:01 [b.py:2] Failed to import triton, falling back to eager kernels\n"
    )
    assert diagnose_text(text, wrap_rules())["findings"] == []


def test_a_person_saying_it_failed_gets_an_answer():
    d = Diagnoser(wrap_rules(), model=False)
    d.feed("[Bug]: vllm-ascend 启动失败")
    first = d.result()["findings"][0]
    assert first["guess"] is True and first["rule"] == "unclassified"
    first = diagnose_text("[Bug]: vllm-ascend 启动失败\n", wrap_rules())["findings"][0]
    assert first["guess"] is True and first["stage"] == "learned" and first["settle"]


@pytest.mark.parametrize(
    "raw, message, level",
    [
        ("2025-03-26 17:01:02,816 - ERROR - boom", "boom", "error"),
        ("[2025-03-26 17:01:02.123] RuntimeError: x", "RuntimeError: x", "exception"),
        (
            "[rank0]:[E324 19:10:36.123456 12345 ProcessGroupHCCL.cpp:123] watchdog",
            "watchdog",
            "error",
        ),
        (
            "[ERROR] RUNTIME(1234,python):2025-03-26-17:01:02.816.428 [stream.cc:12]1 Alloc: fail",
            "Alloc: fail",
            "error",
        ),
    ],
)
def test_normalise_strips_more_real_prefixes(raw, message, level):
    assert normalise(raw) == (message, level)


def test_json_output_marks_a_guess_and_keeps_findings_first_best():
    rc, out, err = _run_cli(
        "--json", stdin=b"Traceback (most recent call last):\nRuntimeError: odd\n"
    )
    assert rc == 0, err
    first = json.loads(out)["findings"][0]
    assert first["guess"] is True and "confidence" in first and first["settle"]


def test_human_output_of_a_guess_says_guess_and_how_to_settle(capsys, tmp_path):
    p = tmp_path / "g.log"
    p.write_text("Traceback (most recent call last):\nRuntimeError: odd\n")
    assert main(["diagnose", str(p)]) == 0
    out = capsys.readouterr().out
    assert "best guess" in out and "GUESS" in out and "To settle it, run:" in out
    assert "npu-smi info" in out


def test_gzip_bomb_stops_at_the_size_cap_with_the_fix(tmp_path):
    p = tmp_path / "bomb.log.gz"
    with gzip.open(p, "wb") as fh:
        chunk = b"INFO 01-01 00:00:00 [a.py:1] same line again\n" * 20000
        for _ in range(30):  # ~26 MiB of text from ~100 KiB
            fh.write(chunk)
    assert p.stat().st_size < 1 << 20
    with pytest.raises(InputError, match=r"stopped after \d+ MiB .*limit 8 MiB.*--max-mb"):
        diagnose_file(str(p), max_mb=8)
    rc, _out, err = _run_cli("--max-mb", "8", str(p))
    assert rc == 2 and "--max-mb" in err and "Traceback" not in err


def test_time_cap_stops_with_its_message(tmp_path, monkeypatch):
    p = tmp_path / "slow.log"
    p.write_bytes(b"INFO x\n" * 2_000_000)
    monkeypatch.setattr(engine, "BLOCK", 1 << 16)
    with pytest.raises(InputError, match=r"--max-seconds"):
        diagnose_file(str(p), max_seconds=0.0)


def test_gzip_detected_by_magic_bytes_without_the_suffix(tmp_path):
    p = tmp_path / "vllm.log"
    p.write_bytes(gzip.compress((LOGS / "pitfall3_1_example.log").read_bytes()))
    assert top(diagnose_file(str(p)))["pitfall"] == 3


def test_prefilter_anchors_cover_every_rule_of_the_shipped_file():
    """Each shipped pattern is found by the prefilter: no rule silently loses its lines."""
    d = Diagnoser()
    covered = {e for gs in d._gate_sets for ids in gs.ids.values() for e in ids}
    covered |= {e for gs in d._gate_sets for _rx, ids in gs.targeted for e in ids}
    covered |= set(d._fallback_ids)
    missing = [
        (kind, rule.id)
        for i, (kind, rule, _o, _p) in enumerate(d._entries)
        if i and i not in covered
    ]
    assert missing == []


SERVING_NOISE = [
    "INFO 08-06 09:37:{s:02d} [loggers.py:118] Engine 000: Avg prompt throughput: 10.0 tokens/s, "
    "Avg generation throughput: 20.0 tokens/s, Running: {r} reqs, Waiting: 0 reqs, GPU KV cache "
    "usage: {u}.1%, Prefix cache hit rate: 0.0%",
    '(APIServer pid=1) INFO:     10.0.0.{r}:5{s:04d} - "POST /v1/chat/completions HTTP/1.1" 200 OK',
    "(VllmWorker rank={r} pid=1{s:03d}) INFO 08-06 09:37:{s:02d} [worker.py:210] step {s} done",
]


def test_serving_noise_is_read_whole_and_gives_no_finding():
    """60,000 lines of a healthy serving log: every line counted, nothing found. Speed is
    benchmarks/bench_diagnose.py's figure (MB/s against a plain read in the same run), not a
    timed unit test: a loaded CI machine made the old CPU-time guard fail."""
    rng = random.Random(3)
    lines = (
        rng.choice(SERVING_NOISE).format(
            s=rng.randrange(60), r=rng.randrange(8), u=rng.randrange(60)
        )
        for _ in range(60000)
    )
    d = Diagnoser()
    d.feed_text("\n".join(lines) + "\n")
    assert d.lines == 60000
    assert d.result()["findings"] == []


def test_prefilter_finds_what_reading_every_line_finds():
    """The anchor prefilter loses nothing: on every log fixture and every corpus log the findings
    equal those of the engine that tries every pattern on every line."""
    rules = load_rules()
    files = sorted(LOGS.glob("*.log")) + sorted((DATA / "diagnose" / "real").glob("*.log"))
    assert len(files) > 20
    for path in files:
        body = path.read_text(encoding="utf-8", errors="replace")
        results = []
        for prefilter in (True, False):
            d = Diagnoser(rules, prefilter=prefilter)
            d.feed_text(body)
            results.append([(f["rule"], f["guess"], f["matches"]) for f in d.result()["findings"]])
        assert results[0] == results[1], path.name


def test_case_insensitive_literal_in_any_case_is_found():
    rules = parse_rules(
        {
            "rules": [
                {
                    "id": "oom",
                    "pitfall": 5,
                    "title": "t",
                    "patterns": [r"(?i)\bCUDA out of memory\b"],
                    "explanation": "e",
                    "fix": "f",
                }
            ]
        }
    )
    for text in ("torch.OutOfMemoryError: CUDA out of memory.", "cUdA OuT oF mEmOrY"):
        assert diagnose_text(text + "\n", rules)["findings"][0]["rule"] == "oom", text


def test_emulator_failed_starts_classify_as_the_health_wait_needs(tmp_path):
    """A real emulator start-up failure (what vllm_health reads with docker logs): the graph-capture
    failure is pitfall 4 and not a guess (the eager fallback depends on it)."""
    from ascend_sim.vllm_emulator.sandbox import (
        emulator_env,
        make_root,
        preset_state,
        write_row,
        write_tiny_random_model,
    )

    model = str(tmp_path / "tiny")
    write_tiny_random_model(model)
    root = make_root(str(tmp_path / "root"), state=preset_state("a2-graph-broken"))
    env = emulator_env(root, write_row(str(tmp_path / "row.json"), "v0.23.0"))
    cmd = [sys.executable, "-m", "ascend_sim.vllm_emulator", "serve", model, "--port", "0"]
    res = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=120)
    assert res.returncode == 1
    first = top(diagnose_text(res.stdout + res.stderr))
    assert first["pitfall"] == 4 and first["guess"] is False, first


def test_not_supported_prose_is_a_failure_but_a_warning_saying_so_is_not():
    """A pasted "X is not supported" report gets an answer; a WARNING saying so gets none."""
    title = (
        "[Bug]: dsv4-flash `Promotion for Float8 Types is not supported, attempted to promote "
        "Float8_e4m3fn and Bool`\n"
    )
    findings = diagnose_lines([title])["findings"]
    assert findings and findings[0]["pitfall"] == 2
    warning = "WARNING 03-26 13:39:39 [cpu.py:154] Pin memory is not supported on CPU.\n"
    assert diagnose_lines([warning])["findings"] == []


def test_real_host_outputs_get_no_failure():
    """npu-smi output, health/ECC fields ("Error Code : NA", "Error Count : 0")."""
    samples = sorted((DATA / "samples").glob("*.txt"))
    assert len(samples) > 50
    results = {p.name: diagnose_file(str(p))["findings"] for p in samples}
    invented = {name: f[0]["rule"] for name, f in results.items() if f}
    assert invented == {}


@pytest.mark.parametrize(
    ("line", "rule"),
    [
        ("EZ9999 at step 3", "npu_inner_error"),
        ("see EI0002 here", "hccl_timeout"),
        ("ez9999", None),
    ],
)
def test_a_cann_code_alone_on_a_line_is_found_as_by_reading_every_line(line, rule):
    """The prefilter finds a CANN code (upper case, as the code schemes read it) on a line with
    no other anchor, in a block of noise; the result equals the engine's without prefilter."""
    text = "INFO 08-06 09:37:00 [worker.py:210] step done\n" * 300 + line + "\n"
    found = []
    for prefilter in (True, False):
        d = Diagnoser(prefilter=prefilter)
        d.feed_text(text)
        found.append([f["rule"] for f in d.result()["findings"] if not f["guess"]])
    assert found[0] == found[1] == ([rule] if rule else [])
