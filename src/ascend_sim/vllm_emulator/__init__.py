"""Emulated ``vllm serve`` of vLLM-Ascend: start-up pitfalls and OpenAI-compatible serving."""
