"""Facts read on a target: npu-smi, driver/CANN/torch versions, processes, deployed state."""
