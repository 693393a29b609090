"""Load the numpy engine and tokenizer for a deployment.

``--quantization ascend`` on a float model never reaches this point: every vllm-ascend
release refuses it at start (``startup.py``), so no release loads float weights through
the W8A8 path and the emulator has no garbage-by-quantization loading mode (docs/sources.md,
"Quantization flag on a float model").
"""

from __future__ import annotations

from ascend_deploy.errors import InputError


class LoadedModel:
    """Tokenizer + engine model of a deployment's model directory."""

    def __init__(self, model_dir: str, quantization: str | None = None):
        try:
            from ascend_sim.engine import load_model
            from ascend_sim.tokenizer import load_tokenizer
        except ImportError as exc:
            raise InputError(f"the numpy engine is not installed ({exc})") from None
        self.model_dir = model_dir
        self.tokenizer = load_tokenizer(model_dir)
        # ModelSlim W8A8 checkpoints run their int8 projections (--quantization ascend).
        self.model = load_model(model_dir, "ascend" if quantization == "ascend" else None)

    def close(self) -> None:
        """Nothing to release: the model directory is loaded as it is."""
