"""What an emulated CANN package knows about itself: its release train and the driver trains it
accepts, as its ``ascend_toolkit_install.info`` carries them (``innerversion``,
``compatible_version``; docs/sources.md, samples ``ascend_toolkit_install.info_*``).

The emulated ``torch.npu`` decides driver/CANN compatibility from these lists and the driver's
own ``version.info`` (``device.cann_runs_on_driver``), never from the bundle's compatibility
matrix, so a wrong matrix row fails at ``set_device`` as it would on a host.

C-codes from real install-info files: C19 8.0.RC3, C20 8.0.0, C21 8.1.RC1, C22 8.2.RC1,
C23 8.3.RC1/8.3.RC2, C25 8.5.0; 8.2.RC1 lists C15, C18-C21, C23 (verbatim sample). Lists of
the other releases are simulated from the published HDK pairings (CANN release notes:
8.2.RC1 with HDK 24.1.RC2 and newer; 8.3 with 25.x and 24.1.0; 8.5.x with 25.0-25.5; 9.x with
25.3 and newer); codes of 8.5.1 and the 9.x releases are not published and simulated
(C25 SPC, C27, C29, C31, the same values as the simulated hosts' presets).
"""

from __future__ import annotations

import re

# CANN version -> (innerversion, compatible_version)
CANN_PACKAGES: dict[str, tuple[str, str]] = {
    "8.0.RC3": ("V100R001C19SPC001B120", "[V100R001C15],[V100R001C17],[V100R001C18],[V100R001C19]"),
    "8.0.0": ("V100R001C20SPC001B130", "[V100R001C15],[V100R001C18],[V100R001C19],[V100R001C20]"),
    "8.1.RC1": (
        "V100R001C21SPC001B238",
        "[V100R001C15],[V100R001C18],[V100R001C19],[V100R001C20],[V100R001C21]",
    ),
    "8.2.RC1": (
        "V100R001C22SPC001B231",
        "[V100R001C15],[V100R001C18],[V100R001C19],[V100R001C20],[V100R001C21],[V100R001C23]",
    ),
    "8.3.RC1": (
        "V100R001C23SPC001B120",
        "[V100R001C19],[V100R001C20],[V100R001C21],[V100R001C22],[V100R001C23]",
    ),
    "8.3.RC2": (
        "V100R001C23SPC002B110",
        "[V100R001C19],[V100R001C20],[V100R001C21],[V100R001C22],[V100R001C23]",
    ),
    "8.5.0": ("V100R001C25SPC001B100", "[V100R001C21],[V100R001C23],[V100R001C25]"),
    "8.5.1": ("V100R001C25SPC002B100", "[V100R001C21],[V100R001C23],[V100R001C25]"),
    "9.0.0": ("V100R001C27SPC001B100", "[V100R001C23],[V100R001C25],[V100R001C27]"),
    "9.0.1": ("V100R001C29SPC001B100", "[V100R001C23],[V100R001C25],[V100R001C29]"),
    "9.1.0": ("V100R001C31SPC001B101", "[V100R001C23],[V100R001C25],[V100R001C31]"),
}


def code(inner: str | None) -> int | None:
    """The release-train number of an innerversion (``V100R001C22SPC001B231`` -> 22)."""
    m = re.search(r"C(\d+)", inner or "")
    return int(m.group(1)) if m else None


def code_ranges(text: str | None) -> list[tuple[int, int]]:
    """``[V100R001C13],[V100R001C15-V100R001C19]`` -> [(13, 13), (15, 19)]."""
    out = []
    for entry in re.findall(r"\[([^\]]*)\]", text or ""):
        codes = [int(c) for c in re.findall(r"C(\d+)", entry)]
        if codes:
            out.append((codes[0], codes[-1]) if "-" in entry else (codes[0], codes[0]))
            out += [(c, c) for c in codes[1:]] if "-" not in entry else []
    return out


def listed(train: int | None, ranges: list[tuple[int, int]]) -> bool:
    return train is not None and any(lo <= train <= hi for lo, hi in ranges)
