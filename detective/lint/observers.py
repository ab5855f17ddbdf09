"""Quantization observers: module forwards that run during calibration, not in the compiled model.

PyTorch's post-training quantization (``torch.ao.quantization``, torchao's ``pt2e`` and its AWQ
and SmoothQuant flows) inserts observer modules that record statistics while a few
calibration batches run eagerly (``prepare`` / ``prepare_pt2e``); ``convert`` then replaces or
removes them, and only the converted model is compiled. An observer's ``forward`` reads
values to the host, counts in Python and fills histograms by masks: all of it by design, and
none of it in a compiled graph.

Across files (:func:`observer_classes`): a module class named ``*Observer`` or
``*ObserverBase``, or with such a class among its bases (project classes through their
bases, installed ones by name), is eager in a project that does not target torch_xla (the
lazy tensor would trace a calibration pass run on the device). Reached from another traced
root, an observer's code stays found: quantization-aware training calls observers from a
fake-quantize module's ``forward`` at every step.
"""

from __future__ import annotations

OBSERVER_NAMES = ("Observer", "ObserverBase")
WHY = ("a quantization observer's forward: it runs during calibration, and convert removes it "
       "before the model is compiled; this project does not target torch_xla")


def observer_classes(project) -> dict:
    """Observer module classes: class node -> why their forward is eager (the caller checks the
    project's targets)."""
    found = {}
    for path, summary in project.files.items():
        for qualname in summary.classes:
            cls = (path, qualname)
            names = []
            for owner in project.mro(cls):
                names.append(owner[1].rsplit(".", 1)[-1])
                names.extend(base.lstrip("?").rsplit(".", 1)[-1]
                             for base in project.files[owner[0]].classes[owner[1]].bases)
            if any(name.endswith(OBSERVER_NAMES) for name in names) and project.class_kind(cls) == "module":
                found[cls] = WHY
    return found
