"""ascend_deploy: deploy, check and verify vLLM-Ascend serving on Huawei Ascend NPU hosts.

Host-side modules use the Python standard library only and relative imports, so that
Ansible can ship them to a bare target as module_utils (see ansible.cfg).
"""

__version__ = "0.1.0"
