"""Plain eager training: torch and an optimizer, never torch.compile."""

import torch

model = torch.nn.Linear(4, 4)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
for _ in range(3):
    model(torch.randn(2, 4)).sum().backward()
    opt.step()
print("eager done")
