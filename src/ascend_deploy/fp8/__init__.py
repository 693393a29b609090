"""Offline block-FP8 -> BF16 checkpoint conversion (Atlas A2/A3 have no FP8 compute path).

``layout``, ``manifest`` and ``safetensors_write`` are standard library only, so the cheap
``convert.conversion_status`` works on a target without numpy; the tile math
(``dequant``, ``quantize``) imports numpy and ml_dtypes lazily.
"""

# Recorded in every output manifest; bump when the output bytes could change.
CONVERTER_VERSION = "1"
