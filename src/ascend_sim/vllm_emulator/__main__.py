"""``python -m ascend_sim.vllm_emulator serve MODEL ...`` (what ``vllm`` runs in the image)."""

import sys

from .cli import main

sys.exit(main())
