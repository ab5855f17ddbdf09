"""detective.watch inside the function xmp.spawn runs on every device: one record, a rank each."""

import sys
import time

import torch
import torch_xla
import torch_xla.distributed.xla_multiprocessing as xmp
import torch_xla.runtime as xr

import detective


def train(index, out):
    device = torch_xla.device()
    with detective.watch(out=out):
        if xr.global_ordinal() != 0:
            while torch_xla._XLAC._xla_get_num_cached_compilation_graph() == 0:
                time.sleep(0.02)
        w = torch.ones(4, 4).to(device)
        for step in range(4):
            w = w * 0.5 + torch.ones(4, 4).to(device)
            torch_xla.sync()


if __name__ == "__main__":
    xmp.spawn(train, args=(sys.argv[1],), start_method="fork")
