"""A Python `if` on a tensor value inside a compiled step."""
import torch
import torch_xla


@torch_xla.compile
def clip_step(grads: torch.Tensor, max_norm: float):
    norm = torch.linalg.vector_norm(grads)
    if norm > max_norm:  # RC002: syncs, and bakes the branch into the graph
        grads = grads * (max_norm / norm)
    return grads
