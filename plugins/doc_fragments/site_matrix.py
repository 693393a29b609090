"""Documentation of the site matrix options that ascend_compat and ascend_preflight share."""


class ModuleDocFragment:
    DOCUMENTATION = r"""
options:
  site_matrix:
    description:
      - A site matrix (C(ascend-deploy compat list --matrix FILE)) merged over O(matrix), as its
        JSON text or the parsed document C({"rows":[...]}). The role reads the file on the
        controller.
      - A row of the same C(vllm_ascend) replaces the shipped one, a new release is added; a row
        that breaks the matrix's row schema fails naming the release and the field.
    type: raw
  site_matrix_file:
    description: Controller path of O(site_matrix), for messages.
    type: str
"""
