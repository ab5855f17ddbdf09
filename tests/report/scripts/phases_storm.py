"""Train with momentum SGD over MpDeviceLoader, then evaluate; two real problems after warm-up.

- at train step 6 weight decay is switched on: the optimizer's graph changes inside sgd.py,
  long after its state was created (a recurring optimizer change, not warm-up);
- the eval batches shrink by one row each (a shape storm in the eval loop).
"""

import torch
import torch_xla
import torch_xla.distributed.parallel_loader as pl

TRAIN_STEPS, EVAL_STEPS, DECAY_FROM = 10, 4, 6


def main():
    device = torch_xla.device()
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 3)).to(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    train = [(torch.randn(8, 8), torch.randint(0, 3, (8,))) for _ in range(TRAIN_STEPS)]
    evals = [(torch.randn(8 - i, 8), torch.randint(0, 3, (8 - i,))) for i in range(EVAL_STEPS)]

    model.train()
    for step, (x, y) in enumerate(pl.MpDeviceLoader(train, device)):
        if step == DECAY_FROM:
            for group in opt.param_groups:
                group["weight_decay"] = 1e-4
        opt.zero_grad()
        torch.nn.functional.cross_entropy(model(x), y).backward()
        opt.step()

    model.eval()
    hits = []
    with torch.no_grad():
        for x, y in pl.MpDeviceLoader(evals, device):
            hits.append(model(x).argmax(1).eq(y).sum())
    print("eval hits", int(torch.stack(hits).sum()))


if __name__ == "__main__":
    main()
