"""Start-up of the emulated ``vllm serve``: the checks real vLLM-Ascend runs, in its order.

1. API socket bound first (vLLM binds before building the engine): pitfall 3.
2. Platform plugin: torch_npu needs the device nodes and driver mounts: pitfall 1.
3. Model config validation: max_model_len, quantization (FP8: pitfall 2; ``ascend``:
   pitfall 7), attention heads vs TP (pitfall 8).
4. Worker init: set_device fails when the host driver does not support the image's CANN
   (pitfall 1); HCCL port for TP > 1 (pitfall 3).
5. Weight loading (sizes from the safetensors headers; OOM when they do not fit next to what
   other processes hold), profiling, KV cache sizing (pitfall 5).
6. ACL graph capture unless ``--enforce-eager`` (pitfall 4).
Then the HTTP server starts ("Application startup complete.").
"""

from __future__ import annotations

import argparse
import atexit
import contextlib
import json
import os
import signal
import socket
import time
from dataclasses import dataclass, field

from ascend_deploy.errors import InputError
from ascend_deploy.model import tp_heads
from ascend_deploy.model.files import load_config, read_json_file, read_weight_layout
from ascend_deploy.planning.rules import block_fp8_rule, shipped_rules

from .. import state as sim_state
from . import device
from . import messages as M
from .args import parse_serve_args
from .memory import GIB, MIB, KvBudget, kv_budget
from .model_config import MODELSLIM_FILE as MODELSLIM_DESCRIPTION
from .model_config import derived_max_model_len, modelslim_load_error
from .test_switches import maybe_hang_at_load
from .versions import Behaviour, behaviour_for, load_row, log_has_process_prefix
from .vlog import VLog

# Default max_num_seqs of vLLM's V1 engine for the OpenAI server.
DEFAULT_MAX_NUM_SEQS = 256
# HCCL's default host-NIC listen port (pitfall 3 logs in tests/data/logs: port[60000]).
HCCL_DEFAULT_PORT = 60000


class StartupFailed(Exception):
    """Start-up stopped the way real vLLM stops; the text lines were already printed."""

    def __init__(self, exit_code: int = 1):
        super().__init__(exit_code)
        self.exit_code = exit_code


@dataclass
class Deployment:
    """Everything the server needs once start-up succeeded."""

    args: argparse.Namespace
    row: dict
    behaviour: Behaviour
    log: VLog
    sock: socket.socket
    config: dict
    served_names: list[str]
    max_model_len: int
    max_num_seqs: int
    budget: KvBudget
    model_dir: str  # what the engine loads
    quantization: str | None = None  # the method the engine loads with ("ascend": W8A8)
    registrations: list[str] = field(default_factory=list)
    hccl_sock: socket.socket | None = None


# vLLM's Qwen3 loader stacks q/k/v into qkv_proj and gate/up into gate_up_proj and drops
# the "model." prefix before looking a checkpoint name up in the model's parameters.
_STACKED = {"q_proj": "qkv_proj", "k_proj": "qkv_proj", "v_proj": "qkv_proj"}
_STACKED.update(gate_proj="gate_up_proj", up_proj="gate_up_proj")
_QUANT_ONLY = ("deq_scale", "quant_bias", "input_scale", "input_offset", "weight_offset")


def _first_quant_param(model: str) -> str:
    """The parameter name of the first quant-only tensor the float loader meets."""
    try:
        desc = read_json_file(os.path.join(model, MODELSLIM_DESCRIPTION), "description")
    except InputError:
        desc = {}
    names = sorted(k for k, v in desc.items() if v != "FLOAT" and k.endswith(_QUANT_ONLY))
    if not names:
        return "layers.0.mlp.gate_up_proj.deq_scale"
    parts = names[0].removeprefix("model.").split(".")
    return ".".join(_STACKED.get(p, p) for p in parts)


def _block_fp8_rule(vllm_ascend: str) -> dict:
    """The release's block_fp8 entry (the shipped serving rules, which the planner reads too);
    a release no entry covers fails, said to be emulated."""
    rule = block_fp8_rule(shipped_rules(), vllm_ascend)
    if rule is None:
        return {"outcome": "load_error", "error": M.FP8_NO_RULE.format(release=vllm_ascend)}
    return rule


def _config_class(config: dict) -> str:
    names = {"qwen3": "Qwen3Config", "qwen3_moe": "Qwen3MoeConfig", "qwen2": "Qwen2Config"}
    mt = str(config.get("model_type", ""))
    return names.get(mt, "".join(p.capitalize() for p in mt.split("_")) + "Config")


def _fail_engine(log: VLog, lines: list[str], loc: str = "core.py:708") -> None:
    """EngineCore failure: ERROR lines on stdout, the exception on stderr, exit 1."""
    log.error(loc, M.ENGINE_CORE_FAILED, proc="EngineCore_DP0")
    for text in lines:
        log.error(loc, text, proc="EngineCore_DP0")
    for text in lines:
        log.raw_err(text)
    log.raw_err(M.ENGINE_INIT_FAILED)
    raise StartupFailed(1)


def _fail_api(log: VLog, lines: list[str]) -> None:
    """A failure in the API-server process before the engine starts."""
    for text in lines:
        log.raw_err(text)
    raise StartupFailed(1)


def _bind_api_socket(log: VLog, host: str | None, port: int) -> socket.socket:
    family = socket.AF_INET6 if host and ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host or "0.0.0.0", port))
    except OSError:
        sock.close()
        # behaviour: check.api_port_in_use
        _fail_api(log, [M.ADDRESS_IN_USE])
    sock.listen(128)
    return sock


def _bind_hccl_port(log: VLog) -> socket.socket:
    port = int(os.environ.get("HCCL_IF_BASE_PORT") or HCCL_DEFAULT_PORT)
    ip = os.environ.get("HCCL_IF_IP") or "127.0.0.1"
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        sock.bind((ip, port))
        sock.listen(16)
    except OSError:
        sock.close()
        pid = os.getpid()
        # behaviour: check.hccl_port_in_use
        _fail_engine(
            log,
            [
                M.HCCL_ROOT_INFO,
                M.HCCL_DIST_FAILED.format(stamp=log.acl_stamp(), pid=pid),
                M.HCCL_BIND.format(pid=pid, stamp2=log.plog_stamp()),
                "[rank0]:         TraceBack (most recent call last):",
                M.HCCL_LISTEN.format(port=port),
            ],
            loc="multiproc_executor.py:599",
        )
    return sock


def _quant_method(config: dict) -> str | None:
    qc = config.get("quantization_config")
    if isinstance(qc, dict):
        method = qc.get("quant_method")
        return str(method) if method else None
    return None


def _head_dims(config: dict, where: str) -> tuple[int, int, int, int]:
    try:
        layers = int(config["num_hidden_layers"])
        heads = int(config["num_attention_heads"])
        kv_heads = int(config.get("num_key_value_heads", heads))
        head_dim = int(config.get("head_dim") or int(config["hidden_size"]) // heads)
    except (KeyError, TypeError, ValueError) as exc:
        raise InputError(
            f"{where}: config.json lacks a valid {exc} for the attention shape"
        ) from None
    if min(layers, heads, kv_heads, head_dim) < 1:
        raise InputError(f"{where}: config.json has non-positive layer or head counts")
    return layers, heads, kv_heads, head_dim


def _host_chips(env: device.NpuEnvironment) -> list[dict]:
    """The host's chips as its npu-smi shows them (``ascend_sim.state.chips``), idle figures."""
    try:
        return sim_state.chips(sim_state.normalise(env.state or {}, device.STATE_REL))
    except InputError as exc:
        raise InputError(f"{device.path(device.STATE_REL)}: {exc}") from exc


def _devices_for(env: device.NpuEnvironment, tp: int) -> list[dict]:
    """The host chips of the first ``tp`` visible devices: a device id is a chip's logic id
    (A3: one per die, 300I Duo: one per chip), never the card's NPU id."""
    by_device = {c["logic_id"]: c for c in _host_chips(env)}
    missing = [d for d in env.visible[:tp] if d not in by_device]
    if missing:
        raise InputError(f"emulated host: no chip has device id {missing[0]}")
    return [by_device[d] for d in env.visible[:tp]]


def _memory_of(chip: dict) -> tuple[int, int]:
    """(total, idle used) MB of a chip: its HBM, or its DDR on 310P cards (no HBM figures)."""
    if chip.get("hbm_total_mb"):
        return int(chip["hbm_total_mb"]), int(chip.get("hbm_used_mb") or 0)
    return int(chip.get("memory_total_mb") or 0), int(chip.get("memory_used_mb") or 0)


def _others_mb(devices: list[tuple[int, int]]) -> dict[tuple[int, int], int]:
    """NPU memory other processes registered on ``devices``.

    The registry is shared by every container on the host. Entries of this PID namespace
    count only while their process lives; entries of other namespaces cannot be checked
    from inside a container and always count (npu-smi on the host removes stale ones).
    ``npu_registry.live_holders`` is not used here because it deletes the entries it
    cannot resolve, which from inside a container would be everybody else's.
    """
    held: dict[tuple[int, int], int] = {d: 0 for d in devices}
    reg = device.registry_dir()
    try:
        names = sorted(os.listdir(reg))
    except OSError:
        return held
    me = os.getpid()
    try:
        my_ns = os.readlink("/proc/self/ns/pid")
    except OSError:
        my_ns = ""
    for name in names:
        if not name.endswith(".json"):
            continue
        try:
            with open(os.path.join(reg, name), encoding="utf-8") as fh:
                entry = json.load(fh)
            key = (int(entry["npu"]), int(entry["chip"]))
            ns_pid, pid_ns, mb = int(entry["ns_pid"]), str(entry["pid_ns"]), int(entry["memory_mb"])
        except (OSError, ValueError, KeyError, TypeError):
            continue
        if pid_ns == my_ns and (ns_pid == me or not os.path.exists(f"/proc/{ns_pid}")):
            continue
        if key in held:
            held[key] += mb
    return held


def _register(dep: Deployment, devices: list[tuple[int, int]], memory_mb: int) -> None:
    from ascend_sim.npu_registry import register, unregister

    for npu, chip in devices:
        dep.registrations.append(register(device.registry_dir(), npu, chip, "python", memory_mb))

    def _cleanup(*_a) -> None:
        for p in dep.registrations:
            unregister(p)
        dep.registrations.clear()

    atexit.register(_cleanup)

    def _on_signal(_signum, _frame):
        # Graceful stop like uvicorn's: free the NPU memory record, exit 0.
        _cleanup()
        raise SystemExit(0)

    for sig in (signal.SIGTERM, signal.SIGINT):
        with contextlib.suppress(ValueError):  # not the main thread (tests)
            signal.signal(sig, _on_signal)


def _non_default_args(args: argparse.Namespace) -> dict:
    defaults = vars(parse_serve_args([]))
    out = {}
    for k, v in vars(args).items():
        if k in ("subcommand", "version"):
            continue
        if k == "api_key" and v:
            v = "******"
        if defaults.get(k) != v:
            out[k] = v
    return out


def run_startup(args: argparse.Namespace, log: VLog | None = None) -> Deployment:
    """Run every start-up step; raises StartupFailed after printing vLLM's error text."""
    row = load_row()
    beh = behaviour_for(row["vllm_ascend"])
    log = log or VLog(log_has_process_prefix(row["vllm"]))
    t0 = time.monotonic()
    log.info("api_server.py:1885", M.SERVER_VERSION.format(version=row["vllm"].lstrip("v")))
    log.info("utils.py:328", M.NON_DEFAULT_ARGS.format(args=_non_default_args(args)))

    # 1. The API socket (pitfall 3).
    sock = _bind_api_socket(log, args.host, args.port)
    try:
        return _after_bind(args, row, beh, log, sock, t0)
    except BaseException:
        sock.close()
        raise


def _after_bind(args, row, beh, log: VLog, sock, t0) -> Deployment:
    # 2. Platform plugin (pitfall 1: devices and driver mounts).
    env = device.probe()
    if not env.usable or (env.state or {}).get("faults", {}).get("driver_not_loaded"):
        log.info("__init__.py:220", M.NO_PLATFORM)
        # behaviour: check.no_platform
        _fail_api(log, [M.FAILED_INFER_DEVICE])
    log.info("__init__.py:44", M.PLUGINS_AVAILABLE)
    log.info("__init__.py:46", M.PLUGIN_ENTRY)
    log.info("__init__.py:238", M.PLUGIN_ACTIVATED)
    if beh.sets_alloc_conf and not os.environ.get("PYTORCH_NPU_ALLOC_CONF"):
        os.environ["PYTORCH_NPU_ALLOC_CONF"] = "expandable_segments:True"
        log.info("platform.py:178", M.ALLOC_CONF_SET.format(value="expandable_segments:True"))

    # 3. Model config validation.
    model = args.model
    config = load_config(model)
    archs = config.get("architectures") or ["?"]
    log.info("__init__.py:744", M.RESOLVED_ARCH.format(arch=archs[0]))
    layers, heads, kv_heads, _head_dim = _head_dims(config, model)
    # vLLM's _get_and_verify_max_len, encoded by the emulator itself (model_config.py).
    try:
        derived = derived_max_model_len(config)
    except (TypeError, ValueError):
        raise InputError(f"{model}: config.json has a non-numeric length or RoPE factor") from None
    if args.max_model_len and args.max_model_len > derived:
        # behaviour: check.max_model_len_above_derived
        _fail_api(log, [M.MAX_LEN_ABOVE_DERIVED.format(user=args.max_model_len, derived=derived)])
    max_model_len = args.max_model_len or derived
    log.info("__init__.py:1773", M.MAX_MODEL_LEN.format(n=max_model_len))

    # vLLM takes the method from --quantization, else from the checkpoint's
    # quantization_config; vllm-ascend >= v0.17.0rc1 also detects ModelSlim checkpoints.
    quant = args.quantization
    has_description = os.path.exists(os.path.join(model, MODELSLIM_DESCRIPTION))
    if quant is None:
        quant = _quant_method(config)
    if quant is None and has_description and beh.quant_autodetect:
        quant = "ascend"
        log.info(
            "utils.py:97",
            M.QUANT_AUTODETECTED.format(method=quant, model=model),
        )
    # A generic block-FP8 checkpoint: the release's block_fp8 rule (serve_rules.json, the
    # planner's data) decides, on every device.
    fp8 = quant == "fp8"
    fp8_rule = _block_fp8_rule(row["vllm_ascend"]) if fp8 else None
    if fp8_rule and fp8_rule["outcome"] == "refused":
        # behaviour: check.fp8_refused
        _fail_api(log, [M.QUANT_NOT_SUPPORTED.format(quant=quant)])
    if quant is not None and not fp8 and quant not in beh.supported_quantization:
        # behaviour: check.quantization_not_supported
        _fail_api(log, [M.QUANT_NOT_SUPPORTED.format(quant=quant)])
    if heads % args.tensor_parallel_size:
        # vLLM's verify_with_parallel_config, in the API process (model/tp_heads.py).
        # behaviour: check.heads_divisible_by_tp
        _fail_api(log, [M.HEADS_NOT_DIVISIBLE.format(heads=heads, tp=args.tensor_parallel_size)])

    if args.quantization == "ascend":
        # vLLM ModelConfig._verify_quantization warns for a method outside its optimized list
        # while the config is built (before auto-detection could set it).
        log.warning("config.py:628", M.ASCEND_QUANT_SLOW)
    if has_description and quant != "ascend":
        # A ModelSlim checkpoint loaded as float (no flag, no auto-detection): the first
        # quant-only tensor has no parameter in the float layers (issues #5812, #11368).
        # behaviour: check.modelslim_loaded_as_float
        _fail_engine(log, [f"KeyError: '{_first_quant_param(model)}'"], loc="core.py:708")
    if quant == "ascend" and not has_description:
        # No release loads a float model through the ModelSlim path (versions.py).
        if beh.ascend_flag_on_float == "config_not_found":
            # behaviour: check.ascend_flag_on_float
            _fail_api(log, [M.ASCEND_CONFIG_NOT_FOUND])
        json_names = sorted(n for n in os.listdir(model) if n.endswith(".json"))
        line = M.for_release("modelslim_model_line", row["vllm_ascend"])
        # behaviour: check.ascend_flag_on_float
        _fail_engine(log, M.modelslim_not_found(model, json_names, line), loc="core.py:708")

    # 4. Worker init: devices, driver vs CANN, HCCL.
    tp = args.tensor_parallel_size
    if env.dropped and tp > len(env.visible):
        # The mask names a device outside the container's 0..k-1: the runtime dropped it and
        # set_device on the first missing rank fails (docs/device-numbering.md).
        rank = len(env.visible)
        # behaviour: check.visible_device_outside_container
        _fail_engine(
            log,
            [
                M.SET_VISIBLE_FAILED.format(device=rank, mask=env.mask),
                M.RT_SET_DEVICE_FAILED,
                M.ACL_OPEN_DEVICE_FAILED.format(device=rank),
            ],
            loc="multiproc_executor.py:599",
        )
    if tp > len(env.visible):
        mask = os.environ.get("ASCEND_RT_VISIBLE_DEVICES", "")
        # behaviour: check.not_enough_devices
        _fail_engine(log, [M.NOT_ENOUGH_DEVICES.format(tp=tp, visible=len(env.visible), mask=mask)])
    if device.cann_runs_on_driver(env, row["cann"]) is False:
        # behaviour: check.cann_vs_driver
        _fail_engine(
            log,
            [
                M.ACL_SET_DEVICE_FAILED,
                M.ACL_PTA_FAILED.format(
                    stamp=log.acl_stamp(), pid=os.getpid(), device=env.visible[0]
                ),
                M.ACL_INTERNAL,
                M.ACL_RECTIFY,
            ],
            loc="multiproc_executor.py:599",
        )
    hccl_sock = _bind_hccl_port(log) if tp > 1 else None
    kv_failure = tp_heads.tp_head_failure(heads, kv_heads, tp, bool(config.get("kv_lora_rank")))
    if kv_failure is not None:
        # QKVParallelLinear's divide(): TP neither divides nor is a multiple of the KV heads
        # (vLLM replicates KV heads when TP is a multiple: model/tp_heads.py).
        # behaviour: check.kv_heads_vs_tp
        _fail_engine(log, [kv_failure])

    # 5. Weights, profiling, KV cache (memory.py: the emulated card, not the planner's model).
    tensors = [
        (info.name, tuple(info.shape), info.nbytes)
        for _shard, info in read_weight_layout(model).tensors()
    ]
    if quant == "ascend":
        # Building the layers looks each linear layer up in the description (model_config.py).
        desc = read_json_file(os.path.join(model, MODELSLIM_DESCRIPTION), "description")
        err = modelslim_load_error(desc, {t[0] for t in tensors}, layers)
        if err:
            # behaviour: check.modelslim_description_incomplete
            _fail_engine(log, [err], loc="core.py:708")
    state = env.state or {}
    chips = _devices_for(env, tp)
    devices = [(int(c["npu"]), int(c["chip"])) for c in chips]
    for c in chips:
        if _memory_of(c)[0] <= 0:
            raise InputError(
                f"{device.path(device.STATE_REL)}: NPU {c['npu']} chip {c['chip']} has no "
                "HBM or memory total"
            )
    others = _others_mb(devices)
    budgets = [
        kv_budget(
            config,
            tensors,
            hbm_total_mb=_memory_of(c)[0],
            idle_used_mb=_memory_of(c)[1],
            others_mb=others[(int(c["npu"]), int(c["chip"]))],
            tp=tp,
            gpu_memory_utilization=args.gpu_memory_utilization,
            enforce_eager=args.enforce_eager,
            max_num_seqs=args.max_num_seqs,
            max_num_batched_tokens=args.max_num_batched_tokens,
            dtype=args.dtype,
            profiling=beh.memory_profiling,
        )
        for c in chips
    ]
    refused = next((b for b in budgets if b.refused_at_start), None)
    if refused:  # worker.py _init_device, before the model loads (v0.15.0rc1+)
        # behaviour: check.free_memory_at_start
        _fail_engine(
            log,
            [
                M.FREE_MEMORY_LOW.format(
                    free=round(refused.free_at_start / GIB, 2),
                    total=round(refused.device_total / GIB, 2),
                    util=args.gpu_memory_utilization,
                    requested=round(refused.requested / GIB, 2),
                )
            ],
            loc="worker.py:475",
        )
    budget = min(budgets, key=lambda b: b.tokens)  # vLLM takes the minimum over ranks
    if budget.weights > budget.free_before_load:
        free = max(0, budget.free_before_load) / GIB
        # behaviour: check.weights_do_not_fit
        _fail_engine(
            log,
            [
                M.NPU_OOM.format(
                    alloc=min(budget.weights, 2 * GIB) / GIB,
                    npu=devices[0][0],
                    total=budget.total / GIB,
                    allocated=free * 0.98,
                    free=free * 0.02,
                    reserved=free,
                )
            ],
            loc="multiproc_executor.py:824",
        )
    if fp8_rule and fp8_rule["outcome"] == "load_error":
        # behaviour: check.fp8_load_error
        _fail_engine(log, [fp8_rule["error"].format(config_class=_config_class(config))])
    maybe_hang_at_load(log)
    log.info("default_loader.py:262", M.LOADING_TOOK.format(seconds=0.5), proc="EngineCore_DP0")
    log.info(
        "model_runner_v1.py:2705",
        M.MODEL_WEIGHTS_TOOK.format(gb=budget.weights / GIB),
        proc="EngineCore_DP0",
    )
    # Up to v0.14.0rc1 worker_v1.py logs "Available memory"; from v0.15.0rc1 worker.py logs
    # the KV budget (messages.BY_RELEASE).
    available_line = M.for_release("available_memory", row["vllm_ascend"])
    if available_line:
        log.info(
            "worker_v1.py:256",
            available_line.format(available=max(0, budget.available_kv), total=budget.total),
            proc="EngineCore_DP0",
        )
    kv_line = M.for_release("available_kv_memory", row["vllm_ascend"])
    if kv_line:
        log.info(
            "worker.py:594", kv_line.format(gib=budget.available_kv / GIB), proc="EngineCore_DP0"
        )
    if budget.num_blocks <= 0:
        # behaviour: check.no_cache_memory
        _fail_engine(log, [M.NO_CACHE_MEMORY])
    if max_model_len > budget.tokens:
        needed = max_model_len * budget.kv_bytes_per_token
        estimate = budget.tokens
        # behaviour: check.max_len_fits_kv_cache
        _fail_engine(
            log,
            [
                M.MAX_LEN_TOO_LARGE.format(
                    max_len=max_model_len,
                    needed=needed / GIB,
                    available=budget.available_kv / GIB,
                    estimate=estimate,
                )
            ],
        )
    max_num_seqs = args.max_num_seqs or DEFAULT_MAX_NUM_SEQS
    log.info(
        "kv_cache_utils.py:1087",
        M.KV_CACHE_SIZE.format(tokens=budget.tokens),
        proc="EngineCore_DP0",
    )
    log.info(
        "kv_cache_utils.py:1091",
        M.MAX_CONCURRENCY.format(tokens=max_model_len, x=budget.tokens / max_model_len),
        proc="EngineCore_DP0",
    )

    # 6. ACL graph capture (pitfall 4).
    faults = state.get("faults") or {}
    if not args.enforce_eager:
        aiv = os.environ.get("HCCL_OP_EXPANSION_MODE", "").upper() == "AIV"
        if faults.get("graph_capture_broken") or (tp > 1 and not aiv):
            # behaviour: check.graph_capture
            _fail_engine(
                log,
                [
                    M.CAPTURE_END_FAILED,
                    M.ACL_PTA_FAILED.format(
                        stamp=log.acl_stamp(), pid=os.getpid(), device=env.visible[0]
                    ),
                    M.EZ9999,
                    f"EZ9999: [PID: {os.getpid()}] {log.plog_stamp()} {M.CAPTURE_INVALIDATED}",
                ],
                loc="model_runner_v1.py:3480",
            )
        headroom = budget.free_at_start - budget.requested
        if budget.profiling and headroom < budget.graph:
            # behaviour: check.capture_headroom
            free = max(0, headroom) / GIB
            _fail_engine(
                log,
                [
                    M.NPU_OOM.format(
                        alloc=budget.graph / GIB,
                        npu=env.visible[0],
                        total=budget.total / GIB,
                        allocated=budget.requested / GIB,
                        free=free,
                        reserved=budget.requested / GIB,
                    )
                ],
                loc="model_runner_v1.py:3480",
            )
        log.info(
            "model_runner_v1.py:3480",
            M.GRAPH_CAPTURE_DONE.format(seconds=1, gib=budget.graph / GIB),
            proc="EngineCore_DP0",
        )
    else:
        log.info("__init__.py:3575", M.EAGER_MODE, proc="EngineCore_DP0")
    log.info(
        "core.py:215",
        M.INIT_ENGINE_TOOK.format(seconds=time.monotonic() - t0),
        proc="EngineCore_DP0",
    )
    log.info("loggers.py:147", M.NUM_GPU_BLOCKS.format(blocks=budget.num_blocks))

    served = args.served_model_name or [model]
    dep = Deployment(
        args=args,
        row=row,
        behaviour=beh,
        log=log,
        sock=sock,
        config=config,
        served_names=served,
        max_model_len=max_model_len,
        max_num_seqs=max_num_seqs,
        budget=budget,
        model_dir=model,
        quantization=quant,
        hccl_sock=hccl_sock,
    )
    _register(dep, devices, budget.held // MIB)
    return dep
