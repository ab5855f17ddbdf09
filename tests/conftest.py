"""Where the suite starts: every test (and every process it starts) runs torch_xla on the CPU,
so a machine with an accelerator plugin gets the same expectations."""

import os

os.environ["PJRT_DEVICE"] = "CPU"
