"""Real vLLM (CPU backend) behind the emulated Ascend layer: the engine image's ``vllm``."""
