"""The exact log lines and error texts the emulator prints, each with its source.

Texts are copied from real vLLM / vLLM-Ascend / torch_npu output (see
``tests/data/logs/`` for the pitfall signatures, each with its URL); ``{}``
placeholders are filled with the emulator's own numbers. Where a real line carries a
source file and line number (``[kv_cache_utils.py:1087]``), ``LOC`` gives the one used.
"""

from __future__ import annotations

from ascend_deploy.model import tp_heads
from ascend_sim.vllm_emulator.versions import at_least

# --- Logging ---------------------------------------------------------------------------
# vLLM's logger format: "%(levelname)s %(month-day time)s [%(filename)s:%(lineno)d] %(message)s",
# prefixed with "(<ProcessName> pid=N) " by vLLM >= 0.10.1's multiprocess prefixing.
# Source: real logs in https://github.com/vllm-project/vllm/pull/20707 (v0.10.1,
# "(EngineCore_0 pid=1399537) INFO 08-19 14:58:40 [gpu_worker.py:277] ...") and
# https://github.com/vllm-project/vllm/pull/24162 (no prefix, "INFO 09-03 16:28:08 [...]").
# Uvicorn's own lines ("INFO:     Started server process [N]") keep uvicorn's format:
# https://github.com/LMCache/LMCache/pull/5138 (vLLM-Ascend log).
UVICORN_STARTED = "Started server process [{pid}]"
UVICORN_WAITING = "Waiting for application startup."
UVICORN_COMPLETE = "Application startup complete."
UVICORN_ACCESS = '{client} - "{method} {path} HTTP/1.1" {status} {reason}'

# Source: https://github.com/vllm-project/vllm/pull/24162 (api_server.py / utils.py lines).
SERVER_VERSION = "vLLM API server version {version}"
NON_DEFAULT_ARGS = "non-default args: {args}"
RESOLVED_ARCH = "Resolved architecture: {arch}"
MAX_MODEL_LEN = "Using max model len {n}"
# Source: vllm-ascend docs/source/installation.md, "Verify installation".
PLUGINS_AVAILABLE = "Available plugins for group vllm.platform_plugins:"
PLUGIN_ENTRY = "- ascend -> vllm_ascend:register"
PLUGIN_ACTIVATED = "Platform plugin ascend is activated"
# Source: vllm-ascend vllm_ascend/platform.py::_set_pytorch_npu_alloc_env (>= v0.14.0rc1).
ALLOC_CONF_SET = "Set PYTORCH_NPU_ALLOC_CONF={value}"
# Source: worker_v1.py line in https://github.com/vllm-project/vllm-ascend/pull/2139 and
# https://github.com/vllm-project/vllm-ascend/issues/5044; vllm-ascend up to v0.14.0rc1 only
# (see BY_RELEASE).
AVAILABLE_MEMORY = "Available memory: {available}, total memory: {total}"
# Source: vLLM default_loader.py, in https://github.com/vllm-project/vllm-ascend/issues/5044.
LOADING_TOOK = "Loading weights took {seconds:.2f} seconds"
# Source: NPUModelRunner.load_model (vllm_ascend/worker/model_runner_v1.py@v0.11.0:2707,
# @v0.23.0:3794); real log https://github.com/vllm-project/vllm-ascend/issues/5044. (vLLM's
# CUDA runner prints "Model loading took ... GiB and ... seconds"; vllm-ascend never does.)
MODEL_WEIGHTS_TOOK = "Loading model weights took {gb:.4f} GB"
# Source: vllm_ascend/worker/worker.py@v0.15.0rc1+ (@v0.23.0:594); from v0.15.0rc1 only.
AVAILABLE_KV_MEMORY = "Available KV cache memory: {gib:.2f} GiB"
KV_CACHE_SIZE = "GPU KV cache size: {tokens:,} tokens"
MAX_CONCURRENCY = "Maximum concurrency for {tokens:,} tokens per request: {x:.2f}x"
GRAPH_CAPTURE_DONE = "Graph capturing finished in {seconds} secs, took {gib:.2f} GiB"
EAGER_MODE = "Cudagraph is disabled under eager mode"
INIT_ENGINE_TOOK = "init engine (profile, create kv cache, warmup model) took {seconds:.2f} seconds"
NUM_GPU_BLOCKS = (
    "Engine 000: vllm cache_config_info with initialization after num_gpu_blocks is: {blocks}"
)
# Source: https://github.com/vllm-project/vllm/pull/20707 (serving_responses / __init__ lines).
GENERATION_CONFIG_OVERRIDE = (
    "Default sampling parameters have been overridden by the model's Hugging Face generation "
    "config recommended from the model creator. If this is not intended, please relaunch vLLM "
    "instance with `--generation-config vllm`."
)
STARTING_SERVER = "Starting vLLM API server {n} on http://{host}:{port}"
AVAILABLE_ROUTES = "Available routes are:"
ROUTE = "Route: {path}, Methods: {methods}"
# Source: periodic stats line, loggers.py, https://github.com/vllm-project/vllm-ascend/issues/2245
# (pitfall 6; tests/data/logs).
STATS = (
    "Engine 000: Avg prompt throughput: {prompt:.1f} tokens/s, Avg generation throughput: "
    "{gen:.1f} tokens/s, Running: {running} reqs, Waiting: {waiting} reqs, GPU KV cache usage: "
    "{usage:.1f}%, Prefix cache hit rate: 0.0%"
)
# Source: vLLM scheduler.py (V0) warning, quoted verbatim in
# https://github.com/vllm-project/vllm/pull/6102 and https://github.com/GAIR-NLP/LIMO/issues/29.
# (The V1 engine counts preemptions in vllm:num_preemptions_total without a log line; the
# emulator prints the V0 wording so operators see the event.)
PREEMPTED = (
    "Sequence group {req} is preempted by PreemptionMode.RECOMPUTE mode because there is not "
    "enough KV cache space. This can affect the end-to-end performance. Increase "
    "gpu_memory_utilization or tensor_parallel_size to provide more KV cache memory. "
    "total_num_cumulative_preemption={total}"
)
# Source: vLLM v1 scheduler.py INFO line, https://github.com/LMCache/LMCache/pull/1361.
RESUMED = "Preempted request {req} has been resumed!"

# --- Pitfall 1: no NPU / driver incompatible ------------------------------------------------
# Source: vllm-ascend installation.md / FAQ 6: what vLLM prints when the ascend plugin
# cannot load torch_npu.
NO_PLATFORM = "No platform detected, vLLM is running on UnspecifiedPlatform"
FAILED_INFER_DEVICE = "RuntimeError: Failed to infer device type"
# Source: https://github.com/vllm-project/vllm-ascend/issues/2244 (image CANN does not match the
# host driver): torch.npu.set_device fails in worker init_device.
ACL_SET_DEVICE_FAILED = (
    "RuntimeError: SetPrecisionMode:build/CMakeFiles/torch_npu.dir/compiler_depend.ts:156 NPU "
    "function error: at_npu::native::AclSetCompileopt(aclCompileOpt::ACL_PRECISION_MODE, "
    "precision_mode), error code is 500001"
)
ACL_PTA_FAILED = (
    "[ERROR] {stamp} (PID:{pid}, Device:{device}, RankID:-1) ERR00100 PTA call acl api failed"
)
ACL_INTERNAL = "[Error]: The internal ACL of the system is incorrect."
ACL_RECTIFY = "        Rectify the fault based on the error information in the ascend log."

# --- Pitfall 2: FP8 --------------------------------------------------------------------------
# Source: vLLM Platform.verify_quantization (vllm/platforms/interface.py),
# pitfall 2 (tests/data/logs); vllm-ascend <= v0.20.2rc1.
QUANT_NOT_SUPPORTED = "ValueError: {quant} quantization is currently not supported in npu."
# Source: https://github.com/vllm-project/vllm-ascend/issues/14467 (v0.21.0rc1 .. v0.25.1rc1,
# every device: AscendFp8Config routes a generic block-FP8 model to the DeepSeek-V4 scheme);
# the emulator prints serve_rules.json block_fp8's copy, which a test keeps equal to this.
FP8_O_GROUPS = "AttributeError: '{config_class}' object has no attribute 'o_groups'"
# Emulated (no upstream text): a release that no block_fp8 rule in serve_rules.json covers.
FP8_NO_RULE = (
    "NotImplementedError: (emulated) vllm-ascend {release} is not covered by a block_fp8 rule "
    "(serve_rules.json); the emulator does not know how it treats a block-FP8 checkpoint"
)

# --- Pitfall 3: port in use ------------------------------------------------------------------
# Source: https://github.com/vllm-project/vllm/issues/9763 (vLLM binds its API socket first).
ADDRESS_IN_USE = "OSError: [Errno 98] Address already in use"
# Source: https://github.com/vllm-project/vllm-ascend/issues/405 (HCCL root-info port taken).
HCCL_ROOT_INFO = (
    "[rank0]: RuntimeError: createHCCLComm:build/CMakeFiles/torch_npu.dir/compiler_depend.ts:1479 "
    "HCCL function error: HcclGetRootInfo(&hcclID), error code is 11"
)
HCCL_DIST_FAILED = (
    "[rank0]: [ERROR] {stamp} (PID:{pid}, Device:0, RankID:-1) ERR02200 DIST call hccl api failed."
)
HCCL_BIND = (
    "[rank0]: EJ0003: [PID: {pid}] {stamp2} Failed to bind the IP port. Reason: The IP address "
    "and port have been bound already."
)
HCCL_LISTEN = (
    "[rank0]:         host nic listen start failed, port[{port}], return[11]"
    "[FUNC:StartListenSocket][FILE:network_manager.cc][LINE:1163]"
)

# --- Pitfall 4: graph capture ----------------------------------------------------------------
# Source: vllm-ascend troubleshooting notes (pitfall 4 in tests/data/logs, "507903") and the
# torch_npu capture_begin/EZ9999 formats of the FAQ 13/17 signatures.
CAPTURE_END_FAILED = (
    "RuntimeError: capture_end:build/CMakeFiles/torch_npu.dir/compiler_depend.ts:264 NPU function "
    "error: c10_npu::acl::AclmdlRICaptureEnd(capture_stream_, &model_ri_), error code is 507903"
)
CAPTURE_INVALIDATED = (
    "rtStreamEndCapture execute failed, reason=[invalidated stream capture sequence]"
)
EZ9999 = "EZ9999: Inner Error!"

# --- Pitfall 5: memory -----------------------------------------------------------------------
# Source: https://github.com/vllm-project/vllm-ascend/issues/6611 (torch_npu OOM text).
NPU_OOM = (
    "RuntimeError: NPU out of memory. Tried to allocate {alloc:.2f} GiB (NPU {npu}; {total:.2f} "
    "GiB total capacity; {allocated:.2f} GiB already allocated; {allocated:.2f} GiB current "
    "active; {free:.2f} GiB free; {reserved:.2f} GiB reserved in total by PyTorch) If reserved "
    "memory is >> allocated memory try setting max_split_size_mb to avoid fragmentation."
)
# Source: vllm_ascend/worker/worker.py _init_device from v0.15.0rc1 (GiB values are
# round(x, 2)): https://github.com/vllm-project/vllm-ascend/blob/v0.23.0/vllm_ascend/worker/worker.py
# and a real log in https://github.com/vllm-project/vllm-ascend/issues/14631.
FREE_MEMORY_LOW = (
    "ValueError: Free memory on device ({free}/{total} GiB) on startup is less than desired "
    "GPU memory utilization ({util}, {requested} GiB). Decrease GPU memory utilization or "
    "reduce GPU memory used by other processes."
)
# Source: vllm/v1/core/kv_cache_utils.py check_enough_kv_cache_memory, quoted in
# https://github.com/vllm-project/vllm-ascend/issues/5707.
NO_CACHE_MEMORY = (
    "ValueError: No available memory for the cache blocks. Try increasing "
    "`gpu_memory_utilization` when initializing the engine."
)
# Source: same function, quoted in hzqjgthy/vllm KV_Cache_显存不足错误解决方案.md (typo "models's"
# is vLLM's).
MAX_LEN_TOO_LARGE = (
    "ValueError: To serve at least one request with the models's max seq len ({max_len}), "
    "({needed:.2f} GiB KV cache is needed, which is larger than the available KV cache memory "
    "({available:.2f} GiB). Based on the available memory, the estimated maximum model length is "
    "{estimate}. Try increasing `gpu_memory_utilization` or decreasing `max_model_len` when "
    "initializing the engine."
)
# Source: vllm/config.py _get_and_verify_max_len (user max_model_len above the model's limit).
MAX_LEN_ABOVE_DERIVED = (
    "ValueError: User-specified max_model_len ({user}) is greater than the derived max_model_len "
    "(max_position_embeddings={derived} or model_max_length=None in model's config.json). This "
    "may lead to incorrect model outputs or CUDA errors. To allow overriding this maximum, set "
    "the env var VLLM_ALLOW_LONG_MAX_MODEL_LEN=1"
)

# --- Pitfall 7: --quantization ascend ----------------------------------------------------------
# Source: vllm_ascend/quantization/modelslim_config.py maybe_update_config (main).
MODELSLIM_BAR = "=" * 80


# The box's second line: modelslim_config.py@v0.15.0rc1 says "the model at", v0.17.0rc1 and
# later (to main) "the model '{model_name}'" (BY_RELEASE).
MODELSLIM_MODEL_AT = "but the model at '{model}' does not contain the required"
MODELSLIM_MODEL_NAMED = "but the model '{model}' does not contain the required"


def modelslim_not_found(
    model: str, json_names: list[str], model_line: str = MODELSLIM_MODEL_NAMED
) -> list[str]:
    """The boxed ValueError text, line by line; ``model_line`` is the release's wording of
    the second line (``for_release("modelslim_model_line", ...)``)."""
    dash = "  " + "-" * 58
    lines = [
        "ValueError: ",
        MODELSLIM_BAR,
        "ERROR: ModelSlim Quantization Config Not Found",
        MODELSLIM_BAR,
        "",
        "You have enabled '--quantization ascend' (ModelSlim quantization),",
        model_line.format(model=model),
        "quantization config file ('quant_model_description.json').",
        "",
        "This usually means the model weights are NOT quantized by ModelSlim.",
        "",
        "Please choose one of the following solutions:",
        "",
        "  Solution 1: Remove the quantization option (for float/unquantized models)",
        dash,
        "    Remove '--quantization ascend' from your command if you want to",
        "    run the model with the original (float) weights.",
        "",
        "    Example:",
        f"      vllm serve {model}",
        "",
        "  Solution 2: Quantize your model weights with ModelSlim first",
        dash,
        "    Use the ModelSlim tool to quantize your model weights before deployment.",
        "    After quantization, the model directory should contain "
        "'quant_model_description.json'.",
        "    For more information, please refer to:",
        "    https://gitee.com/ascend/msit/tree/master/msmodelslim",
        "",
    ]
    if json_names:
        lines.append(f"  (Found JSON files in model directory: {json_names})")
    lines.append(MODELSLIM_BAR)
    return lines


# vLLM get_quant_config (vllm/model_executor/model_loader/weight_utils.py) while VllmConfig is
# built, when vllm-ascend's ModelSlim config lists quant_model_description.json in
# get_config_filenames() and the model has none: v0.7.3 - v0.14.0rc1 and v0.16.0rc1
# (vllm_ascend/quantization/quant_config.py@v0.11.0, modelslim_config.py@v0.16.0rc1).
# Real log: https://github.com/vllm-project/vllm-ascend/issues/6790 (v0.13.0rc2, v0.14.0rc1).
ASCEND_CONFIG_NOT_FOUND = "ValueError: Cannot find the config file for ascend"
# Source: vllm_ascend/quantization/utils.py@v0.17.0rc1 maybe_auto_detect_quantization (same
# text on main). Auto-detection also exists at v0.15.0rc1 (reverted at v0.16.0rc1); that tag's
# wording is not verified and assumed the same (behaviour_sources.json).
QUANT_AUTODETECTED = (
    "Auto-detected quantization method '{method}' from model files for '{model}'. To override, "
    "pass '--quantization <method>' explicitly."
)
# Source: vLLM ModelConfig._verify_quantization (any method outside its optimized list);
# real logs: https://github.com/vllm-project/vllm-ascend/issues/1233 (v0.8.x) and
# "WARNING ... config.py:628] ascend quantization is not fully optimized yet" (vLLM 0.7.3).
ASCEND_QUANT_SLOW = (
    "ascend quantization is not fully optimized yet. The speed can be slower than "
    "non-quantized models."
)

# --- Pitfall 8: TP vs heads -------------------------------------------------------------------
# vLLM's own lines, one copy in ascend_deploy.model.tp_heads (the planner refuses the same TPs):
# ModelConfig.verify_with_parallel_config (https://github.com/vllm-project/vllm/blob/main/
# vllm/config/model.py) and QKVParallelLinear's divide() (vllm/model_executor/layers/linear.py,
# vllm/distributed/utils.py ensure_divisibility). TP a multiple of the KV heads is served
# (KV heads replicated), as vLLM-Ascend serves Qwen3-235B-A22B (4 KV heads) at TP 8.
HEADS_NOT_DIVISIBLE = tp_heads.HEADS_NOT_DIVISIBLE
KV_NOT_DIVISIBLE = tp_heads.NOT_DIVISIBLE
# Source: https://github.com/gpustack/gpustack/issues/3352 (the CANN runtime's log when the
# container has one mounted device and ASCEND_RT_VISIBLE_DEVICES=4), and vllm-ascend PR #10227
# (the runtime drops mask entries outside the container's numbering; set_device then fails
# with "open device N failed, runtime result = 107001"). docs/device-numbering.md.
SET_VISIBLE_FAILED = (
    "[ERROR] RUNTIME SetDevice:Set visible device failed, invalid device={device}, "
    "input visible devices:{mask}"
)
RT_SET_DEVICE_FAILED = (
    "[ERROR] RUNTIME rtSetDevice:ErrCode=107001, desc=[device id error], InnerCode=0x7010003"
)
ACL_OPEN_DEVICE_FAILED = (
    "[ERROR] ASCENDCL aclrtSetDeviceImpl: open device {device} failed, runtime result = 107001."
)
# Emulator wording (no single upstream text): more ranks than visible NPUs.
NOT_ENOUGH_DEVICES = (
    "RuntimeError: tensor_parallel_size={tp} needs {tp} NPUs but only {visible} are visible "
    "(ASCEND_RT_VISIBLE_DEVICES={mask!r})"
)
ENGINE_CORE_FAILED = "EngineCore failed to start."
# Source: vllm/v1/engine/core_client.py (the API server's final line after an EngineCore failure).
ENGINE_INIT_FAILED = (
    "RuntimeError: Engine core initialization failed. See root cause above. Failed core proc(s): {}"
)

# --- Serving errors ----------------------------------------------------------------------------
# Source: vllm/entrypoints/openai/serving_engine.py _validate_input, quoted in
# https://github.com/ogx-ai/ogx/issues/4534 (response body) and vllm issue #20409.
CONTEXT_TOO_LONG = (
    "This model's maximum context length is {max_len} tokens. However, you requested {total} "
    "tokens ({prompt} in the messages, {completion} in the completion). Please reduce the length "
    "of the messages or completion."
)
INPUT_TOO_LONG = (
    "This model's maximum context length is {max_len} tokens. However, your request has {prompt} "
    "input tokens. Please reduce the length of the input messages."
)
# Source: https://github.com/vllm-project/vllm/issues/4667 (400 body wording).
MAX_TOKENS_MIN = "max_tokens must be at least 1, got {value}."
# Source: vllm/entrypoints/openai/serving_engine.py _check_model.
MODEL_NOT_FOUND = "The model `{model}` does not exist."
# Source: vllm/entrypoints/openai/api_server.py AuthenticationMiddleware:
# 401 with {"error": "Unauthorized"}.
UNAUTHORIZED = "Unauthorized"


# --- Wording per release --------------------------------------------------------------------
# Texts that upstream changed (or stopped printing) between vllm-ascend releases: for each id,
# (first vllm-ascend release, text), ascending; None means that release prints no such line.
# Sources: the constants' comments above and src/ascend_sim/data/behaviour_sources.json.
BY_RELEASE: dict[str, list[tuple[str, str | None]]] = {
    # worker_v1.py determine_available_memory up to v0.14.0rc1; vLLM's memory profiling from
    # v0.15.0rc1 (vllm-ascend #6625) logs the KV budget instead.
    "available_memory": [("v0.7.0", AVAILABLE_MEMORY), ("v0.15.0rc1", None)],
    "available_kv_memory": [("v0.7.0", None), ("v0.15.0rc1", AVAILABLE_KV_MEMORY)],
    "modelslim_model_line": [
        ("v0.15.0rc1", MODELSLIM_MODEL_AT),
        ("v0.17.0rc1", MODELSLIM_MODEL_NAMED),
    ],
}


def for_release(key: str, vllm_ascend: str) -> str | None:
    """The wording of ``key`` that ``vllm_ascend`` prints (None: that release prints none).
    KeyError for an unknown key; before the first entry, the first entry's text."""
    entries = BY_RELEASE[key]
    chosen = entries[0][1]
    for first, text in entries:
        if at_least(vllm_ascend, first):
            chosen = text
    return chosen
