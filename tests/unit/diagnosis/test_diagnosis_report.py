"""The diagnosis as the Ansible path reports it (ascend_diagnose, vllm_health): several real
logs diagnosed together, and each finding worded once."""

from __future__ import annotations

import gzip
import json

import pytest
from conftest import DATA, REPO

from ascend_deploy.diagnosis.engine import diagnose_text
from ascend_deploy.diagnosis.report import describe, diagnose_paths, write_result
from ascend_deploy.diagnosis.rules import parse_rules

REAL = DATA / "diagnose" / "real"
RULES = parse_rules(json.loads((REPO / "src/ascend_deploy/data/diagnose_rules.json").read_text()))


def best(name: str) -> dict:
    return diagnose_text((REAL / name).read_text(errors="replace"), RULES)["findings"][0]


def test_a_certain_finding_names_its_pitfall_evidence_fix_and_variable():
    f = best("p4_aclgraph_not_support_deepseek_1458.log")
    assert f["guess"] is False and f["variable"]
    text = describe(f)
    assert text.startswith(f"[pitfall 4] {f['title']}. Evidence: {f['evidence'][0]}")
    assert text.endswith(f"Fix: {f['fix']} (variable {f['variable']})")
    assert "Best guess" not in text and "settle" not in text


def test_a_guess_says_so_with_its_confidence_and_how_to_settle_it():
    f = best("p4_capture_status_assert_title_2383.log")
    assert f["guess"] is True and f["settle"]
    text = describe(f)
    assert text.startswith(
        f"Best guess (confidence {f['confidence']:.0%}, no known signature) [pitfall 4] "
    )
    assert text.endswith(f"To settle it, run: {'; '.join(f['settle'])}")


def test_a_neighbour_and_long_evidence():
    names = sorted(p.name for p in REAL.glob("nb_*.log"))
    f = next(x for x in map(best, names) if not x["pitfall"] and not x["guess"])
    assert describe(f).startswith(f"[neighbour] {f['title']}.")
    long = dict(f, evidence=["x" * 200, "y" * 200, "z"], variable=None)  # the first two
    text = describe(long)
    assert f"Evidence: {'x' * 200} / {'y' * 94}.... Fix: " in text


def test_several_logs_together_with_missing_binary_and_gzip_files(tmp_path):
    packed = tmp_path / "vllm-0.log.gz"
    packed.write_bytes(gzip.compress((REAL / "p5_npu_oom_flattened_1617.log").read_bytes()))
    binary = tmp_path / "core.bin"
    binary.write_bytes(b"\x00\x01\x02" * 1000)
    plain = REAL / "p4_capture_mode_memcpy_cn_6002.log"
    result = diagnose_paths(
        [str(packed), str(binary), str(tmp_path / "gone.log"), str(plain)], RULES
    )
    assert result["sources"] == [str(packed), str(plain)]
    assert result["missing"] == [str(tmp_path / "gone.log")]
    assert [u["path"] for u in result["unreadable"]] == [str(binary)]
    assert "binary" in result["unreadable"][0]["reason"]
    pitfalls = {f["pitfall"] for f in result["findings"]}
    assert {4, 5} <= pitfalls
    assert all(f["summary"] == describe(f) for f in result["findings"])
    dest = tmp_path / "diagnosis.json"
    write_result(str(dest), result)
    assert json.loads(dest.read_text(encoding="utf-8")) == result
    assert dest.read_text(encoding="utf-8").endswith("}\n")


def test_nothing_to_read_is_an_empty_result(tmp_path):
    result = diagnose_paths([str(tmp_path / "none.log")], RULES)
    assert result["findings"] == [] and result["sources"] == [] and result["last_errors"] == []


@pytest.mark.parametrize("name", ["p1_libatb_missing_130.log", "p5_kv_memory_negative_9372.log"])
def test_every_finding_of_a_real_log_is_one_line(name):
    result = diagnose_paths([str(REAL / name)], RULES)
    assert result["findings"]
    assert all("\n" not in f["summary"] for f in result["findings"])
