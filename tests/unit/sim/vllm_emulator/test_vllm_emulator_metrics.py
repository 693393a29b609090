"""The emulator's /metrics is valid Prometheus text whatever the served model is called.

Parsed with prometheus_client's text parser (the reference Python implementation of the
exposition format): a label value with a quote, a backslash or a newline must be escaped
(https://prometheus.io/docs/instrumenting/exposition_formats/#text-format-details), and the
parsed value must be the served name itself.
"""

from __future__ import annotations

import http.client

import pytest

from ascend_sim.vllm_emulator.metrics import Metrics, escape_label_value
from ascend_sim.vllm_emulator.sandbox import Emulator, emulator_env, make_root, write_row
from ascend_sim.vllm_emulator.sandbox import write_tiny_random_model as tiny_model

parser = pytest.importorskip("prometheus_client.parser")

ODD_NAMES = ['team "a" model', "C:\\models\\qwen", "two\nlines", 'all \\ " \n of them\\n']


def samples(text: str) -> list:
    return [s for family in parser.text_string_to_metric_families(text) for s in family.samples]


@pytest.mark.parametrize("name", ODD_NAMES)
def test_render_escapes_the_model_name(name):
    metrics = Metrics(name, ["vllm:kv_cache_usage_perc"], {"block_size": "128", "odd": name})
    metrics.finished("stop", prompt=3, generated=2, e2e_s=0.4)
    parsed = samples(metrics.render())
    assert len(parsed) > 50
    with_model = [s for s in parsed if "model_name" in s.labels]
    assert with_model and all(s.labels["model_name"] == name for s in with_model)
    info = next(s for s in parsed if s.name == "vllm:cache_config_info")
    assert info.labels == {"block_size": "128", "odd": name}


def test_escape_label_value():
    assert escape_label_value('a"b\\c\nd') == 'a\\"b\\\\c\\nd'
    assert escape_label_value("qwen3-tiny") == "qwen3-tiny"


def test_served_metrics_parse_with_a_quoted_model_name(tmp_path):
    name = 'acme "fast"\\qwen\nv2'
    model = tiny_model(str(tmp_path / "tiny"))
    row = write_row(str(tmp_path / "row.json"), "v0.23.0")
    env = emulator_env(make_root(str(tmp_path / "root")), row)
    args = [model, "--host", "127.0.0.1", "--port", "0", "--served-model-name", name,
            "--max-model-len", "256"]  # fmt: skip
    emu = Emulator(args, env).start()
    try:
        assert emu.ready, emu.output()
        conn = http.client.HTTPConnection("127.0.0.1", emu.port, timeout=30)
        conn.request("GET", "/metrics")
        resp = conn.getresponse()
        text = resp.read().decode()
        conn.close()
    finally:
        emu.stop()
    assert resp.status == 200
    parsed = samples(text)
    running = [s for s in parsed if s.name == "vllm:num_requests_running"]
    assert [s.labels for s in running] == [{"model_name": name}]
