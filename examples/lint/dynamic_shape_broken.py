"""Mask gathers and a data-dependent top-k: a new program for every new length."""
import torch
from torch import nn


class Router(nn.Module):
    def forward(self, tokens, scores):
        keep = tokens[scores > 0.5]  # RC005: length depends on the data
        k = int((scores > 0.5).sum())  # (RC001 too: int() of a tensor)
        top = torch.topk(scores, k)  # RC005: k read from the data
        return keep, top
