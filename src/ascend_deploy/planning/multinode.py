"""Plan one vLLM-Ascend deployment over several hosts (a *group*): DP x TP (x EP), argv, env.

Standard library only. Inputs: the model directory (config.json is enough: weights not on
disk are sized by ``model.estimate``), the group's members as the single-host planner sees a
host (name, the address and NIC the HCCL/Gloo traffic uses, its NPUs with HBM total and in
use) and the serving rules. Output: one dict with the chosen layout and, per member, the
complete ``vllm serve`` argv and environment. Nothing here starts anything.

Launch shape (vLLM "Data Parallel Deployment", multi-node;
https://docs.vllm.ai/en/latest/serving/data_parallel_deployment/ and the vLLM-Ascend
DeepSeek-R1 multi-node recipe,
https://docs.vllm.ai/projects/ascend/en/latest/tutorials/models/DeepSeek-R1.html):

* every member runs one ``vllm serve`` holding ``L = chips / TP`` DP ranks:
  ``--data-parallel-size N --data-parallel-size-local L --data-parallel-address LEADER_IP
  --data-parallel-rpc-port P --tensor-parallel-size T``;
* the leader (the first member, or the one named) also serves the API; every other member
  adds ``--headless --data-parallel-start-rank R`` with R = the DP ranks of the members
  before it;
* env per member: ``HCCL_IF_IP`` = the member's own address, ``GLOO_SOCKET_IFNAME``,
  ``TP_SOCKET_IFNAME``, ``HCCL_SOCKET_IFNAME`` = its NIC, ``HCCL_BUFFSIZE`` (200, the
  recipe's), ``OMP_PROC_BIND=false``, ``OMP_NUM_THREADS=1``, plus the serving rules' env.

With ``backend="ray"`` (vLLM-Ascend "Ray distributed" tutorial,
https://docs.vllm.ai/projects/ascend/en/latest/tutorials/features/ray.html) the TP group stays
inside a host and PP spans the hosts (TP x PP = every chip); only the leader runs ``vllm
serve --distributed-executor-backend ray``, every member gets its ``ray start`` argv.
PP is planned only with Ray, as vLLM-Ascend documents it.

Layout choice, in order:

1. A pinned ``tp`` (and ``dp`` / ``pp``) is checked, never changed: a TP that does not divide
   the attention heads (or is neither a divisor nor a multiple of the KV heads; MLA: heads
   only), DP x TP (x PP) not equal to the chips offered, a TP group crossing hosts, or
   members with unequal chip counts is refused (InputError, exit 2) listing the valid shapes.
2. A documented recipe for the model family, hardware and group shape (``RECIPES``) wins
   when it is valid and fits. DeepSeek-R1/V3 (``deepseek_v3``) on 2 x Atlas 800 A2 (8 x
   64 GB) is **DP4 x TP4 with expert parallel over all 16 ranks**: the DeepSeek-R1 guide
   runs exactly that and advises DP4/TP4 over DP2/TP8. Why: MLA caches one latent per token
   that every TP rank holds whole (``memory``), so a larger TP buys no KV room and only adds
   all-reduces to every layer; DP ranks each own their KV cache and batch (4 caches, not 2),
   while the experts are spread over DP x TP = 16 ranks either way (the MoE weights per NPU
   are the same). TP 4 also keeps every TP group inside one host's HCCS.
3. Otherwise the smallest valid TP that fits in one host's HBM (and divides its chip count);
   DP takes every remaining chip. For MoE models expert parallel is on whenever DP x TP > 1
   (``--enable-expert-parallel`` on every member, as vLLM requires in the multi-node case).

Memory per NPU is the single-host model (``memory.MemoryModel``) with the weights split as
the layout splits them: expert weights over DP x TP (EP) ranks, everything else over TP;
with PP, layers over PP stages. The expert share is estimated from config.json (routed
experts x 3 x hidden x moe_intermediate per MoE layer over ``model.estimate``'s count).
"""

from __future__ import annotations

import ipaddress
import math
import re
import shlex
from collections.abc import Sequence

from ..errors import CheckFailed, InputError
from ..model.estimate import parameter_counts
from ..model.info import inspect_model
from ..model.tp_heads import facts_tp_sizes, tp_head_failure
from .layout import container_visible_devices, hccl_base_port, planned_env
from .memory import DEFAULT_MODEL, MemoryModel, profiles_memory
from .plan import kv_replication_notes, serve_flags
from .rules import check_rules, shipped_rules
from .tp import Sizing, size_for_tp
from .validation import check_model, hardware_entry, vllm_ascend_version

__all__ = ["RECIPES", "describe_group", "group_tp_sizes", "load_members", "plan_group"]

BACKENDS = ("mp", "ray")
DEFAULT_RPC_PORT = 13389  # the DeepSeek-R1 multi-node recipe's --data-parallel-rpc-port
DEFAULT_HCCL_BUFFSIZE = 200  # MB; the recipe's HCCL_BUFFSIZE and CANN's default
RAY_HEAD_PORT = 6379
_NIC = re.compile(r"^[A-Za-z0-9_.:-]{1,15}$")  # Linux IFNAMSIZ - 1

# Documented multi-node layouts. ``match``: model_type, hardware, members, chips per member,
# backend. ``env``: what the recipe exports besides the per-member network variables.
RECIPES: tuple[dict, ...] = (
    {
        "name": "DeepSeek-R1-W8A8 on 2 x Atlas 800 A2 (64G x 8), multi-node DP",
        "match": {
            "model_type": "deepseek_v3",
            "hardware": "a2",
            "members": 2,
            "chips": 8,
            "backend": "mp",
        },
        "dp": 4,
        "tp": 4,
        "pp": 1,
        "why": "the guide advises DP4 x TP4 over DP2 x TP8: MLA's latent KV is whole on every "
        "TP rank, so DP ranks (each its own KV cache and batch) beat a larger TP; the "
        "experts spread over all 16 ranks either way",
        "env": {
            "PYTORCH_NPU_ALLOC_CONF": "expandable_segments:True",
            "VLLM_ASCEND_BALANCE_SCHEDULING": "1",
            "HCCL_INTRA_PCIE_ENABLE": "1",
            "HCCL_INTRA_ROCE_ENABLE": "0",
        },
        "source": (
            "https://docs.vllm.ai/projects/ascend/en/latest/tutorials/models/DeepSeek-R1.html "
            "(github.com/vllm-project/vllm-ascend docs/source/tutorials/models/DeepSeek-R1.md)"
        ),
    },
    {
        "name": "Qwen3-235B-A22B on 2 nodes with Ray (TP8 x PP2)",
        "match": {
            "model_type": "qwen3_moe",
            "hardware": "a2",
            "members": 2,
            "chips": 8,
            "backend": "ray",
        },
        "dp": 1,
        "tp": 8,
        "pp": 2,
        "why": "the Ray tutorial's layout: TP 8 inside each node over HCCS, PP 2 across the "
        "nodes (pipeline stages exchange activations once per stage, not per layer)",
        "env": {},
        "source": "https://docs.vllm.ai/projects/ascend/en/latest/tutorials/features/ray.html "
        "(github.com/vllm-project/vllm-ascend docs/source/tutorials/features/ray.md)",
    },
)


# --------------------------------------------------------------------------- members


def _bad(where: str, what: str) -> InputError:
    return InputError(f"{where}: {what}")


def load_members(data: object, where: str = "members") -> tuple[list[dict], str | None]:
    """The members of a group file, validated and normalised, and its named leader.

    ``data`` is ``{"leader": name?, "members": [...]}`` or the list alone. A member is
    ``{"name", "address", "nic", "chips": [{"npu", "hbm_total_mb", "hbm_used_mb"?}]}`` or,
    shorter, ``{"name", "address", "nic", "npus": 8 | [ids], "hbm_total_mb",
    "hbm_used_mb"?}``; ``hardware`` (a2, a3, ...) is optional. InputError names the value.
    """
    leader = None
    if isinstance(data, dict):
        leader = data.get("leader")
        if leader is not None and not isinstance(leader, str):
            raise _bad(where, f"leader must be a member name, got {leader!r}")
        data = data.get("members")
    if not isinstance(data, list) or not data:
        raise _bad(where, "needs a non-empty list 'members'")
    out, names = [], set()
    for i, raw in enumerate(data):
        at = f"{where}: members[{i}]"
        if not isinstance(raw, dict):
            raise InputError(f"{at} must be an object, got {raw!r}")
        name = raw.get("name")
        if not isinstance(name, str) or not name.strip():
            raise InputError(f"{at}.name must be a host name, got {name!r}")
        if name in names:
            raise InputError(f"{at}.name {name!r} appears twice")
        names.add(name)
        address = raw.get("address")
        try:
            ip = ipaddress.IPv4Address(str(address))
        except ValueError:
            raise InputError(
                f"{at}.address must be the IPv4 address of the NIC HCCL and Gloo use on "
                f"{name}, got {address!r}"
            ) from None
        nic = raw.get("nic")
        if not isinstance(nic, str) or not _NIC.match(nic):
            raise InputError(f"{at}.nic must be a network interface name (eth0), got {nic!r}")
        hw = raw.get("hardware")
        if hw is not None and not isinstance(hw, str):
            raise InputError(f"{at}.hardware must be a string (a2, a3), got {hw!r}")
        out.append(
            {
                "name": name,
                "address": str(ip),
                "nic": nic,
                "hardware": hw.lower() if hw else None,
                "chips": _chips(raw, at),
            }
        )
    if leader is not None and leader not in names:
        raise _bad(where, f"leader {leader!r} is not a member ({', '.join(sorted(names))})")
    return out, leader


def _whole(value: object, at: str, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise InputError(f"{at} must be a whole number >= {minimum}, got {value!r}")
    return value


def _chips(raw: dict, at: str) -> list[dict]:
    chips = raw.get("chips")
    if chips is None:
        npus = raw.get("npus")
        if isinstance(npus, list):
            ids = [_whole(n, f"{at}.npus[]", 0) for n in npus]
        else:
            ids = list(range(_whole(npus, f"{at}.npus", 1)))
        total = _whole(raw.get("hbm_total_mb"), f"{at}.hbm_total_mb", 1)
        used = _whole(raw.get("hbm_used_mb", 0), f"{at}.hbm_used_mb", 0)
        chips = [{"npu": i, "hbm_total_mb": total, "hbm_used_mb": used} for i in ids]
    if not isinstance(chips, list) or not chips:
        raise InputError(f"{at}.chips must be a non-empty list (or give npus + hbm_total_mb)")
    out = []
    for j, chip in enumerate(chips):
        if not isinstance(chip, dict):
            raise InputError(f"{at}.chips[{j}] must be an object, got {chip!r}")
        out.append(
            {
                "npu": _whole(chip.get("npu", j), f"{at}.chips[{j}].npu", 0),
                "hbm_total_mb": _whole(
                    chip.get("hbm_total_mb"), f"{at}.chips[{j}].hbm_total_mb", 1
                ),
                "hbm_used_mb": _whole(
                    chip.get("hbm_used_mb", 0), f"{at}.chips[{j}].hbm_used_mb", 0
                ),
            }
        )
    ids = [c["npu"] for c in out]
    if len(set(ids)) != len(ids):
        raise InputError(f"{at}: NPU ids repeat ({ids})")
    return out


# --------------------------------------------------------------------------- shapes


def group_tp_sizes(facts: dict) -> list[int]:
    """TP sizes vLLM accepts for the model (``model.tp_heads``, the single-host planner's rule):
    they divide the attention heads, and divide the KV heads or are a multiple of them (vLLM
    then replicates KV heads, as the Qwen3-235B recipes at TP 8 / 16 with 4 KV heads do); MLA
    splits only the heads."""
    return facts_tp_sizes(facts)


def _shapes(valid: list[int], members: int, chips: int, backend: str) -> list[tuple[int, int, int]]:
    """Every (dp, tp, pp) that uses all ``members x chips`` chips with TP inside a host."""
    out = []
    for t in valid:
        if t > chips or chips % t:
            continue
        if backend == "mp":
            out.append((members * chips // t, t, 1))
        elif t == chips:  # ray: TP fills a host, PP over the hosts
            out.append((1, t, members))
    return out


def _shape_text(shapes: list[tuple[int, int, int]]) -> str:
    return ", ".join(f"DP{d} x TP{t}" + (f" x PP{p}" if p > 1 else "") for d, t, p in shapes)


# --------------------------------------------------------------------------- memory


def expert_fraction(facts: dict) -> float:
    """Share of the parameters in routed experts (0 for dense models), from config.json."""
    moe = facts.get("moe")
    if not moe:
        return 0.0
    layers = facts["num_hidden_layers"] - moe.get("first_dense_layers", 0)
    inter = moe.get("moe_intermediate_size") or facts.get("intermediate_size") or 0
    experts = layers * moe["experts"] * 3 * facts["hidden_size"] * inter
    total = parameter_counts(facts)["total"]
    return min(1.0, experts / total) if total else 0.0


def _sizing_facts(facts: dict, dp: int, tp: int, pp: int, ep: bool) -> dict:
    """``facts`` with the weight bytes and layers one NPU holds under the layout, in the
    form ``MemoryModel.budget`` divides by TP: experts over DP x TP when EP is on."""
    served = facts["weight_bytes_served"]
    if ep:
        share = expert_fraction(facts)
        served = int(served * (1 - share) + served * share / dp)
    return {
        **facts,
        "weight_bytes_served": -(-served // pp),
        "num_hidden_layers": math.ceil(facts["num_hidden_layers"] / pp),
    }


# --------------------------------------------------------------------------- plan


def plan_group(
    model_dir: str,
    members: Sequence[dict],
    leader: str | None = None,
    backend: str = "mp",
    tp: int | None = None,
    dp: int | None = None,
    pp: int | None = None,
    hardware: str | None = None,
    vllm_ascend: str | None = None,
    max_model_len: int | None = None,
    max_num_seqs: int | None = None,
    gpu_memory_utilization: float = 0.9,
    enforce_eager: bool = False,
    port: int = 8000,
    rpc_port: int = DEFAULT_RPC_PORT,
    hccl_buffsize_mb: int = DEFAULT_HCCL_BUFFSIZE,
    hccl_base_port: int | None = None,
    served_model_name: str | None = None,
    extra_args: list[str] | None = None,
    memory_model: MemoryModel | None = None,
    rules: dict | None = None,
) -> dict:
    """The group plan (see the module docstring). ``members`` as ``load_members`` returns
        them. InputError for bad values (a pinned shape that is not valid, unequal chip counts:
    the message lists the valid shapes), CheckFailed for groups that can never work; a layout
        that does not fit in HBM is ``feasible: False`` with ``reasons``."""
    if backend not in BACKENDS:
        raise InputError(f"backend {backend!r}: use one of {', '.join(BACKENDS)}")
    if not members:
        raise InputError("a group needs at least one member")
    if len(members) < 2:
        raise CheckFailed(
            f"group has 1 member ({members[0]['name']}): plan it with `ascend-deploy plan`"
        )
    for name, value in (("port", port), ("rpc port", rpc_port)):
        if not 1024 <= int(value) <= 65535:
            raise InputError(f"{name} {value} is outside 1024-65535")
    if port == rpc_port:
        raise InputError(f"the API port and the DP RPC port are both {port}")
    mm = memory_model or DEFAULT_MODEL
    rules = shipped_rules() if rules is None else check_rules(rules)
    hw_name = _group_hardware(members, hardware)
    hw_key, hw = hardware_entry(rules, hw_name, vllm_ascend)
    version = vllm_ascend_version(vllm_ascend) if vllm_ascend is not None else None

    counts = {m["name"]: len(m["chips"]) for m in members}
    if len(set(counts.values())) != 1:
        raise InputError(
            "members offer unequal chip counts ("
            + ", ".join(f"{n}: {c}" for n, c in counts.items())
            + "); the multi-node recipes run the same --data-parallel-size-local on every "
            "member: give each member the same number of NPUs "
            f"(e.g. {min(counts.values())} each)"
        )
    chips = next(iter(counts.values()))
    names = [m["name"] for m in members]
    lead = names.index(leader) if leader is not None else 0
    if leader is not None and leader not in names:
        raise InputError(f"leader {leader!r} is not a member ({', '.join(names)})")
    ordered = [members[lead], *[m for i, m in enumerate(members) if i != lead]]

    facts = inspect_model(model_dir, estimate=True)
    check_model(facts, model_dir, max_model_len)
    if facts["needs_conversion"]:
        facts_note = "FP8 weights are served as BF16 on this hardware (weight bytes double)"
    else:
        facts_note = None
    valid = group_tp_sizes(facts)
    shapes = _shapes(valid, len(members), chips, backend)
    if not shapes:
        raise CheckFailed(
            f"no TP size the model allows ({', '.join(map(str, valid))}) fits a host of "
            f"{chips} NPUs"
            + (" and fills it (Ray: TP = NPUs per host)" if backend == "ray" else "")
        )
    hbm_total = min(c["hbm_total_mb"] for m in members for c in m["chips"])
    hbm_used = max(c["hbm_used_mb"] for m in members for c in m["chips"])
    ep_possible = bool(facts["moe"])

    def sized(shape: tuple[int, int, int]) -> dict:
        d, t, p = shape
        ep = ep_possible and d * t > 1
        s = Sizing(
            _sizing_facts(facts, d, t, p, ep),
            mm,
            hbm_total,
            hbm_used,
            gpu_memory_utilization,
            enforce_eager,
            max_model_len,
            max_num_seqs,
            profiles_memory(vllm_ascend),
        )
        return {**size_for_tp(s, t), "dp": d, "pp": p, "ep": ep}

    notes: list[str] = []
    if facts_note:
        notes.append(facts_note)
    recipe = None
    if tp is not None or dp is not None or pp is not None:
        pinned = [
            s
            for s in shapes
            if (tp is None or s[1] == tp)
            and (dp is None or s[0] == dp)
            and (pp is None or s[2] == pp)
        ]
        if not pinned:
            want = " x ".join(
                f"{k}{v}" for k, v in (("DP", dp), ("TP", tp), ("PP", pp)) if v is not None
            )
            failure = None
            if tp is not None:
                failure = tp_head_failure(
                    facts["num_attention_heads"], facts["num_key_value_heads"], tp, facts["mla"]
                )
            raise InputError(
                f"{want} is not a valid layout for {facts['model_type']} "
                f"({facts['num_attention_heads']} heads, {facts['num_key_value_heads']} KV heads) "
                f"on {len(members)} members x {chips} NPUs ({backend}); "
                + (f'vLLM fails with "{failure}"; ' if failure else "")
                + f"valid: {_shape_text(shapes)}"
            )
        chosen = sized(pinned[0])
    else:
        recipe = _recipe(facts, hw_key, len(members), chips, backend)
        chosen = None
        if recipe and (recipe["dp"], recipe["tp"], recipe["pp"]) in shapes:
            attempt = sized((recipe["dp"], recipe["tp"], recipe["pp"]))
            if not attempt["reasons"]:
                chosen = attempt
                notes.append(f"layout from the documented recipe {recipe['name']}: {recipe['why']}")
            else:
                notes.append(f"recipe {recipe['name']} does not fit: {attempt['reasons'][0]}")
                recipe = None
        if chosen is None:
            recipe = None
            attempts = [sized(s) for s in shapes]
            fits = [a for a in attempts if not a["reasons"]]
            chosen = fits[0] if fits else attempts[-1]
            if fits:
                notes.append(
                    f"smallest TP that fits one NPU's HBM: TP {chosen['tp']}, DP takes the "
                    f"other chips (valid layouts: {_shape_text(shapes)})"
                )
    d, t, p = chosen["dp"], chosen["tp"], chosen["pp"]
    notes += kv_replication_notes(facts, t, chosen["budget"]["kv_bytes_per_token_per_npu"])
    local = chips // t if backend == "mp" else 0
    quant = "ascend" if facts["quant_method"] == "ascend" else None
    if hw.get("eager_only") and not enforce_eager:
        enforce_eager = True
        notes.append(f"{hw['name']} runs in eager mode only: --enforce-eager added")
    name = served_model_name or model_dir.rstrip("/").rsplit("/", 1)[-1]
    common = _flags(chosen, gpu_memory_utilization, hw, quant, enforce_eager, backend)
    hccl = rules.get("hccl_ports") or {"base": 60000, "stride_per_npu": 256}
    if hccl_base_port is not None:
        if not 1024 <= int(hccl_base_port) <= 65535:
            raise InputError(f"HCCL base port {hccl_base_port} is outside 1024-65535")
        hccl = {**hccl, "base": int(hccl_base_port)}
    base_env = planned_env(rules, t, version, hw_key)
    if recipe:
        base_env.update(recipe["env"])
    leader_ip = ordered[0]["address"]
    plans = []
    for index, m in enumerate(ordered):
        env = {
            **base_env,
            "HCCL_IF_IP": m["address"],
            "GLOO_SOCKET_IFNAME": m["nic"],
            "TP_SOCKET_IFNAME": m["nic"],
            "HCCL_SOCKET_IFNAME": m["nic"],
            "HCCL_BUFFSIZE": str(hccl_buffsize_mb),
            "OMP_PROC_BIND": "false",
            "OMP_NUM_THREADS": "1",
            "ASCEND_RT_VISIBLE_DEVICES": container_visible_devices(chips),
        }
        ids = [c["npu"] for c in m["chips"]]
        if t > 1:
            env["HCCL_IF_BASE_PORT"] = str(hccl_base_port_of(hccl, ids))
        entry = {
            "name": m["name"],
            "role": "leader" if index == 0 else "follower",
            "address": m["address"],
            "nic": m["nic"],
            "npus": ids,
            "devices": [f"/dev/davinci{i}" for i in ids],
            "env": env,
        }
        where = ["--host", "0.0.0.0", "--port", str(port), "--served-model-name", name]
        serve = ["vllm", "serve", model_dir, *where]
        if backend == "mp":
            start = index * local
            dp_flags = [
                "--data-parallel-size",
                str(d),
                "--data-parallel-size-local",
                str(local),
                "--data-parallel-address",
                leader_ip,
                "--data-parallel-rpc-port",
                str(rpc_port),
            ]
            if index:
                dp_flags = ["--headless", "--data-parallel-start-rank", str(start), *dp_flags]
            entry.update(
                {
                    "dp_ranks": list(range(start, start + local)),
                    "data_parallel_size_local": local,
                    "data_parallel_start_rank": start,
                    "argv": [*serve, *dp_flags, *common, *(extra_args or [])],
                }
            )
        else:
            env["RAY_EXPERIMENTAL_NOSET_ASCEND_RT_VISIBLE_DEVICES"] = "1"
            ray = (
                [
                    "ray",
                    "start",
                    "--head",
                    f"--port={RAY_HEAD_PORT}",
                    f"--node-ip-address={m['address']}",
                ]
                if index == 0
                else [
                    "ray",
                    "start",
                    f"--address={leader_ip}:{RAY_HEAD_PORT}",
                    f"--node-ip-address={m['address']}",
                ]
            )
            entry.update(
                {
                    "pp_stage": index,
                    "ray_start": ray,
                    "argv": [*serve, *common, *(extra_args or [])] if index == 0 else None,
                }
            )
        entry["command"] = shlex.join(entry["argv"]) if entry["argv"] else None
        plans.append(entry)
    ports = {"api": port, "hccl_base": hccl["base"], "hccl_stride_per_npu": hccl["stride_per_npu"]}
    if backend == "mp":
        ports["data_parallel_rpc"] = rpc_port
    else:
        ports["ray_head"] = RAY_HEAD_PORT
    return {
        "model_dir": model_dir,
        "model": {
            k: facts[k]
            for k in (
                "model_type",
                "num_hidden_layers",
                "num_attention_heads",
                "num_key_value_heads",
                "attention",
                "moe",
                "quant_method",
                "weight_bytes_served",
                "weights_source",
            )
        },
        "hardware": hw_key,
        "backend": backend,
        "members": len(ordered),
        "chips_per_member": chips,
        "leader": ordered[0]["name"],
        "leader_address": leader_ip,
        "dp": d,
        "tp": t,
        "pp": p,
        "expert_parallel": chosen["ep"],
        "world_size": d * t * p,
        "valid_layouts": _shape_text(shapes),
        "recipe": {"name": recipe["name"], "source": recipe["source"]} if recipe else None,
        "memory": chosen["budget"],
        "max_model_len": chosen["max_model_len"],
        "max_num_seqs": chosen["max_num_seqs"],
        "ports": ports,
        "feasible": not chosen["reasons"],
        "reasons": chosen["reasons"],
        "notes": notes,
        "member_plans": plans,
    }


def hccl_base_port_of(hccl: dict, npu_ids: list[int]) -> int:
    """The member's HCCL_IF_BASE_PORT (the single-host rule: base + first NPU x stride)."""
    return hccl_base_port(hccl, npu_ids)


def _group_hardware(members: Sequence[dict], hardware: str | None) -> str:
    kinds = {m["hardware"] for m in members if m.get("hardware")}
    if len(kinds) > 1:
        raise CheckFailed(
            "members are different hardware ("
            + ", ".join(f"{m['name']}: {m['hardware']}" for m in members if m.get("hardware"))
            + "); one group runs on one kind of NPU"
        )
    if hardware and kinds and hardware.lower() not in kinds:
        raise CheckFailed(f"--hardware {hardware} but the members say {kinds.pop()}")
    return (hardware or (kinds.pop() if kinds else "a2")).lower()


def _recipe(facts: dict, hw: str, members: int, chips: int, backend: str) -> dict | None:
    for recipe in RECIPES:
        m = recipe["match"]
        if (m["model_type"], m["hardware"], m["members"], m["chips"], m["backend"]) == (
            facts["model_type"],
            hw,
            members,
            chips,
            backend,
        ):
            return recipe
    return None


def _flags(
    chosen: dict, util: float, hw: dict, quant: str | None, eager: bool, backend: str
) -> list[str]:
    """The single-host planner's serve flags, with Ray's executor and PP size in front."""
    flags = serve_flags(chosen, util, hw, quant, eager, bool(chosen["ep"]), None)
    if backend == "ray":
        pp = str(chosen["pp"])
        flags = ["--distributed-executor-backend", "ray", "--pipeline-parallel-size", pp, *flags]
    return flags


def describe_group(plan: dict) -> str:
    """Human rendering: the layout, then one block per member with its env and command."""
    mem = plan["memory"]
    layout = f"DP {plan['dp']} x TP {plan['tp']}" + (
        f" x PP {plan['pp']}" if plan["pp"] > 1 else ""
    )
    lines = [
        f"model      {plan['model_dir']} ({plan['model']['model_type']}, "
        f"{plan['model']['weight_bytes_served']:,} bytes served)",
        f"group      {plan['members']} members x {plan['chips_per_member']} NPUs, "
        f"{plan['hardware']}, backend {plan['backend']}, leader {plan['leader']} "
        f"({plan['leader_address']})",
        f"layout     {layout}"
        + (", expert parallel" if plan["expert_parallel"] else "")
        + f" (valid: {plan['valid_layouts']})",
        f"memory     per NPU: weights {mem['weights_per_npu_mb']} MB, KV {mem['kv_budget_mb']} MB"
        f" = {mem['kv_capacity_tokens']:,} tokens; max_model_len {plan['max_model_len']}",
    ]
    if plan["recipe"]:
        lines.append(f"recipe     {plan['recipe']['name']} ({plan['recipe']['source']})")
    lines += [f"note       {n}" for n in plan["notes"]]
    lines += [f"reason     {r}" for r in plan["reasons"]]
    for m in plan["member_plans"]:
        lines.append("")
        ranks = (
            f"DP ranks {m['dp_ranks'][0]}-{m['dp_ranks'][-1]}"
            if m.get("dp_ranks")
            else f"PP stage {m.get('pp_stage')}"
        )
        lines.append(
            f"[{m['name']}] {m['role']}, {m['address']} on {m['nic']}, NPUs "
            f"{','.join(map(str, m['npus']))}, {ranks}"
        )
        lines += [f"  export {k}={shlex.quote(v)}" for k, v in m["env"].items()]
        if m.get("ray_start"):
            lines.append("  " + shlex.join(m["ray_start"]))
        if plan["feasible"] and m["command"]:
            lines.append("  " + m["command"])
    return "\n".join(lines)
