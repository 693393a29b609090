"""ascend_sim: a simulated Ascend host and vLLM-Ascend emulator for tests without an NPU.

Test infrastructure only; nothing in ascend_deploy imports it.
"""
