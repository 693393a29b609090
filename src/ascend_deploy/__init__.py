"""ascend_deploy: deploy, check and verify vLLM-Ascend serving on Huawei Ascend NPU hosts.

Host-side modules use the Python standard library only and relative imports, so that
Ansible can ship them to a bare target as module_utils (see ansible.cfg).
"""

# The one version number of the bundle: the CLI, the wheel (pyproject.toml reads it) and the
# Ansible collection (galaxy.yml; tests/unit/test_layout.py checks they agree).
__version__ = "1.1.0"
