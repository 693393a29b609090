"""The vllm-ascend compatibility matrix: resolve a runtime set, check an installed one.

The matrix is package data (``data/compat_matrix.json``) converted from
tests/data/compat-matrix.yaml, whose sources are kept in its ``sources`` list
(vllm-ascend ``docs/source/community/versioning_policy.md`` plus README / Dockerfile /
requirements.txt per tag). Which image tags exist per hardware is the matrix's ``images``
section, from vllm-ascend ``.github/workflows/schedule_image_build_and_push.yaml`` at each
tag (see docs/sources.md): a resolution never names an image upstream did not build.
Published driver (HDK) <-> CANN pairings are in ``HDK_PAIRINGS`` with their sources
(docs/compat-sources.md). Standard library only.

The matrix is an argument: every function that reads rows takes ``matrix`` (the
compat_matrix.json document, read once with ``read_matrix`` by the CLI or looked up on the
controller by the roles); None means the shipped matrix.
"""

from __future__ import annotations

import json
import os
import re
from functools import lru_cache

from ..errors import CheckFailed, InputError, describe_path, shown
from ..resources import data_path
from ..versioning import (
    is_prerelease,
    is_version,
    pinned_version,
    same_release,
    satisfies,
    version_key,
)

MATRIX_PATH = data_path("compat_matrix.json")
HARDWARE = ("a2", "a3", "a5", "310p")
OS_VARIANTS = ("ubuntu", "openeuler")
DEFAULT_REGISTRY = "quay.io/ascend"
HUAWEI_PYPI = "https://mirrors.huaweicloud.com/ascend/repos/pypi"
PIP_NAMES = {
    "vllm": "vllm",
    "vllm_ascend": "vllm-ascend",
    "torch": "torch",
    "torch_npu": "torch-npu",
}

# Published driver/HDK <-> CANN pairings (public sources in docs/compat-sources.md).
# ``trains``: driver versions a note lists for the CANN (a listed "25.5" covers 25.5.X);
# ``oldest``: the oldest HDK a note states for it. Huawei's rule, applied to every release by
# ``oldest_driver``: no CANN release accepts an older HDK than its predecessor did, so a
# release's floor is the highest ``oldest`` of itself and every earlier release.
HDK_PAIRINGS: list[dict] = [
    {
        "cann": "8.0.RC1",
        "trains": ["24.1.rc1"],
        "oldest": "24.1.rc1",
        "source": "hiascend MindCluster 6.0.RC1 release note (HDK 24.1.RC1 <-> CANN 8.0.RC1); "
        "MindSDK 7.3.0 install guide: Atlas A2 needs CANN 8.0.RC1 and HDK 24.1.RC1 or later",
    },
    {
        "cann": "8.0.0",
        "trains": [],
        "oldest": None,
        "source": "no CANN 8.0.0 note found; oldest from CANN 8.0.RC1 (monotonic rule)",
    },
    {
        "cann": "8.1.RC1",
        "trains": ["25.0.rc1"],
        "oldest": None,
        "source": "Ascend Deployer downloader/software/CANN_8.1.RC1.json (NPU 25.0.RC1); "
        "oldest from CANN 8.0.RC1 (monotonic rule)",
    },
    {
        "cann": "8.2.RC1",
        "trains": ["25.2.0", "25.0.rc1", "24.1.0", "24.1.rc3", "24.1.rc2"],
        "oldest": "24.1.rc2",
        "source": "hiascend MindIE 2.1.RC1 release note",
    },
    {
        "cann": "8.3.RC1",
        "trains": ["25.3.rc1"],
        "oldest": None,
        "source": "Ascend Deployer downloader/software/CANN_8.3.RC1.json (NPU 25.3.RC1); "
        "oldest from CANN 8.2.RC1 (monotonic rule)",
    },
    {
        "cann": "8.3.RC2",
        "trains": [],
        "oldest": None,
        "source": "no CANN 8.3.RC2 note found; oldest from CANN 8.2.RC1 (monotonic rule)",
    },
    {
        "cann": "8.5.0.alpha001",
        "trains": ["25.2"],
        "oldest": None,
        "source": "hiascend CANN 8.5.0.alpha001 release note",
    },
    {
        "cann": "8.5.0",
        "trains": ["25.5", "25.3", "25.2", "25.0"],
        "oldest": "25.0.rc1",
        "source": "hiascend CANN 8.5.0 release note (canncommercial/850/releasenote)",
    },
    {
        "cann": "8.5.1",
        "trains": ["25.5", "25.3", "25.2", "25.0"],
        "oldest": "25.0.rc1",
        "source": "gitcode Ascend/release-management MindIE 26.0.0 release note "
        "(CANN 8.5.1 uses the HDK set of 8.5.0)",
    },
    *(
        {
            "cann": cann,
            "trains": [],
            "oldest": None,
            "source": f"no CANN {cann} note found; oldest from CANN 8.5.x (monotonic rule)",
        }
        for cann in ("9.0.0", "9.0.1")
    ),
    {
        "cann": "9.1.0",
        "trains": ["26.1.0", "25.7.rc1", "25.6.rc1", "25.1.rc1"],
        "oldest": None,
        "source": "hiascend MindCluster 26.1.0 patch note (HDK 26.1.0; Atlas 350 25.7.RC1, "
        "Atlas 850 25.6.RC1, Atlas 950 SuperPoD 25.1.RC1); oldest from CANN 8.5.x "
        "(monotonic rule)",
    },
]


# ----------------------------------------------------------------------------- matrix


def matrix_rows(matrix: object, where: str = "compatibility matrix") -> list[dict]:
    """The ``rows`` of a compat_matrix.json document, else InputError."""
    rows = matrix.get("rows") if isinstance(matrix, dict) else None
    if not isinstance(rows, list) or not all(isinstance(r, dict) for r in rows):
        raise InputError(f"{where}: compatibility matrix has no 'rows' list; reinstall")
    return rows


@lru_cache(maxsize=4)
def read_matrix(path: str = MATRIX_PATH) -> dict:
    """The matrix document in ``path`` (default: the shipped one), read once per process.

    Shared between callers: pass it on, do not modify it.
    """
    try:
        with open(path, "rb") as fh:
            raw = fh.read()
        doc = json.loads(raw.decode("utf-8"))
    except (OSError, ValueError) as exc:
        raise InputError(f"{path}: compatibility matrix unreadable ({exc}); reinstall") from None
    matrix_rows(doc, path)
    return doc


def load_matrix(matrix: dict | None = None) -> list[dict]:
    """All rows (copies; official and unofficial) of ``matrix`` (default: the shipped one)."""
    return [dict(r) for r in matrix_rows(read_matrix() if matrix is None else matrix)]


# ----------------------------------------------------------------------------- site matrix
# A site matrix is the operator's JSON file of extra or corrected rows (a release the bundle
# does not ship yet): {"rows": [...], "description": "...", "sources": ["..."]}. Its rows are
# checked against the row schema of the shipped matrix (tests/schemas/compat_matrix.schema.json,
# ``$defs/row``) by hand, the library being standard library only; test_site_matrix.py holds the
# two equal. A site row replaces the shipped row of the same ``vllm_ascend``, else is added, and
# carries ``origin: site`` so listings and answers can say so.

ORIGIN = "origin"
SITE = "site"
SITE_KEYS = ("rows", "description", "sources")
ROW_REQUIRED = ("vllm_ascend", "vllm", "python", "cann", "torch", "torch_npu", "hardware")
ROW_PATTERNS = {
    "vllm_ascend": (
        r"^v\d+\.\d+\.\d+(rc\d+|\.post\d+)?$",
        "a release tag such as v0.13.0, v0.14.0rc1 or v0.7.3.post1",
    ),
    "vllm": (r"^v\d+\.\d+", "a vLLM tag such as v0.13.0"),
    "python": (r"^>=3\.\d+(,<3\.\d+)?$", "a Python range such as >=3.10,<3.12"),
    "base_image": (r"^[a-z0-9.-]+/[^\s]+:[^\s]+$", "an image reference registry/name:tag"),
    "released": (r"^\d{4}-\d{2}-\d{2}$", "a date YYYY-MM-DD"),
}
ROW_NON_EMPTY = ("cann", "cann_310p", "torch", "torch_npu")
HARDWARE_ITEM = r"^(a2|a3|a5|310p)(\(.+\))?$"


def _matches(pattern: str, value: str) -> bool:
    return "\n" not in value and re.search(pattern, value) is not None


def _field_problem(key: str, value: object) -> str | None:
    """Why ``value`` is not a valid ``key`` cell of a matrix row (None: it is)."""
    if key == ORIGIN:
        return "reserved (the merge marks site rows with it); remove it"
    if key == "hardware":
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            return f'{shown(value)} is not a list of hardware keys such as ["a2", "a3"]'
        bad = [v for v in value if not _matches(HARDWARE_ITEM, v)]
        if bad:
            return f"{shown(bad[0])} is not a2, a3, a5 or 310p (a note may follow in brackets)"
        if len(set(value)) != len(value):
            return "lists a hardware key twice"
        return None
    if key == "official_matrix":
        return None if isinstance(value, bool) else f"{shown(value)} is not true or false"
    if key == "extra":
        if isinstance(value, list) and all(isinstance(v, str) for v in value):
            return None
        return f"{shown(value)} is not a list of strings"
    if not isinstance(value, str):
        return f"{shown(value)} is not a string"
    if key in ROW_NON_EMPTY and not value:
        return "empty"
    if key in ROW_PATTERNS and not _matches(ROW_PATTERNS[key][0], value):
        return f"{shown(value)} is not {ROW_PATTERNS[key][1]}"
    return None


def row_problems(row: object) -> list[str]:
    """``field KEY: problem`` for each way ``row`` breaks the matrix's row schema."""
    if not isinstance(row, dict):
        return [f"{shown(row)} is not an object of fields"]
    out = [f"field {key}: missing" for key in ROW_REQUIRED if key not in row]
    for key, value in row.items():
        problem = _field_problem(str(key), value)
        if problem:
            out.append(f"field {key}: {problem}")
    return out


def _row_label(row: object, index: int) -> str:
    release = row.get("vllm_ascend") if isinstance(row, dict) else None
    if isinstance(release, str) and release.strip() and "\n" not in release:
        return f"row {release}"
    return f"rows[{index}]"


def site_matrix(doc: object, path: str = "(parameter)") -> dict:
    """The checked site matrix ``doc`` (its JSON text, or the parsed document) from ``path``.

    InputError (one line naming the path, the release or row index, and the field) when the
    text is not JSON, the document is not ``{"rows": [...]}`` or a row breaks the schema.
    """
    where = f"site matrix {describe_path(path)}"
    if isinstance(doc, bytes):
        try:
            doc = doc.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise InputError(f"{where}: not UTF-8 text ({exc.reason}); write it as JSON") from None
    if isinstance(doc, str):
        try:
            doc = json.loads(doc)
        except ValueError as exc:
            raise InputError(f"{where}: not valid JSON ({exc})") from None
    if not isinstance(doc, dict):
        raise InputError(f'{where}: not a JSON object; write {{"rows": [ {{...}}, ... ]}}')
    unknown = sorted(str(k) for k in doc if k not in SITE_KEYS)
    if unknown:
        raise InputError(
            f"{where}: unknown key {shown(unknown[0])}; a site matrix holds " + ", ".join(SITE_KEYS)
        )
    rows = doc.get("rows")
    if not isinstance(rows, list) or not rows:
        raise InputError(f"{where}: no 'rows' list of matrix rows (one or more)")
    if not isinstance(doc.get("description", ""), str):
        raise InputError(f"{where}: 'description' is not a string")
    sources = doc.get("sources", [])
    if not isinstance(sources, list) or not all(isinstance(s, str) for s in sources):
        raise InputError(f"{where}: 'sources' is not a list of strings")
    seen: set[str] = set()
    for index, row in enumerate(rows):
        problems = row_problems(row)
        if problems:
            raise InputError(f"{where}: {_row_label(row, index)}: {'; '.join(problems)}")
        if row["vllm_ascend"] in seen:
            raise InputError(f"{where}: row {row['vllm_ascend']}: given twice; keep one")
        seen.add(row["vllm_ascend"])
    return {"path": describe_path(path), "rows": [dict(r) for r in rows]}


def read_site_matrix(path: str) -> dict:
    """The checked site matrix in the JSON file ``path`` (see ``site_matrix``)."""
    where = f"site matrix {describe_path(path)}"
    if os.path.isdir(path):
        raise InputError(f"{where}: is a directory; give the JSON file of site rows")
    try:
        with open(path, "rb") as fh:
            raw = fh.read()
    except FileNotFoundError:
        raise InputError(f"{where}: no such file") from None
    except OSError as exc:
        raise InputError(f"{where}: unreadable ({exc.strerror or exc})") from None
    return site_matrix(raw, path)


def merge_site_matrix(matrix: dict | None, site: dict) -> dict:
    """``matrix`` (default: the shipped one) with the rows of ``site`` (``site_matrix``'s
    answer) merged over it: a row of the same ``vllm_ascend`` is replaced, a new one added.

    A new document; merged rows carry ``origin: site``. ``matrix`` is not modified.
    """
    base = read_matrix() if matrix is None else matrix
    rows = [dict(r) for r in matrix_rows(base)]
    index = {r.get("vllm_ascend"): i for i, r in enumerate(rows)}
    for row in site["rows"]:
        marked = {**row, ORIGIN: SITE}
        if row["vllm_ascend"] in index:
            rows[index[row["vllm_ascend"]]] = marked
        else:
            index[row["vllm_ascend"]] = len(rows)
            rows.append(marked)
    return {**base, "rows": rows, "site_matrix_file": site.get("path")}


def matrix_with_site(path: str | None = None) -> dict:
    """The shipped matrix, with the site matrix file ``path`` merged over it when given."""
    if path is None:
        return read_matrix()
    return merge_site_matrix(read_matrix(), read_site_matrix(path))


def with_site_rows(matrix: dict | None, site: object, path: str | None = None) -> dict | None:
    """``matrix`` with the site matrix ``site`` (its JSON text or document, from the controller
    file ``path``) merged over it; ``matrix`` itself when ``site`` is None (the modules' form)."""
    if site is None:
        return matrix
    return merge_site_matrix(matrix, site_matrix(site, path or "(site_matrix parameter)"))


def is_site(row: dict) -> bool:
    """The row came from a site matrix (``merge_site_matrix``)."""
    return row.get(ORIGIN) == SITE


def site_note(row: dict, matrix: dict | None) -> list[str]:
    """The note of an answer built from a site row (empty for a shipped one)."""
    if not is_site(row):
        return []
    where = (matrix or {}).get("site_matrix_file") or "a site matrix"
    return [f"site row from {where}: the operator's values, not checked against upstream"]


def hardware_support(row: dict, hardware: str) -> tuple[bool, str]:
    """Whether ``row`` lists ``hardware``, and its note (``experimental`` ...)."""
    entries = row.get("hardware")
    if not isinstance(entries, list):
        return False, ""
    for entry in entries:
        m = re.match(r"^\s*([a-z0-9]+)\s*(?:\((.*)\))?\s*$", str(entry), re.I)
        if m and m.group(1).lower() == hardware:
            return True, (m.group(2) or "").strip()
    return False, ""


def row_cann(row: dict, hardware: str) -> str:
    """The CANN a row needs on ``hardware`` (``cann_310p`` or a ``needs CANN X`` note wins)."""
    if hardware == "310p" and row.get("cann_310p"):
        return str(row["cann_310p"])
    _ok, note = hardware_support(row, hardware)
    m = re.search(r"needs CANN\s+([0-9][\w.]*)", note, re.I)
    return m.group(1) if m else str(row.get("cann", ""))


def _cann_matches(row: dict, hardware: str, cann: str) -> bool:
    """``cann`` meets the row's CANN cell.

    Open lower bounds (``>=8.0.RC2`` in tag-only rows, from READMEs written in the 8.0
    era) only cover the same major.minor series: they are not a promise about CANN 9.
    """
    spec = row_cann(row, hardware)
    try:
        if not satisfies(cann, spec):
            return False
    except ValueError:
        return False
    bound = re.match(r"^\s*>=?\s*([0-9][\w.]*)\s*$", spec)
    if bound:
        return version_key(bound.group(1))[0][:2] == version_key(cann)[0][:2]
    return True


def is_final(row: dict) -> bool:
    return not is_prerelease(row["vllm_ascend"])


def is_official(row: dict) -> bool:
    return row.get("official_matrix", True) is not False


def preference(row: dict) -> tuple:
    """Higher is better: final over rc, official over tag-only, newer over older."""
    return (is_final(row), is_official(row), version_key(row["vllm_ascend"]))


def find_row(vllm_ascend: str, matrix: dict | None = None) -> dict | None:
    """The matrix row for an installed vllm-ascend version (``0.13.0`` or ``v0.13.0``)."""
    for row in load_matrix(matrix):
        if is_version(vllm_ascend) and same_release(row["vllm_ascend"], vllm_ascend):
            return row
    return None


# ----------------------------------------------------------------------------- resolve


def _validate(cann: str, hardware: str, python: str | None, os_variant: str | None) -> None:
    if not isinstance(cann, str) or not is_version(cann):
        raise InputError(f"--cann {cann!r} is not a CANN version (examples: 8.5.0, 8.2.RC1, 9.1.0)")
    _validate_options(hardware, python, os_variant)


def _validate_options(hardware: str, python: str | None, os_variant: str | None) -> None:
    if hardware not in HARDWARE:
        raise InputError(f"--hardware {hardware!r} is not one of {', '.join(HARDWARE)}")
    if python is not None and not re.fullmatch(r"3\.\d+(\.\d+)?", str(python)):
        raise InputError(f"--python {python!r} is not a Python version like 3.11")
    if os_variant is not None and os_variant not in OS_VARIANTS:
        raise InputError(f"--os {os_variant!r} is not one of {', '.join(OS_VARIANTS)}")


# ----------------------------------------------------------------------------- images


def image_rules(matrix: dict | None = None) -> dict:
    """The matrix's ``images`` section (which tags upstream built per hardware); a matrix
    document without one uses the shipped section."""
    doc = read_matrix() if matrix is None else matrix
    images = doc.get("images") if isinstance(doc, dict) else None
    if images is None:
        images = read_matrix().get("images")
    if not isinstance(images, dict) or not isinstance(images.get("built"), dict):
        raise InputError("compatibility matrix: 'images' has no 'built' table; reinstall")
    return images


def _in_range(version: tuple, entry: dict) -> bool:
    if version < version_key(entry["from"]):
        return False
    return "to" not in entry or version <= version_key(entry["to"])


def image_built(row: dict, hardware: str, matrix: dict | None = None) -> bool:
    """Whether upstream's image workflow built ``row``'s image for ``hardware``."""
    if not hardware_support(row, hardware)[0]:
        return False
    version = version_key(row["vllm_ascend"])
    return any(_in_range(version, e) for e in image_rules(matrix)["built"].get(hardware, []))


def image_for(
    row: dict,
    hardware: str,
    os_variant: str | None,
    registry: str,
    matrix: dict | None = None,
) -> str:
    """``<registry>/vllm-ascend:<tag><-hardware><-openeuler>`` (built or not: see image_built)."""
    tag = row["vllm_ascend"]
    suffix = str(image_rules(matrix)["suffix"].get(hardware, f"-{hardware}"))
    if os_variant == "openeuler":
        suffix += "-openeuler"
    return f"{registry.rstrip('/')}/vllm-ascend:{tag}{suffix}"


def built_image(
    row: dict, hardware: str, os_variant: str | None, registry: str, matrix: dict | None = None
) -> tuple[str | None, str | None]:
    """(image, None) when upstream built it, else (None, a note naming the releases that have
    one and the source build)."""
    if image_built(row, hardware, matrix):
        return image_for(row, hardware, os_variant, registry, matrix), None
    images = image_rules(matrix)
    suffix = images["suffix"].get(hardware, f"-{hardware}") or "(no suffix)"
    with_image = sorted(
        (r for r in load_matrix(matrix) if image_built(r, hardware, matrix)),
        key=preference,
        reverse=True,
    )
    alt = ", ".join(f"{r['vllm_ascend']} (CANN {row_cann(r, hardware)})" for r in with_image[:3])
    how = (images.get("source_build") or {}).get(hardware, {}).get("how")
    spans = [
        e["from"] if e.get("to") == e["from"] else f"{e['from']}-{e.get('to', '')}"
        for e in images["built"].get(hardware, [])
    ]
    note = (
        f"upstream built no {suffix} image for {row['vllm_ascend']} on {hardware} (its image "
        f"workflow builds {suffix} for {', '.join(spans) or 'no release'}); container mode "
        "needs a release with one"
        + (f": {alt}" if alt else "")
        + "; or build an image from source"
        + (f" ({how})" if how else "")
        + " and name it (ascend_runtime_image)"
    )
    return None, note


def row_value(row: dict, key: str, hardware: str | None = None) -> str:
    """A row's cell for ``hardware``: ``<key>_310p`` wins on 310P (``cann_310p`` style)."""
    if hardware == "310p" and row.get(f"{key}_310p"):
        return str(row[f"{key}_310p"])
    return str(row.get(key, ""))


def host_value(row: dict, key: str, hardware: str | None = None) -> str:
    """What a host (pip) install of the row uses for ``key``: the hardware's own cell, else
    ``<key>_pip`` (the package metadata's pin, where the matrix names a build no index
    serves or a post release the metadata conflicts with), else the matrix cell."""
    if hardware == "310p" and row.get(f"{key}_310p"):
        return str(row[f"{key}_310p"])
    return str(row.get(f"{key}_pip") or row.get(key, ""))


def accepted_specs(row: dict, key: str, hardware: str | None = None) -> list[str]:
    """The specs an installed ``key`` may meet: the host-install pin first, then the matrix
    cell (the image's / the versioning policy's), unless the hardware has its own cell."""
    own = row_value(row, key, hardware)
    if hardware == "310p" and row.get(f"{key}_310p"):
        return [own]
    return list(dict.fromkeys(s for s in (host_value(row, key, hardware), own) if s))


def pins(row: dict, hardware: str | None = None) -> dict[str, str]:
    """pip requirement per package: ``{"torch": "torch==2.8.0", ...}`` (unpinned omitted),
    as a host install on ``hardware`` uses them (``host_value``)."""
    out = {}
    for key in ("vllm", "vllm_ascend", "torch", "torch_npu"):
        spec = host_value(row, key, hardware)
        exact = pinned_version(spec)
        name = PIP_NAMES[key]
        if exact:
            out[key] = f"{name}=={exact}"
            continue
        cleaned = re.sub(r"\(.*?\)", "", spec).strip()
        if cleaned and cleaned.lower() not in {"unpinned", "unknown"}:
            out[key] = f"{name}{cleaned}"
    return out


def pip_command(row: dict, only: list[str] | None = None, hardware: str | None = None) -> str:
    """The install commands for a row, vLLM before vllm-ascend (vllm-ascend issue #5710)."""
    req = pins(row, hardware)
    keys = [k for k in ("torch", "torch_npu", "vllm", "vllm_ascend") if k in req]
    if only is not None:
        keys = [k for k in keys if k in only]
    if not keys:
        return ""
    parts = []
    torch_keys = [k for k in keys if k in ("torch", "torch_npu")]
    if torch_keys:
        cmd = "pip install " + " ".join(f"'{req[k]}'" for k in torch_keys)
        if "torch_npu" in torch_keys:
            cmd += f" --extra-index-url {HUAWEI_PYPI}"
        parts.append(cmd)
    parts += [f"pip install '{req[k]}'" for k in ("vllm", "vllm_ascend") if k in keys]
    return " && ".join(parts)


def host_install_notes(row: dict, hardware: str) -> list[str]:
    """Where the row's host-install pins differ from its image, and where the wheels are."""
    notes = []
    for key, name in (("torch_npu", "torch-npu"), ("triton_ascend", "triton-ascend")):
        host, cell = host_value(row, key, hardware), str(row.get(key, ""))
        if not cell or host == cell:
            continue
        if hardware == "310p" and row.get(f"{key}_310p"):
            notes.append(
                f"310p with CANN {row_cann(row, hardware)}: {name} {host} (the release notes' "
                f"upgrade; the package pins {row.get(f'{key}_pip') or cell}, so pip check "
                "reports that conflict)"
            )
        elif row.get("wheel_source"):
            notes.append(
                f"host install: {name}=={host} (the package's pin); the image's {name} {cell} "
                f"is a per-arch, per-Python wheel only on {row['wheel_source']} (upgrade to it "
                "by hand if wanted)"
            )
        else:
            notes.append(
                f"host install: {name}=={host} (the package's pin, what upstream's "
                f"installation guide installs); the versioning policy names {cell}, which "
                f"is on {HUAWEI_PYPI} (install it by hand if wanted)"
            )
    return notes


def _describe(row: dict, hardware: str) -> str:
    kind = "final" if is_final(row) else "rc"
    if not is_official(row):
        kind += ", not in the official matrix"
    return f"{row['vllm_ascend']} (CANN {row_cann(row, hardware)}, {kind})"


def nearest(
    cann: str,
    hardware: str = "a2",
    python: str | None = None,
    n: int = 3,
    matrix: dict | None = None,
) -> list[dict]:
    """Best row for each of the ``n`` CANN versions closest to ``cann`` on ``hardware``."""
    best: dict[str, dict] = {}
    for row in load_matrix(matrix):
        ok, _note = hardware_support(row, hardware)
        if not ok or not pinned_version(row_cann(row, hardware)):
            continue
        if python and satisfies(python, row.get("python", "")) is False:
            continue
        c = pinned_version(row_cann(row, hardware)) or ""
        if c not in best or preference(row) > preference(best[c]):
            best[c] = row
    target = version_key(cann)
    ordered = sorted(best, key=version_key)
    keys = [version_key(c) for c in ordered]
    pos = sum(1 for k in keys if k < target)

    def distance(i: int) -> tuple:
        return (abs(i - pos) if i < pos else abs(i - pos) + 0.5, -i)

    picked = sorted(range(len(ordered)), key=distance)[:n]
    return [best[ordered[i]] for i in picked]


def resolve(
    cann: str,
    hardware: str = "a2",
    python: str | None = None,
    allow_rc: bool = False,
    os_variant: str | None = None,
    registry: str = DEFAULT_REGISTRY,
    matrix: dict | None = None,
) -> dict:
    """The matrix row to run on CANN ``cann`` / ``hardware``, plus ``image`` and pins.

    Final releases win over release candidates; RCs (and tags absent from the official
    matrix) are only chosen with ``allow_rc`` when no final release matches. No match is
    CheckFailed naming the nearest rows.
    """
    hardware = str(hardware).lower()
    if os_variant == "ubuntu":
        os_variant = None
    _validate(cann, hardware, python, os_variant)
    matches = []
    for row in load_matrix(matrix):
        ok, _note = hardware_support(row, hardware)
        if not ok or not _cann_matches(row, hardware, cann):
            continue
        if python and satisfies(python, row.get("python", "")) is False:
            continue
        matches.append(row)
    finals = [r for r in matches if is_final(r) and is_official(r)]
    eligible = finals or (matches if allow_rc else [])
    where = f"CANN {cann} on {hardware}" + (f" with Python {python}" if python else "")
    if not eligible:
        if matches:
            rcs = ", ".join(r["vllm_ascend"] for r in sorted(matches, key=preference, reverse=True))
            raise CheckFailed(
                f"only release candidates support {where}: {rcs}; pass --allow-rc to use one, "
                "or install a CANN version that has a final release"
            )
        near = ", ".join(
            _describe(r, hardware) for r in nearest(cann, hardware, python, matrix=matrix)
        )
        raise CheckFailed(
            f"no vllm-ascend release supports {where}; nearest: {near or 'none'}; "
            "install one of those CANN versions"
        )
    eligible.sort(key=preference, reverse=True)
    row = dict(eligible[0])
    _ok, note = hardware_support(row, hardware)
    notes = []
    if note:
        notes.append(f"{hardware} support: {note}")
    if not is_final(row):
        notes.append("release candidate: no final vllm-ascend release supports this CANN")
    if not is_official(row):
        notes.append("tag absent from the official matrix; values from its Dockerfile")
    notes += site_note(row, matrix)
    image, no_image = built_image(row, hardware, os_variant, registry, matrix)
    if no_image:
        notes.append(no_image)
    if hardware == "a5":
        notes.append("newer docs name the 950 image suffix -950dt; CI still pushes -a5")
    notes += host_install_notes(row, hardware)
    row.update(
        {
            "hardware": hardware,
            "support": note or "supported",
            "cann": row_cann(row, hardware),
            "official_matrix": is_official(row),
            "prerelease": not is_final(row),
            "image": image,
            "image_built": image is not None,
            "pins": pins(row, hardware),
            "pip": pip_command(row, hardware=hardware),
            "notes": notes,
            "alternatives": [r["vllm_ascend"] for r in eligible[1:]],
        }
    )
    return row


# ----------------------------------------------------------------------------- check


def _finding(fid: str, status: str, evidence: str, fix: str = "", pitfall: int | None = 1) -> dict:
    return {"id": fid, "pitfall": pitfall, "status": status, "evidence": evidence, "fix": fix}


def _installed_parts(installed: dict) -> tuple[dict, str | None]:
    if not isinstance(installed, dict):
        raise InputError(f"installed versions must be a mapping, got {type(installed).__name__}")
    packages = installed.get("packages", installed)
    if not isinstance(packages, dict):
        raise InputError("installed 'packages' must be a mapping of package -> version")
    python = installed.get("python")
    if isinstance(python, dict):
        python = python.get("version")
    for key in ("torch", "torch_npu", "vllm", "vllm_ascend"):
        value = packages.get(key)
        if value is not None and (not isinstance(value, str) or not is_version(value)):
            raise InputError(f"installed {key} version {value!r} is not a version number")
    return packages, python if isinstance(python, str) else None


def check(installed: dict, cann: str, hardware: str, matrix: dict | None = None) -> list[dict]:
    """Findings (pitfall 1) comparing installed packages with the matrix for ``cann``."""
    hardware = str(hardware).lower()
    _validate(cann, hardware, None, None)
    packages, python = _installed_parts(installed)
    findings: list[dict] = []
    try:
        wanted = resolve(cann, hardware, allow_rc=True, matrix=matrix)
        findings.append(
            _finding(
                "compat.cann",
                "ok",
                f"CANN {cann} on {hardware} is served by vllm-ascend {wanted['vllm_ascend']}",
            )
        )
    except CheckFailed as exc:
        wanted = None
        findings.append(
            _finding("compat.cann", "fail", str(exc), "install a CANN version from the matrix")
        )

    target = None
    va = packages.get("vllm_ascend")
    if va:
        target = find_row(va, matrix)
        if target is None:
            findings.append(
                _finding(
                    "compat.vllm_ascend",
                    "warn",
                    f"vllm-ascend {va} is not a release in the matrix (development build?)",
                    f"install a release: {pip_command(wanted, hardware=hardware)}"
                    if wanted
                    else "",
                )
            )
            target = wanted
        else:
            supports_hw, _note = hardware_support(target, hardware)
            needs = row_cann(target, hardware)
            if not supports_hw:
                findings.append(
                    _finding(
                        "compat.vllm_ascend",
                        "fail",
                        f"vllm-ascend {va} does not support {hardware} hardware",
                        f"install {pip_command(wanted, hardware=hardware)}" if wanted else "",
                    )
                )
                target = wanted
            elif not _cann_matches(target, hardware, cann):
                fix = f"install CANN {needs} (toolkit, kernels/ops and NNAL)"
                if wanted:
                    fix += (
                        f", or switch to the set for CANN {cann}: "
                        f"{pip_command(wanted, hardware=hardware)}"
                    )
                findings.append(
                    _finding(
                        "compat.vllm_ascend",
                        "fail",
                        f"vllm-ascend {va} needs CANN {needs}, host has CANN {cann}",
                        fix,
                    )
                )
                target = wanted or target  # changing pip packages is easier than CANN
            else:
                findings.append(
                    _finding("compat.vllm_ascend", "ok", f"vllm-ascend {va} matches CANN {cann}")
                )
    else:
        target = wanted
        findings.append(
            _finding(
                "compat.vllm_ascend",
                "fail",
                "vllm-ascend is not installed",
                f"{pip_command(wanted, hardware=hardware)}"
                if wanted
                else "pick a row with 'ascend-deploy compat resolve'",
            )
        )
    if target is None:
        return findings
    driver = installed.get("driver")
    driver = driver.get("version") if isinstance(driver, dict) else driver
    graph = graph_mode_hdk_note(target["vllm_ascend"], driver)
    if graph:
        message, fix = graph.split(" Fix: ", 1)
        findings.append(_finding("compat.hdk-graph", "warn", message, fix, 4))

    wrong: list[str] = []
    for key in ("vllm", "torch", "torch_npu"):
        # A host install as upstream's installation guide does it meets the package's pin
        # (host_value); an image's build meets the matrix cell: either is the release's set.
        specs = accepted_specs(target, key, hardware)
        spec = " or ".join(specs)
        have = packages.get(key)
        req = pins(target, hardware).get(key)
        name = PIP_NAMES[key]
        if have is None:
            findings.append(
                _finding(
                    f"compat.{key}",
                    "fail",
                    f"{name} is not installed; vllm-ascend {target['vllm_ascend']} needs {spec}",
                    pip_command(target, [key], hardware),
                )
            )
            wrong.append(key)
            continue
        verdicts = [satisfies(have, s) for s in specs] or [None]
        if all(v is False for v in verdicts):
            findings.append(
                _finding(
                    f"compat.{key}",
                    "fail",
                    f"{name} {have} installed, vllm-ascend {target['vllm_ascend']} needs {spec}",
                    pip_command(target, [key], hardware) or f"install {name} {spec}",
                )
            )
            wrong.append(key)
        else:
            met = next((s for s, v in zip(specs, verdicts, strict=False) if v), None)
            extra = "" if met is not None else " (the matrix does not pin it)"
            if met is not None and len(specs) > 1:
                extra = (
                    " (the package's pin)"
                    if met == specs[0]
                    else f" (the image's build; the package pins {specs[0]})"
                )
            findings.append(
                _finding(
                    f"compat.{key}", "ok", f"{name} {have} matches {met or spec or req}{extra}"
                )
            )
    if python:
        spec = str(target.get("python", ""))
        if satisfies(python, spec) is False:
            findings.append(
                _finding(
                    "compat.python",
                    "fail",
                    f"Python {python}, vllm-ascend {target['vllm_ascend']} needs {spec}",
                    f"create a virtualenv with a Python in {spec} and reinstall the set",
                )
            )
        else:
            findings.append(_finding("compat.python", "ok", f"Python {python} is within {spec}"))
    if wrong or any(f["status"] == "fail" for f in findings):
        findings.append(
            _finding(
                "compat.install-set",
                "fail",
                f"the installed stack is not one row of the matrix "
                f"(target vllm-ascend {target['vllm_ascend']}, CANN {row_cann(target, hardware)})",
                pip_command(target, hardware=hardware) + "; then run: python -m pip check",
            )
        )
    return findings


# ----------------------------------------------------------------------------- driver pairing


def _train_match(driver: str, train: str) -> bool:
    d, t = driver.lower(), train.lower()
    return d == t or d.startswith(t + ".")


def cann_release(spec: str) -> str | None:
    """The CANN version a matrix cell names (``8.0.0 (Dockerfile)``, ``>=8.0.RC2``)."""
    spec = str(spec or "")
    exact = pinned_version(spec)
    if exact and is_version(exact):
        return exact
    bound = re.match(r"^\s*>=?\s*([0-9][\w.]*)\s*$", spec)
    return bound.group(1) if bound and is_version(bound.group(1)) else None


def oldest_driver(cann: str) -> tuple[str, str] | None:
    """The oldest HDK that ``cann`` accepts and the CANN release that states it.

    Monotonic rule: no CANN release accepts an older HDK than its predecessor, so the floor
    is the highest ``oldest`` stated for ``cann`` or any earlier release (also for CANN
    releases the table does not list).
    """
    if not is_version(cann):
        return None
    best: tuple[str, str] | None = None
    for pairing in HDK_PAIRINGS:
        oldest = pairing["oldest"]
        if not oldest or version_key(pairing["cann"]) > version_key(cann):
            continue
        if best is None or version_key(oldest) > version_key(best[0]):
            best = (oldest, pairing["cann"])
    return best


def driver_supports_cann(driver_version: str, cann: str) -> bool | None:
    """Published pairing of driver (HDK) ``driver_version`` with ``cann``.

    True: listed in a release note; False: older than the oldest HDK the release (or an
    earlier one, by the monotonic rule) accepts; None: no published statement (a driver
    newer than the note, a CANN release without a note).
    """
    if not is_version(driver_version) or not is_version(cann):
        return None
    for pairing in HDK_PAIRINGS:
        if same_release(pairing["cann"], cann) and any(
            _train_match(driver_version, t) for t in pairing["trains"]
        ):
            return True
    floor = oldest_driver(cann)
    if floor and version_key(driver_version) < version_key(floor[0]):
        return False
    return None


def pairing_source(cann: str) -> str | None:
    """Where the published pairing for ``cann`` comes from."""
    for pairing in HDK_PAIRINGS:
        if is_version(cann) and same_release(pairing["cann"], cann):
            return pairing["source"]
    floor = oldest_driver(cann)
    if floor:
        return f"not listed; oldest HDK {floor[0]} from CANN {floor[1]} (monotonic rule)"
    return None


def pairing_note(driver: str, cann: str) -> str | None:
    """A warning when ``driver`` with ``cann`` is not published (None when it is, or too old)."""
    if driver_supports_cann(driver, cann) is not None:
        return None
    listed = next(
        (p["trains"] for p in HDK_PAIRINGS if is_version(cann) and same_release(p["cann"], cann)),
        [],
    )
    return (
        f"driver {driver} with CANN {cann}: pairing not published"
        + (f" (the release notes list HDK {', '.join(listed)})" if listed else "")
        + f"; source: {pairing_source(cann) or 'none'}"
    )


def describe_row(
    row: dict,
    hardware: str,
    os_variant: str | None = None,
    registry: str = DEFAULT_REGISTRY,
    matrix: dict | None = None,
) -> dict:
    """A matrix row completed like ``resolve`` completes its answer (CANN, image, pins);
    ``image`` is None when upstream built none for the hardware (the note says why)."""
    out = dict(row)
    image, no_image = built_image(row, hardware, os_variant, registry, matrix)
    out.update(
        {
            "hardware": hardware,
            "cann": row_cann(row, hardware),
            "image": image,
            "image_built": image is not None,
            "pins": pins(row, hardware),
            "pip": pip_command(row, hardware=hardware),
            "notes": site_note(row, matrix)
            + ([no_image] if no_image else [])
            + host_install_notes(row, hardware),
        }
    )
    return out


def resolve_pinned(
    vllm_ascend: str,
    hardware: str = "a2",
    os_variant: str | None = None,
    registry: str = DEFAULT_REGISTRY,
    matrix: dict | None = None,
) -> dict:
    """The row of an operator-pinned vllm-ascend release, refused when it lacks the hardware."""
    row = find_row(vllm_ascend, matrix)
    if row is None:
        raise InputError(
            f"vllm-ascend {vllm_ascend} is not in the compatibility matrix; "
            "pick a release of the matrix (ascend-deploy compat resolve --driver VER names the "
            "one a driver runs) or unset the pin"
        )
    if not hardware_support(row, hardware)[0]:
        listed = row.get("hardware")
        lists = (
            f"it lists {', '.join(map(str, listed))}"
            if isinstance(listed, list) and listed
            else "a tag outside the official matrix: its supported hardware is not published"
        )
        raise CheckFailed(
            f"vllm-ascend {row['vllm_ascend']} does not support hardware {hardware} "
            f"({lists}); pin another release"
        )
    return describe_row(row, hardware, os_variant, registry, matrix)


def check_pin_against_driver(row: dict, driver: str) -> dict:
    """``row`` (a pinned release, as ``resolve_pinned`` gives it) checked against the host's
    driver: CheckFailed when the driver is older than the oldest HDK its CANN accepts; a note
    when no pairing is published."""
    validate_driver(driver)
    cann = row.get("cann")
    ok = driver_supports_cann(driver, cann) if cann else None
    if ok is False:
        floor = oldest_driver(cann)
        raise CheckFailed(
            f"vllm-ascend {row['vllm_ascend']} is built on CANN {cann}, which needs NPU driver "
            f"{floor[0] if floor else '?'} or newer (CANN {floor[1] if floor else '?'} release "
            f"notes); driver {driver} cannot run it. Fix: unpin the release (ascend-deploy "
            f"compat resolve --driver {driver} names the newest one this driver runs), or "
            "upgrade the driver and firmware"
        )
    out = dict(row, driver=driver)
    note = pairing_note(driver, cann) if cann else None
    graph = graph_mode_hdk_note(row["vllm_ascend"], driver)
    added = [n for n in (note, graph) if n]
    if added:
        out["notes"] = [*row.get("notes", []), *added]
    if graph:
        out["hdk_graph_note"] = graph
    return out


def resolve_for_driver(
    driver: str | None,
    hardware: str = "a2",
    python: str | None = None,
    allow_rc: bool = False,
    os_variant: str | None = None,
    registry: str = DEFAULT_REGISTRY,
    matrix: dict | None = None,
) -> dict:
    """Newest release whose CANN the host's NPU driver can run (container mode: CANN is in
    the image). Releases skipped for the driver are listed in ``skipped_for_driver``; a
    pairing that is not published is kept with a note (``driver_pairing``: published,
    unpublished or unknown), naming the newest release whose pairing is published. None
    runnable is CheckFailed naming the HDK to upgrade to.
    """
    validate_driver(driver)
    _validate_options(hardware, python, os_variant)
    rows = [r for r in load_matrix(matrix) if image_built(r, hardware, matrix)]
    if not allow_rc:
        rows = [r for r in rows if not is_prerelease(r["vllm_ascend"])]
    if python and rows and all(satisfies(python, r.get("python", "")) is False for r in rows):
        specs = sorted({str(r.get("python")) for r in rows if r.get("python")})
        raise CheckFailed(
            f"no vllm-ascend release for {hardware} supports Python {python} (the releases "
            f"support {', '.join(specs)}); the driver is not the constraint: use a listed Python"
        )
    rows.sort(key=lambda r: version_key(r["vllm_ascend"]), reverse=True)
    refused: list[str] = []
    floors: list[tuple[str, str, str]] = []  # (oldest HDK, CANN, release) of refused rows
    seen: set[str] = set()
    found: dict | None = None
    verdict: bool | None = None
    published_alt: str | None = None
    for row in rows:
        cann = row_cann(row, hardware)
        if cann in seen:
            continue
        seen.add(cann)
        release = cann_release(cann) or cann
        ok = driver_supports_cann(driver, release) if driver else None
        if ok is False:
            refused.append(f"{row['vllm_ascend']} (CANN {cann})")
            floor = oldest_driver(release)
            if floor:
                floors.append((floor[0], release, row["vllm_ascend"]))
            continue
        try:
            candidate = resolve(
                cann,
                hardware,
                python=python,
                allow_rc=allow_rc,
                os_variant=os_variant,
                registry=registry,
                matrix=matrix,
            )
        except CheckFailed:
            continue
        if candidate["image"] is None:  # this CANN's preferred release has no image
            continue
        if found is None:
            found, verdict = candidate, ok
            if ok is True or not driver:
                break
        elif ok is True:
            published_alt = f"{candidate['vllm_ascend']} (CANN {candidate['cann']})"
            break
    if found is None:
        raise CheckFailed(_no_release_for_driver(driver, hardware, refused, floors))
    notes = found.setdefault("notes", [])
    if refused:
        notes.append(
            f"driver {driver} is too old for {', '.join(refused[:3])}; picked CANN {found['cann']}"
        )
    found["skipped_for_driver"] = refused
    found["driver_pairing"] = "unknown" if not driver else "published" if verdict else "unpublished"
    if driver and verdict is None:
        note = pairing_note(driver, cann_release(found["cann"]) or found["cann"])
        if note:
            if published_alt:
                note += f"; newest release with a published pairing: {published_alt}"
            notes.append(note)
            found["driver_note"] = note
    graph = graph_mode_hdk_note(found["vllm_ascend"], driver)
    if graph:
        notes.append(graph)
        found["hdk_graph_note"] = graph
    return found


# Upstream known issue: from v0.21.0rc1 the default graph mode is FULL_AND_PIECEWISE, which
# "requires HDK 25.5.1+ / CANN 8.5.0+"; older stacks "may cause graph capture failures or fallback
# to PIECEWISE" (release notes, v0.21.0rc1 section:
# https://github.com/vllm-project/vllm-ascend/blob/main/docs/source/user_guide/release_notes.md).
FULL_GRAPH_SINCE = "v0.21.0rc1"
FULL_GRAPH_MIN_HDK = "25.5.1"


def graph_mode_hdk_note(
    vllm_ascend: str | None, driver: str | None, enforce_eager: bool = False
) -> str | None:
    """The warning for a release whose default graph mode needs a newer HDK than ``driver``;
    None when the release is older, the driver new enough, either unknown, or eager."""
    if enforce_eager or not vllm_ascend or not driver:
        return None
    try:
        if version_key(vllm_ascend) < version_key(FULL_GRAPH_SINCE):
            return None
        if version_key(driver) >= version_key(FULL_GRAPH_MIN_HDK):
            return None
    except ValueError:
        return None
    return (
        f"vllm-ascend {vllm_ascend} captures graphs in FULL_AND_PIECEWISE mode by default, which "
        f"needs HDK (NPU driver) {FULL_GRAPH_MIN_HDK} or newer (known issue in the "
        f"{FULL_GRAPH_SINCE} release notes: older stacks may fail graph capture or fall back to "
        f"PIECEWISE); driver {driver} is older. Fix: upgrade the driver and firmware to HDK "
        f"{FULL_GRAPH_MIN_HDK}+, or serve eager (vllm_service_enforce_eager: true; CLI "
        "--enforce-eager)"
    )


_DRIVER_VERSION = re.compile(r"\d{1,2}\.\d+\.(?:\d+|rc\d+)(?:\.[0-9a-z]+)*", re.IGNORECASE)


def validate_driver(driver: str | None) -> None:
    """InputError unless ``driver`` (None: not given) looks like an NPU driver (HDK) version."""
    if driver is None:
        return
    if not isinstance(driver, str) or not _DRIVER_VERSION.fullmatch(driver.strip()):
        raise InputError(
            f"--driver {driver!r} is not an NPU driver (HDK) version (examples: 25.2.0, "
            "24.1.RC3, 23.0.3). Fix: pass the host's version as `ascend-deploy versions` or "
            "`npu-smi info` prints it, without a leading v"
        )


def upgrade_advice(driver: str, hardware: str = "a2", matrix: dict | None = None) -> str | None:
    """The HDK upgrade that lets ``driver``'s host run an image (None when one runs now)."""
    try:
        resolve_for_driver(driver, hardware, matrix=matrix)
    except InputError:
        return None  # a version string this table cannot read: no advice rather than a wrong one
    except CheckFailed as exc:
        return str(exc).split("; ", 1)[-1]
    return None


def _no_release_for_driver(
    driver: str | None, hardware: str, refused: list[str], floors: list[tuple[str, str, str]]
) -> str:
    """'Driver too old for every image' with the HDK to upgrade to."""
    msg = (
        f"no vllm-ascend release for {hardware} runs on driver {driver}: "
        f"{', '.join(refused) or 'none listed'}"
    )
    if floors:
        newest = floors[0]
        lowest = min(floors, key=lambda f: version_key(f[0]))
        listed = [
            t
            for p in HDK_PAIRINGS
            if same_release(p["cann"], newest[1])
            for t in p["trains"]
            if is_version(t)
        ]
        target = (
            f"{max(listed, key=version_key)} (published for CANN {newest[1]})"
            if listed
            else f"{newest[0]} or newer (CANN {newest[1]})"
        )
        msg += (
            f"; upgrade the NPU driver and firmware (Ascend HDK; firmware, then driver, then "
            f"reboot) to {target} for {newest[2]}"
        )
        if lowest[0] != newest[0]:
            msg += f", at least {lowest[0]} for {lowest[2]} (CANN {lowest[1]})"
    else:
        msg += "; upgrade the NPU driver and firmware"
    return msg
