"""Version ordering for Huawei (driver / firmware / CANN) and PEP 440-like strings."""

from __future__ import annotations

import itertools
import random

import pytest

from ascend_deploy.versioning import (
    compare,
    is_prerelease,
    is_version,
    pinned_version,
    same_release,
    satisfies,
    version_key,
)

ORDERS = [
    # CANN: test builds < RCs < final; alpha before the final of the same release
    [
        "7.0.T10",
        "8.0.T63",
        "8.0.RC1",
        "8.0.RC2",
        "8.0.RC3",
        "8.0.0",
        "8.1.RC1",
        "8.2.RC1",
        "8.3.RC1",
        "8.3.RC2",
        "8.5.0.alpha001",
        "8.5.0",
        "8.5.1",
        "9.0.0",
        "9.1.0 beta",
        "9.1.0",
    ],
    # drivers (lower-case rc, patch numbers after the rc, build tags ignored)
    [
        "23.0.rc1",
        "23.0.rc2",
        "23.0.rc3",
        "23.0.0",
        "23.0.5",
        "23.0.7",
        "24.1.rc1",
        "24.1.rc2",
        "24.1.rc2.2",
        "24.1.rc3",
        "24.1.0",
        "24.1.1",
        "25.0.rc1",
        "25.0.rc1.1",
        "25.2.0",
        "25.5.2",
        "26.0.rc1",
        "26.1.0",
    ],
    # firmware
    [
        "6.3.0.1.241",
        "6.4.12.1.241",
        "7.0.0",
        "7.1.0.7.220",
        "7.1.0.11.220",
        "7.1.99",
        "7.5.0.1.129",
        "7.7.0.1.231",
        "9.0.0.105.229",
    ],
    # vllm-ascend tags
    [
        "v0.7.1rc1",
        "v0.7.3rc2",
        "v0.7.3",
        "v0.7.3.post1",
        "v0.9.1rc3",
        "v0.9.1",
        "v0.10.0rc1",
        "v0.11.0rc0",
        "v0.11.0rc1",
        "v0.11.0",
        "v0.13.0rc1",
        "v0.13.0rc3",
        "v0.13.0",
        "v0.23.0",
    ],
    # torch_npu
    [
        "2.5.1.dev20250218",
        "2.5.1",
        "2.5.1.post1.dev20250528",
        "2.5.1.post1.dev20250619",
        "2.5.1.post1",
        "2.7.1.dev20250724",
        "2.7.1",
        "2.7.1.post1",
        "2.8.0",
        "2.8.0.post2",
        "2.9.0.post1+git4c901a4",
        "2.10.0.post4",
    ],
    # vllm-ascend development builds sort below the release they lead to
    ["0.21.0rc1", "0.21.0rc2.dev0+g80610e443.d20260721", "0.21.0rc2", "0.21.0"],
]


@pytest.mark.parametrize("order", ORDERS)
def test_sorting(order):
    shuffled = order[:]
    random.Random(0).shuffle(shuffled)
    assert sorted(shuffled, key=version_key) == order
    for a, b in itertools.pairwise(order):
        assert compare(a, b) == -1 and compare(b, a) == 1


@pytest.mark.parametrize(
    "a, b",
    [
        ("8.2.RC1", "8.2.rc1"),
        ("v0.13.0", "0.13.0"),
        ("8.0.0", "8.0.0.B100"),
        ("8.0", "8.0.0"),
        ("23.0.rc2", "23.0.rc2.b090"),
        ("25.0.rc1.2", "25.0.rc1.2.sph001"),
        ("2.5.1.dev20250218", "2.5.1.dev20250218 (manual)"),
    ],
)
def test_same_release(a, b):
    assert same_release(a, b) and compare(a, b) == 0


@pytest.mark.parametrize(
    "text, pre",
    [
        ("v0.13.0rc1", True),
        ("v0.13.0", False),
        ("8.2.RC1", True),
        ("8.5.0", False),
        ("0.7.3.post1", False),
        ("2.7.1.dev20250724", True),
        ("8.0.T63", True),
    ],
)
def test_prerelease(text, pre):
    assert is_prerelease(text) is pre


@pytest.mark.parametrize(
    "bad", ["", "abc", "latest", "x1.2", "1.2.3-foo!", "v0.10.1/v0.10.1.1", "8.5.0; rm -rf /"]
)
def test_not_versions(bad):
    assert not is_version(bad)
    with pytest.raises(ValueError):
        version_key(bad)


@pytest.mark.parametrize(
    "version, spec, expected",
    [
        ("3.11.4", ">=3.10,<3.12", True),
        ("3.12.0", ">=3.10,<3.12", False),
        ("3.9.18", ">=3.9", True),
        ("0.10.1.1", "v0.10.1/v0.10.1.1", True),
        ("0.10.2", "v0.10.1/v0.10.1.1", False),
        ("8.2.RC1", ">=8.0.RC2", True),
        ("8.0.RC1", ">=8.0.RC2", False),
        ("8.0.0", "8.0.0 (Dockerfile)", True),
        ("2.5.1.dev20250310", ">=2.5.1.dev20250308", True),
        ("2.5.1", "unpinned", None),
        ("2.8.0", "2.8.0.post2", False),
    ],
)
def test_satisfies(version, spec, expected):
    assert satisfies(version, spec) is expected


def test_pinned_version():
    assert pinned_version("2.5.1.dev20250218 (manual)") == "2.5.1.dev20250218"
    assert pinned_version("v0.10.1/v0.10.1.1") == "0.10.1"
    assert pinned_version(">=2.5.1") is None
    assert pinned_version("unpinned") is None
