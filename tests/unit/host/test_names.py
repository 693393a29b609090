"""Names that become paths or container names; removals contained in their parent (issue 22)."""

from __future__ import annotations

import os

import pytest

from ascend_deploy.errors import InputError
from ascend_deploy.host import names


@pytest.mark.parametrize("bad", ["", "..", ".", "../victim", "/", "a/b", "-rf", "qwen:3", "x" * 64])
def test_bad_service_names_are_refused_naming_variable_and_pattern(bad):
    with pytest.raises(InputError) as err:
        names.check_name("vllm_service_name", bad)
    assert "vllm_service_name" in str(err.value)
    assert names.SERVICE_NAME_PATTERN in str(err.value)


@pytest.mark.parametrize("good", ["qwen3", "vllm", "a", "Team_A.qwen-3"])
def test_plain_service_names_pass(good):
    assert names.check_name("vllm_service_name", good) == good


@pytest.mark.parametrize("bad", ["", "..", "qwen:tiny", "a/b", ".hidden", "-x", "a\nb"])
def test_bad_model_names_are_refused(bad):
    with pytest.raises(InputError, match="model_weights_name"):
        names.check_name("model_weights_name", bad, "model")


def test_model_names_with_spaces_and_unicode_pass():
    assert names.check_name("model_weights_name", "qwen tiny ü", "model") == "qwen tiny ü"


def test_remove_contained_removes_only_inside_the_parent(tmp_path):
    config = tmp_path / "etc" / "ascend-deploy"
    (config / "qwen3").mkdir(parents=True)
    (config / "qwen3" / "service.env").write_text("VLLM_API_KEY=k\n")
    victim = tmp_path / "etc" / "victim"
    victim.mkdir()
    (victim / "keep").write_text("x")
    for path in (str(config / "../victim"), str(config) + "/", str(config / ".."), str(config)):
        with pytest.raises(InputError, match="refusing to remove"):
            names.remove_contained(str(config), path)
    assert (victim / "keep").exists() and (config / "qwen3" / "service.env").exists()
    # a symlink inside pointing outside: the link is removed, not its target
    os.symlink(victim, config / "link")
    assert names.remove_contained(str(config), str(config / "link"))
    assert (victim / "keep").exists()
    assert names.remove_contained(str(config), str(config / "qwen3"), check_mode=True)
    assert (config / "qwen3").exists()
    assert names.remove_contained(str(config), str(config / "qwen3"))
    assert not (config / "qwen3").exists()
    assert not names.remove_contained(str(config), str(config / "qwen3"))
