"""Fixed: the clip factor is computed on the device; one graph for both cases."""
import torch
import torch_xla


@torch_xla.compile
def clip_step(grads: torch.Tensor, max_norm: float):
    norm = torch.linalg.vector_norm(grads)
    scale = torch.clamp(max_norm / (norm + 1e-6), max=1.0)
    return grads * scale
