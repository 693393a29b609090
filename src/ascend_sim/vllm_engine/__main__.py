"""``python -m ascend_sim.vllm_engine serve MODEL ...`` (what ``vllm`` runs in the engine image)."""

import sys

from .launch import main

sys.exit(main())
