"""Read a Hugging Face model directory: config.json, the safetensors index, shard headers.

Standard library only. Used by the planner (weight sizes, architecture), the converter
(which tensors live where) and the simulator (what to load).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field

from ..errors import InputError
from .safetensors_header import SafetensorsHeader, TensorInfo, read_header

INDEX_NAME = "model.safetensors.index.json"
SINGLE_NAME = "model.safetensors"
MODELSLIM_DESCRIPTION = "quant_model_description.json"


def read_json_file(path: str, what: str) -> dict:
    """Load a JSON object from ``path``; InputError names the file and the problem."""
    try:
        with open(path, "rb") as fh:
            raw = fh.read()
    except FileNotFoundError:
        raise InputError(f"{path}: {what} not found") from None
    except IsADirectoryError:
        raise InputError(f"{path}: is a directory, expected {what}") from None
    except PermissionError:
        raise InputError(f"{path}: permission denied reading {what}") from None
    if not raw.strip():
        raise InputError(f"{path}: {what} is empty")
    try:
        doc = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise InputError(f"{path}: {what} is not valid JSON ({exc})") from None
    except RecursionError:
        raise InputError(f"{path}: {what} is nested too deeply to be valid") from None
    if not isinstance(doc, dict):
        raise InputError(f"{path}: {what} must be a JSON object, got {type(doc).__name__}")
    return doc


def load_config(model_dir: str) -> dict:
    """The model's ``config.json`` as a dict."""
    if os.path.isfile(model_dir):
        raise InputError(
            f"{model_dir}: is a file; pass the model directory that holds it "
            f"({os.path.dirname(model_dir) or '.'})"
        )
    if not os.path.isdir(model_dir):
        raise InputError(f"{model_dir}: model directory not found")
    return read_json_file(os.path.join(model_dir, "config.json"), "config.json")


@dataclass
class WeightLayout:
    """Where each tensor of a model lives."""

    model_dir: str
    index: dict | None  # the parsed index file, or None for a single model.safetensors
    shards: list[str]  # file names relative to model_dir, in index order
    weight_map: dict[str, str]  # tensor name -> shard file name
    headers: dict[str, SafetensorsHeader] = field(default_factory=dict)

    def tensor(self, name: str) -> TensorInfo:
        return self.headers[self.weight_map[name]].tensors[name]

    def tensors(self) -> list[tuple[str, TensorInfo]]:
        """Every tensor as (shard, info), shard by shard in file order."""
        out = []
        for shard in self.shards:
            out.extend((shard, info) for info in self.headers[shard].tensors.values())
        return out

    @property
    def total_bytes(self) -> int:
        return sum(info.nbytes for _, info in self.tensors())


def _other_weight_files(model_dir: str) -> tuple[str | None, list[str]]:
    """An index and the shards under other names (ModelSlim's ``quant_model_weight_*``).

    vLLM loads every ``*.safetensors`` of the directory and uses an index only to drop
    duplicates, so a directory with one ``*.safetensors.index.json`` (any name) or only
    ``*.safetensors`` files is a checkpoint too: ``quant_model_weight_w8a8.safetensors``,
    ``quant_model_weight_w4a8_dynamic-00001-of-00002.safetensors`` (+ its index).
    """
    names = sorted(os.listdir(model_dir))
    indexes = [n for n in names if n.endswith(".safetensors.index.json")]
    if len(indexes) > 1:
        raise InputError(
            f"{model_dir}: several safetensors indexes ({', '.join(indexes)}); "
            "keep the one that belongs to the weights"
        )
    shards = [n for n in names if n.endswith(".safetensors") and not n.startswith(".")]
    return (indexes[0] if indexes else None), shards


def read_weight_layout(model_dir: str) -> WeightLayout:
    """Read the index (or the single file) and every shard header, cross-checked.

    ``model.safetensors.index.json`` or ``model.safetensors`` first; otherwise the one
    ``*.safetensors.index.json`` or every ``*.safetensors`` file (ModelSlim's names).
    Errors: no weights at all, index not JSON or without ``weight_map``, a shard listed
    in the index but missing, a tensor in the index but not in its shard, a tensor in two
    shards, and every header problem ``read_header`` reports.
    """
    if not os.path.isdir(model_dir):
        raise InputError(f"{model_dir}: model directory not found")
    index_path = os.path.join(model_dir, INDEX_NAME)
    single_path = os.path.join(model_dir, SINGLE_NAME)
    index_name = INDEX_NAME
    if not os.path.exists(index_path) and not os.path.exists(single_path):
        other_index, other_shards = _other_weight_files(model_dir)
        if other_index:
            index_name, index_path = other_index, os.path.join(model_dir, other_index)
        elif other_shards:
            return _layout_of_files(model_dir, other_shards)
    if os.path.exists(index_path):
        index = read_json_file(index_path, "safetensors index")
        weight_map = index.get("weight_map")
        if not isinstance(weight_map, dict) or not weight_map:
            raise InputError(f"{index_path}: no 'weight_map' object in the safetensors index")
        shards: list[str] = []
        for name, shard in weight_map.items():
            if not isinstance(shard, str) or "/" in shard or shard.startswith("."):
                raise InputError(f"{index_path}: tensor {name!r} maps to invalid file {shard!r}")
            if shard not in shards:
                shards.append(shard)
        layout = WeightLayout(model_dir, index, shards, dict(weight_map))
        for shard in shards:
            path = os.path.join(model_dir, shard)
            if not os.path.exists(path):
                raise InputError(
                    f"{path}: shard listed in {index_name} is missing; copy the complete model"
                )
            layout.headers[shard] = read_header(path)
        for name, shard in weight_map.items():
            if name not in layout.headers[shard].tensors:
                raise InputError(
                    f"{os.path.join(model_dir, shard)}: tensor {name!r} is listed in "
                    f"{index_name} but not present in this shard"
                )
        return layout
    if os.path.exists(single_path):
        header = read_header(single_path)
        weight_map = {name: SINGLE_NAME for name in header.tensors}
        layout = WeightLayout(model_dir, None, [SINGLE_NAME], weight_map)
        layout.headers[SINGLE_NAME] = header
        return layout
    raise InputError(
        f"{model_dir}: no {INDEX_NAME}, no {SINGLE_NAME} and no other *.safetensors; "
        "expected a Hugging Face safetensors model directory"
    )


def weights_on_disk(model_dir: str) -> tuple[bool, int | None]:
    """(every weight file is there, the index's ``metadata.total_size`` or None), without
    reading a shard: what ``plan`` needs to decide between the shard headers and an estimate
    from config.json (weights not downloaded yet, or only partly)."""
    names = set(os.listdir(model_dir)) if os.path.isdir(model_dir) else set()
    index_name = INDEX_NAME if INDEX_NAME in names else None
    if index_name is None and SINGLE_NAME not in names:
        index_name, shards = _other_weight_files(model_dir)
        if index_name is None:
            return bool(shards), None
    if index_name is None:
        return True, None  # a single model.safetensors
    index = read_json_file(os.path.join(model_dir, index_name), "safetensors index")
    total = (index.get("metadata") or {}).get("total_size")
    total = total if isinstance(total, int) and not isinstance(total, bool) and total > 0 else None
    weight_map = index.get("weight_map")
    shards = set(weight_map.values()) if isinstance(weight_map, dict) else set()
    return bool(shards) and all(isinstance(s, str) and s in names for s in shards), total


def _layout_of_files(model_dir: str, shards: list[str]) -> WeightLayout:
    """Every shard file without an index: the tensors of all of them, each name once."""
    layout = WeightLayout(model_dir, None, list(shards), {})
    for shard in shards:
        header = read_header(os.path.join(model_dir, shard))
        layout.headers[shard] = header
        for name in header.tensors:
            if name in layout.weight_map:
                raise InputError(
                    f"{os.path.join(model_dir, shard)}: tensor {name!r} is also in "
                    f"{layout.weight_map[name]}; remove the duplicate weight file"
                )
            layout.weight_map[name] = shard
    return layout
