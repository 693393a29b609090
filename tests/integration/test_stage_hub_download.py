"""model_weights stages a hub download from the controller as it is (issue 24).

The role through ansible-playbook on localhost (connection local) with model_weights_source
controller and model_weights_src a Hugging Face cache repository or a ModelScope directory of
the tiny trained model: the manifest is made on the controller (LFS sha256 from the blob names,
the rest hashed), the copy is verified against it on the host, the source is left as it was,
and a second run copies nothing.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
from conftest import DATA, run_local_play

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "unit" / "model"))
import hub_layouts

pytestmark = pytest.mark.slow
TINY = DATA / "tiny-qwen3-fp8"


def _stage(tmp_path: Path, src: Path) -> tuple[int, str]:
    play = [
        {
            "hosts": "localhost",
            "gather_facts": False,
            "vars": {
                "model_weights_source": "controller",
                "model_weights_src": str(src),
                "model_weights_name": "tiny",
                "model_weights_root": str(tmp_path / "models"),
                "model_weights_manifest_cache": str(tmp_path / "manifests"),
                "model_weights_convert": "never",
                "model_weights_owner": str(os.getuid()),
            },
            "tasks": [
                {
                    "name": "Stage",
                    "ansible.builtin.include_role": {"name": "model_weights"},
                }
            ],
        }
    ]
    done = run_local_play(play, tmp_path)
    return done.returncode, done.stdout + done.stderr


@pytest.mark.parametrize("layout", ["huggingface-cache", "modelscope"])
def test_a_hub_download_is_staged_and_verified(tmp_path, layout):
    if layout == "huggingface-cache":
        src = hub_layouts.hf_cache(TINY, tmp_path / "hub")
    else:
        src = hub_layouts.modelscope_dir(TINY, tmp_path / "ms")
    before = sorted(p.name for p in src.rglob("*"))
    rc, out = _stage(tmp_path, src)
    assert rc == 0, out[-4000:]
    flat = " ".join(out.split())
    if layout == "huggingface-cache":
        assert "a Hugging Face cache snapshot at 0123456789ab): 2 sha256 from the hub's" in flat
    else:
        assert "a ModelScope download): 10 computed on this machine" in flat
    staged = tmp_path / "models" / "tiny"
    for f in TINY.iterdir():  # real files (links followed), the true bytes
        assert not (staged / f.name).is_symlink()
        assert (staged / f.name).read_bytes() == f.read_bytes()
    assert (staged / "SHA256SUMS").read_text() == (
        tmp_path / "manifests" / "tiny" / "SHA256SUMS"
    ).read_text()
    assert sorted(p.name for p in src.rglob("*")) == before  # the source is untouched
    rc, out = _stage(tmp_path, src)
    assert rc == 0, out[-3000:]
    assert "Copy the model from the controller" in out
    copy = out.split("TASK [model_weights : Copy the model from the controller]", 1)[1]
    assert copy.split("TASK [", 1)[0].count("skipping") >= 1  # already staged: no copy
