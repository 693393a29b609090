"""A model directory: safetensors headers, weight files, config, staging of copies."""
