"""``plan`` answers "will it fit?" before the download: from config.json alone, or with the
index's metadata.total_size; a saved npu-smi output instead of typed HBM figures (issue 24).

The estimate is checked against the shard headers of full-shape sparse checkpoints (every
Qwen3 dense size, FP8 and BF16) and against Qwen3-4B-FP8's published figures.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from conftest import DATA, SAMPLES

from ascend_deploy.cli import main
from ascend_deploy.errors import InputError
from ascend_deploy.model.info import inspect_model
from ascend_deploy.planning.plan import make_plan

GB64 = 65536
PLAN_KEYS = ("tp", "replicas", "kv_capacity_tokens", "max_model_len", "max_num_seqs", "feasible")


def _config_only(src: str, dst: Path, keep_index: bool = False) -> str:
    dst.mkdir()
    for f in Path(src).iterdir():
        if f.suffix == ".json" and (keep_index or not f.name.endswith(".index.json")):
            shutil.copy(f, dst / f.name)
    return str(dst)


@pytest.mark.parametrize("key", ["4b-fp8", "4b-bf16", "14b-fp8", "32b-bf16"])
def test_config_alone_plans_as_the_shard_headers_do(qwen3_checkpoints, tmp_path, key):
    full = qwen3_checkpoints[key]
    bare = _config_only(full, tmp_path / key)
    for npus in (1, 8):
        a = make_plan(full, hbm_total_mb=GB64, hbm_used_mb=3400, npus=npus)
        b = make_plan(bare, hbm_total_mb=GB64, hbm_used_mb=3400, npus=npus, estimate_weights=True)
        assert [a[k] for k in PLAN_KEYS] == [b[k] for k in PLAN_KEYS], (key, npus)
        for field in ("weight_bytes_on_disk", "weight_bytes_served", "needs_conversion"):
            assert a["model"][field] == b["model"][field], (key, field)
    assert b["model"]["tensor_count"] is None
    assert b["model"]["weights_source"].startswith("config.json: ")


def test_qwen3_4b_fp8_published_figures(qwen3_checkpoints, tmp_path):
    facts = inspect_model(_config_only(qwen3_checkpoints["4b-fp8"], tmp_path / "m"), estimate=True)
    # Qwen/Qwen3-4B-FP8: 4,412,063,872 bytes in its index's total_size; converted 8,044,936,192
    assert facts["weight_bytes_on_disk"] == 4_412_063_872
    assert facts["weight_bytes_served"] == 8_044_936_192
    assert facts["parameters"] == 4_022_468_096


def test_the_index_total_size_is_used_when_the_shards_are_missing(qwen3_checkpoints, tmp_path):
    d = Path(_config_only(qwen3_checkpoints["4b-fp8"], tmp_path / "m", keep_index=True))
    index = json.loads((d / "model.safetensors.index.json").read_text())
    index["metadata"]["total_size"] = 4_500_000_000  # not the estimate: shows which is used
    (d / "model.safetensors.index.json").write_text(json.dumps(index))
    facts = inspect_model(str(d), estimate=True)
    assert facts["weight_bytes_on_disk"] == 4_500_000_000
    assert facts["weight_bytes_served"] == 8_044_936_192  # BF16 after conversion: from config
    assert "metadata.total_size" in facts["weights_source"]
    # Without estimate (what the roles run on staged weights) a missing shard is still refused.
    with pytest.raises(InputError, match=r"shard listed in model\.safetensors\.index\.json"):
        inspect_model(str(d))


def test_a_modelslim_checkpoint_needs_its_index_or_weights(tmp_path):
    d = tmp_path / "w8a8"
    d.mkdir()
    for name in ("config.json", "quant_model_description.json"):
        shutil.copy(DATA / "tiny-qwen3-w8a8" / name, d / name)
    with pytest.raises(
        InputError, match=r"config\.json alone cannot size a checkpoint quantized with 'ascend'"
    ):
        inspect_model(str(d), estimate=True)


def _cli(capsys, *argv: str) -> tuple[int, str, str]:
    rc = main(["plan", *argv])
    out, err = capsys.readouterr()
    return rc, out, err


def test_done_when_qwen3_4b_fp8_fits_a_64gb_card_from_config_json(
    qwen3_checkpoints, tmp_path, capsys
):
    bare = _config_only(qwen3_checkpoints["4b-fp8"], tmp_path / "Qwen3-4B-FP8")
    rc, out, _ = _cli(
        capsys, "--model-dir", bare, "--hbm-total-mb", "65536", "--hbm-used-mb", "3400"
    )
    assert rc == 0
    assert "feasible   yes" in out and "capacity   314,880 KV tokens per replica" in out
    assert "estimated: the weights are not on disk; config.json: 4,022,468,096 parameters" in out
    assert "vllm serve " in out


def test_one_line_per_replica_and_the_rules_release(qwen3_checkpoints, capsys):
    rc, out, _ = _cli(
        capsys, "--model-dir", qwen3_checkpoints["4b-fp8"], "--hbm-total-mb", "65536", "--npus", "8"
    )
    assert rc == 0
    replicas = [line for line in out.splitlines() if line.startswith("replica    ")]
    assert len(replicas) == 8
    assert replicas[7] == "replica    vllm-7: NPUs 7, port 8007, ASCEND_RT_VISIBLE_DEVICES=0"
    assert "rules      vllm-ascend unspecified (" in out
    assert "[[" not in out and "None" not in out
    assert "warning: binds 0.0.0.0 without an API key" in out


def test_an_infeasible_plan_prints_no_command(qwen3_checkpoints, capsys):
    rc, out, _ = _cli(
        capsys, "--model-dir", qwen3_checkpoints["32b-bf16"], "--hbm-total-mb", "65536"
    )
    assert rc == 1
    assert "feasible   NO" in out
    assert "command    none: the plan is not feasible" in out
    assert "vllm serve" not in out and "None" not in out
    assert "= no KV cache (" in out and "KV -" not in out


def test_a_pinned_max_num_seqs_is_named_as_the_cause(qwen3_checkpoints, capsys):
    rc, out, _ = _cli(
        capsys,
        "--model-dir",
        qwen3_checkpoints["4b-fp8"],
        "--hbm-total-mb",
        "65536",
        "--npus",
        "8",
        "--tp",
        "8",
        "--max-num-seqs",
        "100000",
    )
    assert rc == 1
    assert "--max-num-seqs 100000 leaves no HBM for the KV cache at TP 8" in out
    assert "use --max-num-seqs 256 or less" in out


@pytest.mark.parametrize(
    ("value", "message"),
    [("64", "Did you give GB?"), ("70000000", "more memory than any Ascend NPU has")],
)
def test_implausible_hbm_is_refused(qwen3_checkpoints, capsys, value, message):
    argv = ["plan", "--model-dir", qwen3_checkpoints["4b-fp8"], "--hbm-total-mb", value]
    try:
        rc = main(argv)
    except SystemExit as exc:
        rc = exc.code
    assert rc == 2
    assert message in capsys.readouterr().err


def test_hbm_and_npus_from_a_saved_npu_smi_output(qwen3_checkpoints, capsys):
    sample = SAMPLES / "npu-smi-info_910B4_32GB_24.1.1_partial_7.txt"  # 2 x 910B4, 32 GB
    rc, out, _ = _cli(
        capsys, "--model-dir", qwen3_checkpoints["4b-fp8"], "--npu-smi-file", str(sample), "--json"
    )
    plan = json.loads(out)
    assert plan["memory"]["hbm_total_mb"] == 32768
    assert plan["memory"]["used_by_others_mb"] == 29356  # the busier of the two NPUs
    assert plan["npus"] == [0, 1] and plan["hardware"] == "a2"
    assert rc == (0 if plan["feasible"] else 1)
    # the options override the file
    rc, out, _ = _cli(
        capsys,
        "--model-dir",
        qwen3_checkpoints["4b-fp8"],
        "--npu-smi-file",
        str(sample),
        "--hbm-used-mb",
        "3000",
        "--npus",
        "1",
        "--json",
    )
    plan = json.loads(out)
    assert rc == 0 and plan["memory"]["used_by_others_mb"] == 3000 and plan["npus"] == [0]
