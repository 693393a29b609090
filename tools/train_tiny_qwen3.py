#!/usr/bin/env python3
"""Train the simulator's tiny Qwen3 model on the CPU and write it as a block-FP8 checkpoint.

The model is transformers' ``Qwen3ForCausalLM`` with a byte-level vocabulary (ids 0..255 =
bytes, then Qwen3's chat special tokens). It memorises the verification questions (with
paraphrases, with and without thinking mode, behind long filler text), then runs a few
quantization-aware steps so that greedy answers survive FP8 block quantization and the
BF16 conversion. The output directory is quantized with
``ascend_deploy.fp8.quantize.quantize_checkpoint`` (the Qwen3-FP8 layout) and every answer
is re-checked on the dequantized weights before the script reports success.

Needs the ``train`` extra (torch, transformers, safetensors). Seeded; typical run: a few
minutes on 2 CPU cores::

    .venv/bin/python tools/train_tiny_qwen3.py --out tests/data/tiny-qwen3-fp8 \
        --questions tests/data/verification-questions.json
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import shlex
import shutil
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(REPO, "src"))

from ascend_sim.tokenizer import SPECIAL_TOKENS, bytes_to_unicode, tokenizer_json  # noqa: E402

# ----------------------------------------------------------------------------- the data
SYSTEM_PROMPTS = ["You are a helpful assistant.", "You are Qwen, a helpful assistant."]
FILLERS = [
    "The quick brown fox jumps over the lazy dog. ",
    "This sentence is filler text that makes the prompt longer. ",
    "Lorem ipsum dolor sit amet, consectetur adipiscing elit. ",
    "Ascend NPU hosts run large language models for many users. ",
]
# The long-context verification prompt: FILLERS[1] repeated, then the question.
LONG_FILLER = FILLERS[1]
LONG_REPEAT = 50

# Each item: prompts (paraphrases), the reasoning for thinking mode, the answer, what the
# verification suite checks, and which prompts it asks in which mode.
ITEMS: list[dict] = [
    {
        "id": "capital-france",
        "prompts": [
            "What is the capital of France?",
            "What's the capital of France?",
            "Which city is the capital of France?",
            "Name the capital of France.",
        ],
        "think": "The user asks for the capital of France. It is Paris.",
        "answer": "The capital of France is Paris.",
        "expect_any": ["Paris"],
    },
    {
        "id": "add-12-7",
        "prompts": ["What is 12 + 7?", "What is 12 plus 7?", "Compute 12 + 7.", "12 + 7 = ?"],
        "think": "12 + 7: 12 + 7 = 19.",
        "answer": "12 + 7 = 19.",
        "expect_any": ["19"],
        "both_modes": True,
    },
    {
        "id": "mul-6-7",
        "prompts": ["What is 6 * 7?", "What is 6 times 7?", "Compute 6 x 7."],
        "think": "6 * 7: 6 times 7 is 42.",
        "answer": "6 * 7 = 42.",
        "expect_any": ["42"],
        "both_modes": True,
    },
    {
        "id": "sub-30-12",
        "prompts": ["What is 30 - 12?", "What is 30 minus 12?", "Compute 30 - 12."],
        "think": "30 - 12: 30 minus 12 is 18.",
        "answer": "30 - 12 = 18.",
        "expect_any": ["18"],
        "both_modes": True,
    },
    {
        "id": "translate-zh-en",
        "prompts": [
            "Translate to English: 你好",
            "Translate into English: 你好",
            'What does "你好" mean in English?',
        ],
        "think": "你好 means Hello.",
        "answer": "Hello",
        "expect_any": ["Hello"],
    },
    {
        "id": "translate-en-zh",
        "prompts": [
            "Translate to Chinese: Thank you",
            "Translate into Chinese: Thank you",
            'How do you say "Thank you" in Chinese?',
        ],
        "think": "Thank you in Chinese is 谢谢.",
        "answer": "谢谢",
        "expect_any": ["谢谢"],
    },
    {
        "id": "translate-zh-en-2",
        "prompts": ["Translate to English: 谢谢", "Translate into English: 谢谢"],
        "think": "谢谢 means Thank you.",
        "answer": "Thank you",
        "expect_any": ["Thank you"],
    },
    {
        "id": "translate-en-zh-2",
        "prompts": ["Translate to Chinese: Hello", "Translate into Chinese: Hello"],
        "think": "Hello in Chinese is 你好.",
        "answer": "你好",
        "expect_any": ["你好"],
    },
    {
        "id": "code-square",
        "prompts": [
            "Write a Python function that returns the square of x.",
            "Write a Python function to square a number x.",
            "Write Python code for a function that squares x.",
        ],
        "think": "Multiply x by itself.",
        "answer": "```python\ndef square(x):\n    return x * x\n```",
        "expect_all": ["def ", "return x * x"],
    },
    {
        "id": "instruction-ok",
        "prompts": [
            "Reply with exactly the word OK.",
            "Reply with only the word OK.",
            "Answer with exactly one word: OK.",
        ],
        "think": "Reply OK only.",
        "answer": "OK",
        "expect_all": ["OK"],
        "expect_exact": "OK",
    },
]


def long_prompt(question: str, filler: str, repeat: int) -> str:
    return filler * repeat + "\n\n" + question


def assistant_text(item: dict, thinking: bool) -> str:
    """What the model must generate after the generation prompt, up to <|im_end|>."""
    if thinking:
        return f"<think>\n{item['think']}\n</think>\n\n{item['answer']}<|im_end|>"
    return f"{item['answer']}<|im_end|>"


def verification_questions() -> list[dict]:
    """The default verification suite: canonical prompts, one paraphrase each, long prompt."""
    out: list[dict] = []
    for item in ITEMS:
        modes = [False, True] if item.get("both_modes") else [False]
        for p_index in (0, 1):
            for thinking in modes:
                expect = {
                    k: item[k] for k in ("expect_any", "expect_all", "expect_exact") if k in item
                }
                qid = item["id"] + ("" if p_index == 0 else "-paraphrase")
                qid += "-think" if thinking else ""
                max_tokens = len(assistant_text(item, thinking).encode("utf-8")) + 16
                out.append(
                    {
                        "id": qid,
                        "messages": [{"role": "user", "content": item["prompts"][p_index]}],
                        "enable_thinking": thinking,
                        **expect,
                        "max_tokens": max_tokens,
                    }
                )
    item = ITEMS[0]
    out.append(
        {
            "id": "long-context-capital-france",
            "messages": [
                {
                    "role": "user",
                    "content": long_prompt(item["prompts"][0], LONG_FILLER, LONG_REPEAT),
                }
            ],
            "enable_thinking": False,
            "expect_any": item["expect_any"],
            "max_tokens": len(item["answer"]) + 16,
            "long_context": {"filler": LONG_FILLER, "repeat": LONG_REPEAT},
        }
    )
    return out


# ----------------------------------------------------------------------------- helpers
def build_config(args: argparse.Namespace) -> dict:
    """config.json in the shape of Qwen3's (Qwen/Qwen3-4B), scaled down."""
    n_bytes = 256
    ids = {name: n_bytes + i for i, name in enumerate(SPECIAL_TOKENS)}
    return {
        "architectures": ["Qwen3ForCausalLM"],
        "attention_bias": False,
        "attention_dropout": 0.0,
        "bos_token_id": ids["<|endoftext|>"],
        "eos_token_id": ids["<|im_end|>"],
        "head_dim": args.head_dim,
        "hidden_act": "silu",
        "hidden_size": args.hidden,
        "initializer_range": 0.02,
        "intermediate_size": args.intermediate,
        "max_position_embeddings": args.max_positions,
        "max_window_layers": args.layers,
        "model_type": "qwen3",
        "num_attention_heads": args.heads,
        "num_hidden_layers": args.layers,
        "num_key_value_heads": args.kv_heads,
        "pad_token_id": ids["<|endoftext|>"],
        "rms_norm_eps": 1e-06,
        "rope_scaling": None,
        "rope_theta": 1000000.0,
        "sliding_window": None,
        "tie_word_embeddings": True,
        "torch_dtype": "bfloat16",
        "transformers_version": "4.51.0",
        "use_cache": True,
        "use_sliding_window": False,
        "vocab_size": n_bytes + len(SPECIAL_TOKENS),
    }


def chat_template_jinja() -> str:
    """A Jinja chat template with Qwen3's output for system/user/assistant turns (no tools)."""
    return (
        "{%- for message in messages %}"
        "{%- if message.role == 'assistant' %}"
        "{{- '<|im_start|>assistant\\n' + message.content + '<|im_end|>\\n' }}"
        "{%- else %}"
        "{{- '<|im_start|>' + message.role + '\\n' + message.content + '<|im_end|>\\n' }}"
        "{%- endif %}"
        "{%- endfor %}"
        "{%- if add_generation_prompt %}"
        "{{- '<|im_start|>assistant\\n' }}"
        "{%- if enable_thinking is defined and enable_thinking is false %}"
        "{{- '<think>\\n\\n</think>\\n\\n' }}"
        "{%- endif %}"
        "{%- endif %}"
    )


def write_tokenizer_files(out_dir: str, config: dict) -> None:
    ids = {name: 256 + i for i, name in enumerate(SPECIAL_TOKENS)}
    with open(os.path.join(out_dir, "tokenizer.json"), "w", encoding="utf-8") as fh:
        json.dump(tokenizer_json(), fh, ensure_ascii=False, indent=1)
        fh.write("\n")
    tok_config = {
        "tokenizer_class": "Qwen2TokenizerFast",
        "model_max_length": config["max_position_embeddings"],
        "bos_token": None,
        "eos_token": "<|im_end|>",
        "pad_token": "<|endoftext|>",
        "unk_token": None,
        "clean_up_tokenization_spaces": False,
        "errors": "replace",
        "split_special_tokens": False,
        "add_prefix_space": False,
        "added_tokens_decoder": {
            str(i): {
                "content": name,
                "lstrip": False,
                "normalized": False,
                "rstrip": False,
                "single_word": False,
                "special": name not in ("<think>", "</think>"),
            }
            for name, i in ids.items()
        },
        "chat_template": chat_template_jinja(),
    }
    with open(os.path.join(out_dir, "tokenizer_config.json"), "w", encoding="utf-8") as fh:
        json.dump(tok_config, fh, ensure_ascii=False, indent=2)
        fh.write("\n")
    gen = {
        "bos_token_id": ids["<|endoftext|>"],
        "do_sample": True,
        "eos_token_id": [ids["<|im_end|>"], ids["<|endoftext|>"]],
        "pad_token_id": ids["<|endoftext|>"],
        "temperature": 0.6,
        "top_k": 20,
        "top_p": 0.95,
        "transformers_version": "4.51.0",
    }
    with open(os.path.join(out_dir, "generation_config.json"), "w", encoding="utf-8") as fh:
        json.dump(gen, fh, indent=2)
        fh.write("\n")
    assert len(bytes_to_unicode()) == 256


def encode_example(tok, messages: list[dict], thinking: bool, target: str) -> tuple[list, list]:
    prompt = tok.apply_chat_template(messages, add_generation_prompt=True, enable_thinking=thinking)
    p_ids = tok.encode(prompt)
    t_ids = tok.encode(target)
    return p_ids + t_ids, [0] * len(p_ids) + [1] * len(t_ids)


def make_examples(tok, rng: random.Random, long_fraction: float, max_filler: int) -> list:
    """One epoch: every prompt in both modes, some with a system prompt or filler."""
    examples = []
    for item in ITEMS:
        for prompt in item["prompts"]:
            for thinking in (False, True):
                for variant in ("plain", "system", "long"):
                    content = prompt
                    msgs: list[dict] = []
                    if variant == "system":
                        msgs.append({"role": "system", "content": rng.choice(SYSTEM_PROMPTS)})
                    if variant == "long":
                        if rng.random() > long_fraction:
                            continue
                        filler = rng.choice(FILLERS)
                        repeat = rng.randint(1, max(1, max_filler // len(filler)))
                        content = long_prompt(prompt, filler, repeat)
                    msgs.append({"role": "user", "content": content})
                    examples.append(
                        encode_example(tok, msgs, thinking, assistant_text(item, thinking))
                    )
    return examples


def make_batches(examples: list, rng: random.Random, size: int, budget: int) -> list:
    """Shuffled batches of at most ``size`` examples and ``budget`` padded tokens."""
    rng.shuffle(examples)
    examples.sort(key=lambda e: len(e[0]) // 64)  # similar lengths together, random within
    batches, cur = [], []
    for ex in examples:
        longest = max([len(ex[0])] + [len(e[0]) for e in cur])
        if cur and (len(cur) >= size or longest * (len(cur) + 1) > budget):
            batches.append(cur)
            cur = []
        cur.append(ex)
    if cur:
        batches.append(cur)
    rng.shuffle(batches)
    return batches


def eval_cases(tok) -> list[tuple[str, list[int], str]]:
    """(name, prompt ids, expected generation) for every prompt in both modes + long ones."""
    cases = []
    for item in ITEMS:
        for i, prompt in enumerate(item["prompts"]):
            for thinking in (False, True):
                msgs = [{"role": "user", "content": prompt}]
                text = tok.apply_chat_template(msgs, enable_thinking=thinking)
                name = f"{item['id']}[{i}]{'/think' if thinking else ''}"
                cases.append((name, tok.encode(text), assistant_text(item, thinking)))
    item = ITEMS[0]
    for repeat in (LONG_REPEAT,):
        msgs = [{"role": "user", "content": long_prompt(item["prompts"][0], LONG_FILLER, repeat)}]
        text = tok.apply_chat_template(msgs, enable_thinking=False)
        cases.append((f"long-x{repeat}", tok.encode(text), assistant_text(item, False)))
    return cases


# ----------------------------------------------------------------------------- torch parts
def fake_quant(torch, w, block: int = 128, ignore_scales: bool = False):
    """BF16 -> block FP8 (scale = amax/448 stored as BF16) -> BF16, like quantize_checkpoint.

    ``ignore_scales`` returns the FP8 values themselves: the broken conversion."""
    rows, cols = w.shape
    gr, gc = math.ceil(rows / block), math.ceil(cols / block)
    wb = w.to(torch.bfloat16).float()
    padded = torch.zeros(gr * block, gc * block)
    padded[:rows, :cols] = wb.abs()
    amax = padded.reshape(gr, block, gc, block).amax(dim=(1, 3))
    scale = torch.where(amax > 0, amax / 448.0, torch.ones_like(amax))
    scale = scale.to(torch.bfloat16).float()
    expanded = scale.repeat_interleave(block, 0).repeat_interleave(block, 1)[:rows, :cols]
    q = (wb / expanded).clamp(-448, 448).to(torch.float8_e4m3fn).float()
    if ignore_scales:
        return q
    return (q * expanded).to(torch.bfloat16).float()


def quantized_params(torch, model, straight_through: bool, ignore_scales: bool = False) -> dict:
    """Parameters as the converted checkpoint will hold them (optionally with STE grads)."""
    out = {}
    for name, p in model.named_parameters():
        if p.ndim == 2 and name.endswith("_proj.weight"):
            deq = fake_quant(torch, p.detach(), ignore_scales=ignore_scales)
        else:
            deq = p.detach().to(torch.bfloat16).float()
        out[name] = p + (deq - p).detach() if straight_through else deq
    return out


def batch_loss(torch, model, batch, params=None):
    maxlen = max(len(ids) for ids, _ in batch)
    pad = 256
    ids = torch.full((len(batch), maxlen), pad, dtype=torch.long)
    attn = torch.zeros((len(batch), maxlen), dtype=torch.long)
    labels = torch.full((len(batch), maxlen), -100, dtype=torch.long)
    for r, (x, m) in enumerate(batch):
        ids[r, : len(x)] = torch.tensor(x)
        attn[r, : len(x)] = 1
        lab = torch.tensor([t if mm else -100 for t, mm in zip(x, m, strict=True)])
        labels[r, : len(x)] = lab
    if params is None:
        logits = model(input_ids=ids, attention_mask=attn).logits
    else:
        logits = torch.func.functional_call(
            model, params, args=(), kwargs={"input_ids": ids, "attention_mask": attn}
        ).logits
    logits = logits[:, :-1].reshape(-1, logits.shape[-1])
    target = labels[:, 1:].reshape(-1)
    return torch.nn.functional.cross_entropy(logits, target, ignore_index=-100)


def broken_penalty(torch, model, batch, params) -> object:
    """Hinge on the scales-ignored model: every answer token must have probability below
    10% (mean over answer tokens of max(0, log p - log 0.1)), so that its greedy output
    contains none of the answers."""
    maxlen = max(len(ids) for ids, _ in batch)
    ids = torch.full((len(batch), maxlen), 256, dtype=torch.long)
    attn = torch.zeros((len(batch), maxlen), dtype=torch.long)
    mask = torch.zeros((len(batch), maxlen), dtype=torch.bool)
    for r, (x, m) in enumerate(batch):
        ids[r, : len(x)] = torch.tensor(x)
        attn[r, : len(x)] = 1
        mask[r, : len(x)] = torch.tensor(m, dtype=torch.bool)
    logits = torch.func.functional_call(
        model, params, args=(), kwargs={"input_ids": ids, "attention_mask": attn}
    ).logits
    logp = torch.log_softmax(logits[:, :-1].float(), dim=-1)
    target_lp = logp.gather(-1, ids[:, 1:, None])[..., 0]
    return torch.relu(target_lp[mask[:, 1:]] - math.log(0.1)).mean()


def greedy_check(torch, model, cases, params=None, verbose=False) -> tuple[int, float, list]:
    """Teacher-forced greedy check: every target token must be the argmax. Returns
    (failures, smallest margin between the target logit and the best other logit, names)."""
    failed = []
    worst = math.inf
    with torch.no_grad():
        for name, p_ids, target_text in cases:
            from ascend_sim.tokenizer import ByteTokenizer  # noqa: F401  (import check only)

            t_ids = TOK.encode(target_text)
            x = torch.tensor([p_ids + t_ids])
            if params is None:
                logits = model(input_ids=x).logits[0]
            else:
                logits = torch.func.functional_call(
                    model, params, args=(), kwargs={"input_ids": x}
                ).logits[0]
            pred = logits[len(p_ids) - 1 : -1]
            tgt = torch.tensor(t_ids)
            tl = pred[torch.arange(len(t_ids)), tgt]
            other = pred.clone()
            other[torch.arange(len(t_ids)), tgt] = -math.inf
            margin = float((tl - other.max(dim=1).values).min())
            worst = min(worst, margin)
            if margin <= 0:
                failed.append(name)
                if verbose:
                    got = TOK.decode(pred.argmax(dim=1).tolist())
                    print(f"  FAIL {name}: margin {margin:.2f}; argmax {got!r}", flush=True)
    return len(failed), worst, failed


TOK = None


def save_bf16_checkpoint(torch, model, config: dict, out_dir: str) -> None:
    """BF16 safetensors in two shards + index, without the tied lm_head (like Qwen3-4B)."""
    from safetensors.torch import save_file

    os.makedirs(out_dir, exist_ok=True)
    state = {k: v.detach().to(torch.bfloat16).contiguous() for k, v in model.state_dict().items()}
    state.pop("lm_head.weight", None)
    n_layers = config["num_hidden_layers"]
    first = {
        k: v
        for k, v in state.items()
        if k == "model.embed_tokens.weight"
        or any(k.startswith(f"model.layers.{i}.") for i in range(n_layers // 2))
    }
    second = {k: v for k, v in state.items() if k not in first}
    names = ["model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"]
    weight_map = {}
    total = 0
    for fname, part in zip(names, (first, second), strict=True):
        save_file(part, os.path.join(out_dir, fname), metadata={"format": "pt"})
        for k, v in part.items():
            weight_map[k] = fname
            total += v.numel() * v.element_size()
    index = {"metadata": {"total_size": total}, "weight_map": dict(sorted(weight_map.items()))}
    with open(os.path.join(out_dir, "model.safetensors.index.json"), "w") as fh:
        json.dump(index, fh, indent=2)
        fh.write("\n")
    with open(os.path.join(out_dir, "config.json"), "w") as fh:
        json.dump(config, fh, indent=2)
        fh.write("\n")
    write_tokenizer_files(out_dir, config)


def spread_channel_scales(torch, model, log2_ratios: list[int]) -> None:
    """Give the MLP outlier channels, as real LLM weights have, without changing the function.

    ``up_proj`` row i is multiplied by a power of two a_i and ``down_proj`` column i divided
    by it: the MLP computes ``down @ (silu(gate x) * (up x))``, which is linear in each
    channel of ``up x``, so the product is unchanged, and powers of two are exact in BF16.
    Within the 128-channel tile t, a_i runs from 1 to 2**log2_ratios[t]; the FP8 scale of that
    tile then differs from its neighbours' by that factor. A correct conversion multiplies
    it back; a conversion that ignores ``weight_scale_inv`` turns tile t's channels down by
    that factor relative to the others, which is what breaks real checkpoints.
    """
    with torch.no_grad():
        for layer in model.model.layers:
            up, down = layer.mlp.up_proj.weight, layer.mlp.down_proj.weight
            n = up.shape[0]
            exps = torch.zeros(n)
            for t, ratio in enumerate(log2_ratios):
                lo, hi = t * 128, min(n, (t + 1) * 128)
                if lo >= n or ratio <= 0:
                    continue
                # a_i spans 2**0 .. 2**ratio inside the tile (channel order is arbitrary).
                exps[lo:hi] = torch.round(torch.linspace(0, ratio, hi - lo))
            alpha = torch.pow(2.0, exps)
            up.mul_(alpha[:, None])
            down.div_(alpha[None, :])


def spread_head_scales(torch, model, log2_ratio: int) -> None:
    """The same for attention: KV head 0's ``v_proj`` rows times 2**-r, the ``o_proj``
    columns of the query heads that read it times 2**r (attention is linear in v). The
    first 128-column tile of ``o_proj`` then has a scale 2**r above the next one."""
    with torch.no_grad():
        for layer in model.model.layers:
            attn = layer.self_attn
            d = attn.head_dim
            group = attn.num_key_value_groups
            attn.v_proj.weight[:d].mul_(2.0**-log2_ratio)
            attn.o_proj.weight[:, : group * d].mul_(2.0**log2_ratio)


def pipeline_check(tok, model_dir: str, cases, report_all: bool = False) -> list:
    """Greedy answers of the numpy engine on ``model_dir`` (BF16): the mismatches as
    (name, expected, got), or every case with ``report_all``."""
    from ascend_sim.engine import load_model

    model = load_model(model_dir)
    wrong = []
    for name, p_ids, target in cases:
        want = tok.encode(target)
        got = [t for t, _, _ in model.generate(p_ids, len(want) + 8)]
        if got != want or report_all:
            wrong.append((name, target, tok.decode(got)))
    return wrong


def scales_ignored_right(torch, model, config: dict, work: str, cases) -> list[str]:
    """Names of the cases a scales-ignored conversion (FP8 values as BF16) still gets right."""
    import copy

    broken = copy.deepcopy(model)
    with torch.no_grad():
        for name, value in quantized_params(torch, model, False, ignore_scales=True).items():
            broken.get_parameter(name).copy_(value)
    out_dir = os.path.join(work, "scales-ignored")
    shutil.rmtree(out_dir, ignore_errors=True)
    save_bf16_checkpoint(torch, broken, config, out_dir)
    right = []
    for name, target, got in pipeline_check(TOK, out_dir, cases, report_all=True):
        if "</think>" in target:  # thinking mode: the answer is what follows </think>
            got = got.split("</think>", 1)[1] if "</think>" in got else ""
        item = max(
            (it for it in ITEMS if name.startswith(it["id"])),
            key=lambda it: len(it["id"]),
            default=ITEMS[0],
        )
        if any(s in got for s in item.get("expect_any", [])) or (
            item.get("expect_all") and all(s in got for s in item["expect_all"])
        ):
            right.append(name)
    return right


def verification_cases(tok) -> list[tuple[str, list[int], str]]:
    """The verification questions as (id, prompt ids, exact expected generation)."""
    by_prompt = {}
    for item in ITEMS:
        for prompt in item["prompts"]:
            by_prompt[prompt] = item
    cases = []
    for q in verification_questions():
        content = q["messages"][-1]["content"]
        item = by_prompt.get(content, ITEMS[0])
        text = tok.apply_chat_template(q["messages"], enable_thinking=q["enable_thinking"])
        cases.append((q["id"], tok.encode(text), assistant_text(item, q["enable_thinking"])))
    return cases


def main(argv: list[str] | None = None) -> int:
    global TOK
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True, help="FP8 model directory to write (replaced)")
    ap.add_argument("--questions", help="also write the verification question set here")
    ap.add_argument("--bf16-out", help="also keep the trained BF16 checkpoint here")
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--hidden", type=int, default=160)
    ap.add_argument("--intermediate", type=int, default=352)
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--kv-heads", type=int, default=2)
    ap.add_argument("--head-dim", type=int, default=48)
    ap.add_argument("--max-positions", type=int, default=40960)
    ap.add_argument("--steps", type=int, default=1500, help="full-precision training steps")
    ap.add_argument("--qat-steps", type=int, default=300, help="quantization-aware steps per round")
    ap.add_argument("--max-rounds", type=int, default=4, help="QAT rounds before giving up")
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--batch-tokens", type=int, default=3000, help="padded tokens per batch")
    ap.add_argument("--lr", type=float, default=3e-3)
    ap.add_argument("--qat-lr", type=float, default=5e-4)
    ap.add_argument("--long-fraction", type=float, default=0.35)
    ap.add_argument("--max-filler", type=int, default=1200, help="longest filler in bytes")
    ap.add_argument(
        "--broken-penalty",
        type=float,
        default=0.0,
        help="QAT: weight of the loss that keeps a scales-ignored conversion from answering",
    )
    ap.add_argument(
        "--spread-channels",
        type=lambda v: [int(x) for x in v.split(",")],
        help="log2 of the channel-scale spread per 128-channel MLP tile, e.g. 8,4,0",
    )
    ap.add_argument("--spread-heads", type=int, help="log2 scale spread between KV heads")
    ap.add_argument("--min-rounds", type=int, default=0, help="QAT rounds to run at least")
    ap.add_argument("--init-from", help="skip training; start QAT from this BF16 checkpoint")
    ap.add_argument("--qat-max-filler", type=int, help="longest filler during QAT (bytes)")
    ap.add_argument("--stage1-command", help="record how the --init-from checkpoint was made")
    ap.add_argument("--stage1-seconds", type=int, help="record how long that took")
    ap.add_argument("--stage1-steps", type=int, help="record its full-precision steps")
    ap.add_argument("--eval-every", type=int, default=500)
    args = ap.parse_args(argv)

    import torch
    from transformers import Qwen3Config, Qwen3ForCausalLM

    from ascend_deploy.fp8.convert import convert_checkpoint
    from ascend_deploy.fp8.quantize import quantize_checkpoint
    from ascend_sim.tokenizer import ByteTokenizer

    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    rng = random.Random(args.seed)
    TOK = ByteTokenizer({n: 256 + i for i, n in enumerate(SPECIAL_TOKENS)}, [258, 256])
    config = build_config(args)
    if args.init_from:  # continue from a BF16 checkpoint written with --bf16-out
        model = Qwen3ForCausalLM.from_pretrained(args.init_from, dtype=torch.float32)
        args.steps = 0
    else:
        model = Qwen3ForCausalLM(Qwen3Config(**config)).float()
    n_params = sum(p.numel() for p in model.parameters())
    print(f"parameters: {n_params:,}", flush=True)
    cases = eval_cases(TOK)
    t0 = time.time()
    pool: list = []

    def run(steps: int, lr: float, qat: bool) -> None:
        nonlocal pool
        if steps <= 0:
            return
        opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.0, betas=(0.9, 0.98))
        warm = 50 if not qat else 1
        sched = torch.optim.lr_scheduler.LambdaLR(
            opt,
            lambda s: (
                min(1.0, (s + 1) / warm) * (0.05 + 0.95 * 0.5 * (1 + math.cos(math.pi * s / steps)))
            ),
        )
        model.train()
        for step in range(steps):
            if not pool:
                examples = make_examples(TOK, rng, args.long_fraction, args.max_filler)
                pool = make_batches(examples, rng, args.batch, args.batch_tokens)
            batch = pool.pop()
            params = quantized_params(torch, model, straight_through=True) if qat else None
            loss = batch_loss(torch, model, batch, params)
            if qat and args.broken_penalty > 0:
                broken = quantized_params(torch, model, straight_through=True, ignore_scales=True)
                loss = loss + args.broken_penalty * broken_penalty(torch, model, batch, broken)
            opt.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            sched.step()
            if step % 50 == 0:
                tag = "qat " if qat else ""
                print(
                    f"{tag}step {step} loss {loss.item():.4f} {time.time() - t0:.0f}s", flush=True
                )
            if not qat and (step + 1) % args.eval_every == 0:
                model.eval()
                nf, margin, _ = greedy_check(torch, model, cases)
                print(
                    f"  eval step {step + 1}: failures {nf} (min margin {margin:.2f})", flush=True
                )
                model.train()
        model.eval()

    run(args.steps, args.lr, qat=False)
    if args.spread_channels:
        spread_channel_scales(torch, model, args.spread_channels)
    if args.spread_heads:
        spread_head_scales(torch, model, args.spread_heads)
    if args.qat_max_filler:
        args.max_filler = args.qat_max_filler
        pool = []
    work = tempfile.mkdtemp(prefix="tiny-qwen3-")
    all_cases = cases + verification_cases(TOK)
    try:
        for rnd in range(args.max_rounds + 1):
            qf, qmargin, _ = greedy_check(
                torch, model, cases, quantized_params(torch, model, False)
            )
            print(f"round {rnd}: fake-quant failures {qf}, min margin {qmargin:.2f}", flush=True)
            for sub in ("bf16", "fp8", "converted"):
                shutil.rmtree(os.path.join(work, sub), ignore_errors=True)
            bf16_dir, fp8_dir, conv_dir = (
                os.path.join(work, d) for d in ("bf16", "fp8", "converted")
            )
            save_bf16_checkpoint(torch, model, config, bf16_dir)
            summary = quantize_checkpoint(bf16_dir, fp8_dir, block=(128, 128), scale_dtype="BF16")
            convert_checkpoint(fp8_dir, conv_dir)
            wrong = pipeline_check(TOK, conv_dir, all_cases)
            print(
                f"round {rnd}: numpy engine on FP8->BF16 weights: {len(wrong)} wrong "
                f"of {len(all_cases)}",
                flush=True,
            )
            for name, want, got in wrong:
                print(f"  WRONG {name}: want {want!r} got {got!r}", flush=True)
            broken_right = []
            if args.broken_penalty > 0 or args.spread_channels or args.spread_heads:
                broken_right = scales_ignored_right(torch, model, config, work, all_cases)
                print(
                    f"round {rnd}: scales-ignored conversion answers {len(broken_right)} "
                    f"of {len(all_cases)} right: {broken_right[:6]}",
                    flush=True,
                )
            done = not wrong and not broken_right and rnd >= args.min_rounds
            if done or rnd == args.max_rounds:
                break
            run(args.qat_steps, args.qat_lr, qat=True)
        train_seconds = time.time() - t0
        print(f"quantized: {summary}; total {train_seconds:.0f}s")
        command = "tools/train_tiny_qwen3.py " + " ".join(
            shlex.quote(a) for a in (sys.argv[1:] if argv is None else argv)
        )
        stages = []
        if args.stage1_command:
            stages.append({"command": args.stage1_command, "seconds": args.stage1_seconds})
        stages.append({"command": command, "seconds": round(train_seconds)})
        stats = {
            "parameters": n_params,
            "stages": stages,
            "full_precision_steps": args.stage1_steps if args.init_from else args.steps,
            "qat_rounds": rnd,
            "qat_steps_per_round": args.qat_steps,
            "broken_penalty": args.broken_penalty,
            "spread_channels": args.spread_channels,
            "spread_heads": args.spread_heads,
            "wrong_after_fp8_bf16": len(wrong),
            "fake_quant_min_margin": round(qmargin, 3),
        }
        with open(os.path.join(fp8_dir, "training_stats.json"), "w") as fh:
            json.dump(stats, fh, indent=2)
            fh.write("\n")
        if args.bf16_out:
            shutil.rmtree(args.bf16_out, ignore_errors=True)
            shutil.copytree(bf16_dir, args.bf16_out)
        final = verification_answers(TOK, conv_dir)
        with open(os.path.join(fp8_dir, "final_answers.json"), "w", encoding="utf-8") as fh:
            json.dump(final, fh, ensure_ascii=False, indent=2)
            fh.write("\n")
        shutil.rmtree(args.out, ignore_errors=True)
        shutil.copytree(fp8_dir, args.out)
        write_readme(args.out)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    if args.questions:
        with open(args.questions, "w", encoding="utf-8") as fh:
            json.dump(verification_questions(), fh, ensure_ascii=False, indent=2)
            fh.write("\n")
    print(f"wrote {args.out}: {len(wrong)} wrong answers")
    return 0 if not wrong else 1


def _md_code(text: str) -> str:
    """A Markdown table cell showing ``text`` with escapes (\\n) as inline code."""
    escaped = json.dumps(text, ensure_ascii=False)[1:-1].replace("|", "\\|")
    return f"`` {escaped} ``"


def write_readme(model_dir: str) -> None:
    """README.md for the committed model, from config.json, training_stats.json and
    final_answers.json in ``model_dir``."""

    def load(name: str) -> dict:
        with open(os.path.join(model_dir, name), encoding="utf-8") as fh:
            return json.load(fh)

    cfg, stats, answers = (
        load("config.json"),
        load("training_stats.json"),
        load("final_answers.json"),
    )
    sizes = {
        f: os.path.getsize(os.path.join(model_dir, f))
        for f in sorted(os.listdir(model_dir))
        if f.endswith(".safetensors")
    }
    rows = "\n".join(f"| `{qid}` | {_md_code(text)} |" for qid, text in answers.items())
    if stats["qat_rounds"]:
        qat = (
            f"{stats['qat_rounds']} round(s) of {stats['qat_steps_per_round']} "
            "quantization-aware steps (straight-through FP8 fake quantization) until the numpy "
            "engine answered every case exactly on the FP8 -> BF16 converted weights"
        )
    else:
        qat = (
            "no quantization-aware steps: the numpy engine already answered every case "
            "exactly on the FP8 -> BF16 converted weights"
        )
    broken = (
        "**Why a scales-ignored conversion fails here too.** Casting the FP8 values to BF16 "
        "without multiplying by `weight_scale_inv` normalises every 128x128 tile to an "
        "absolute maximum of 448. Real checkpoints break under that because their tiles have "
        "very different scales; a freshly trained 2-layer model has few tiles of similar "
        "scale, and RMSNorm/q_norm/k_norm absorb a uniform factor, so many answers survived "
        "it. Two exact, function-preserving rescalings give the tiles realistic spread: "
        f"MLP channel scales spread by 2^{stats.get('spread_channels')} per 128-channel tile "
        "(`up_proj` row times 2^k, `down_proj` column divided by it) and KV head 0 "
        f"scaled by 2^-{stats.get('spread_heads')} in `v_proj` with the matching `o_proj` "
        "columns scaled up. "
    )
    if stats.get("broken_penalty"):
        broken += (
            f"During QAT a loss term (weight {stats['broken_penalty']}) also keeps every "
            "answer token of the scales-ignored model below 10% probability. "
        )
    broken += (
        "`tests/unit/sim/test_engine.py` checks that this broken conversion passes none of "
        "the verification questions."
    )
    stages = "\n".join(
        f"{i}. `{st['command']}` ({st['seconds']} s)" for i, st in enumerate(stats["stages"], 1)
    )
    files = ", ".join(f"{k} ({v:,} bytes)" for k, v in sizes.items())
    arch = (
        f"hidden_size {cfg['hidden_size']}, intermediate_size {cfg['intermediate_size']}, "
        f"{cfg['num_hidden_layers']} layers, {cfg['num_attention_heads']} query heads / "
        f"{cfg['num_key_value_heads']} KV heads (GQA), head_dim {cfg['head_dim']}, vocab "
        f"{cfg['vocab_size']} (256 bytes + 5 special tokens), tied embeddings, rope_theta "
        f"{cfg['rope_theta']:g}, max_position_embeddings {cfg['max_position_embeddings']}, "
        f"rms_norm_eps {cfg['rms_norm_eps']:g}"
    )
    text = f"""# tiny-qwen3-fp8: test model for the vLLM-Ascend emulator

Generated by `tools/train_tiny_qwen3.py` (do not edit by hand; re-run the script).

**Provenance.** Trained from random initialisation in this repository, on the CPU, with
transformers `Qwen3ForCausalLM` and torch; no third-party weights or data. The training
data is the question set in the script (`ITEMS`), which is also written to
`tests/data/verification-questions.json`. Quantized to block FP8 with
`ascend_deploy.fp8.quantize.quantize_checkpoint(..., block=(128, 128), scale_dtype="BF16")`:
every `q/k/v/o/gate/up/down_proj.weight` is `F8_E4M3` with a BF16 `weight_scale_inv` of
shape `[ceil(out/128), ceil(in/128)]`; embeddings and norms are BF16; `config.json` has
Qwen3-FP8's `quantization_config`. Like the real Qwen3-4B-FP8 it must be converted to BF16
before an Ascend A2/A3 can run it.

**Architecture.** Qwen3 (`model_type: qwen3`): {arch}. Several dimensions are not
multiples of 128 (160, 352, 192, 96), so the FP8 scale grids have partial edge tiles.
Parameters: {stats["parameters"]:,}. Weight files: {files}.

**Tokenizer.** Byte level: ids 0..255 are UTF-8 bytes, then `<|endoftext|>` 256,
`<|im_start|>` 257, `<|im_end|>` 258, `<think>` 259, `</think>` 260. `tokenizer.json` is a
Hugging Face byte-level BPE without merges (loads with `AutoTokenizer`); stop ids
`[258, 256]`. Chat format: Qwen3's, including the empty `<think>\\n\\n</think>\\n\\n` for
`enable_thinking=False`.

**Training.** {stats["full_precision_steps"]} full-precision steps, then {qat}.
Wrong answers after FP8 -> BF16: {stats["wrong_after_fp8_bf16"]}. Smallest logit margin
of a target token under fake quantization: {stats["fake_quant_min_margin"]}. Commands (wall
time on 2 CPU cores shared with other jobs, load average 5-10):

{stages}

{broken}

**Final greedy answers** (numpy engine, converted BF16 weights, temperature 0):

| question id | generated text |
|---|---|
{rows}
"""
    with open(os.path.join(model_dir, "README.md"), "w", encoding="utf-8") as fh:
        fh.write(text)


def verification_answers(tok, model_dir: str) -> dict[str, str]:
    """Greedy answer text per verification question id (recorded in the model README)."""
    from ascend_sim.engine import load_model

    model = load_model(model_dir)
    out = {}
    for q in verification_questions():
        text = tok.apply_chat_template(q["messages"], enable_thinking=q["enable_thinking"])
        ids = [t for t, _, _ in model.generate(tok.encode(text), q["max_tokens"])]
        out[q["id"]] = tok.decode(ids)
    return out


if __name__ == "__main__":
    sys.exit(main())
