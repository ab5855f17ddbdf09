"""Imports torch_xla and never runs a graph."""

import torch_xla

print(torch_xla.__version__)
