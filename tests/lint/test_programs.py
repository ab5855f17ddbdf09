"""Classes built only by the project's programs that neither use torch_xla nor compile
(detective/lint/programs.py), as fairseq's speech_dlm generator: built by
``SpeechDLMTask.build_generator``, which only the generation CLIs call by method name, while
the ``--tpu`` trainer reaches ``generator.generate(...)`` on the generator its own set-up builds."""

from __future__ import annotations

import textwrap

from detective.lint.engine import lint_sources

TRAINER = """
    import torch_xla.core.xla_model as xm

    class Trainer:
        def __init__(self, task, model):
            self.task, self.model = task, model

        def valid_step(self, sample):
            out = self.task.valid_step(sample, self.model)
            xm.mark_step()
            return out
"""
TRAIN = """
    from trainer import Trainer

    def main(cfg, task, sample):
        model = task.build_model(cfg)
        trainer = Trainer(task, model)
        trainer.valid_step(sample)

    if __name__ == "__main__":
        main(None, None, None)
"""
TASKS = """
    TASKS = {}

    def register(cls):
        TASKS[cls.__name__] = cls
        return cls

    class Task:
        def build_generator(self, models):
            from generators import SequenceGenerator
            return SequenceGenerator(models)

        def valid_step(self, sample, model):
            return self.generator.generate(sample)

    @register
    class TranslationTask(Task):
        def build_model(self, cfg):
            self.generator = self.build_generator([cfg])
            return cfg

    @register
    class SpeechTask(Task):
        def build_generator(self, models):
            from generators import MultichannelGenerator
            return MultichannelGenerator(models)
"""
GENERATORS_INIT = """
    from .plain import *
    from .multichannel import *
"""
PLAIN = """
    import torch

    class SequenceGenerator(torch.nn.Module):
        def generate(self, sample):
            return self(sample)

        def forward(self, tokens):
            if tokens.sum() > 0:
                return tokens
            return -tokens
"""
MULTICHANNEL = PLAIN.replace("SequenceGenerator", "MultichannelGenerator")
GENERATE_CLI = """
    def main(task, models, sample):
        generator = task.build_generator(models)
        return generator.generate(sample)

    if __name__ == "__main__":
        main(None, None, None)
"""


def project(**changes: str) -> dict[str, str]:
    files = {"trainer.py": TRAINER, "train.py": TRAIN, "tasks.py": TASKS,
             "generators/__init__.py": GENERATORS_INIT, "generators/plain.py": PLAIN,
             "generators/multichannel.py": MULTICHANNEL, "generate.py": GENERATE_CLI}
    files.update(changes)
    return {path: textwrap.dedent(source) for path, source in files.items()}


def by_file(files: dict[str, str]) -> dict[str, list]:
    found: dict[str, list] = {}
    for f in lint_sources(files):
        found.setdefault(f.path, []).append(f)
    return found


def test_a_generator_built_only_by_the_generation_cli_is_info():
    found = by_file(project())
    plain, = found["generators/plain.py"]
    multi, = found["generators/multichannel.py"]
    assert (plain.code, plain.line, plain.severity) == ("RC002", 9, "warning")  # eval on the TPU trainer
    assert (multi.code, multi.line, multi.severity) == ("RC002", 9, "info")
    assert "MultichannelGenerator is built only in SpeechTask.build_generator, which runs only in this " \
           "project's programs that use neither torch_xla nor a compiler" in multi.message


def test_the_same_generator_stays_a_warning_when_the_trainer_can_build_it():
    # the trainer's valid step asks the task for a generator: SpeechTask.build_generator is
    # reached by method name from the XLA program
    trainer = TRAINER.replace("out = self.task.valid_step(sample, self.model)",
                              "out = self.task.build_generator([self.model]).generate(sample)")
    found = by_file(project(**{"trainer.py": trainer}))
    assert [f.severity for f in found["generators/multichannel.py"]] == ["warning"]


def test_a_builder_nothing_in_the_project_calls_is_public_api_and_keeps_the_warning():
    loader = MULTICHANNEL + """
    def load_generator(models):
        return MultichannelGenerator(models)
"""
    found = by_file(project(**{"generators/multichannel.py": loader}))
    assert [f.severity for f in found["generators/multichannel.py"]] == ["warning"]


def test_without_a_program_that_drives_xla_or_compiles_nothing_changes():
    trainer = TRAINER.replace("xm.mark_step()", "xm.master_print(out)")
    found = by_file(project(**{"trainer.py": trainer}))
    assert [f.severity for f in found["generators/multichannel.py"]] == ["warning"]


def test_a_test_that_trains_then_generates_does_not_make_generation_xla_code():
    test = """
        import generate
        import train

        def test_train_then_generate():
            train.main(None, None, None)
            generate.main(None, None, None)
    """
    found = by_file(project(**{"tests/test_binaries.py": test}))
    assert [f.severity for f in found["generators/multichannel.py"]] == ["info"]


def test_a_subclassed_generator_is_info_only_when_its_subclasses_are_too():
    subclass = MULTICHANNEL + """
    class SampledGenerator(MultichannelGenerator):
        pass
"""
    cli = GENERATE_CLI.replace("generator = task.build_generator(models)", """generator = task.build_generator(models)
        if models:
            from generators.multichannel import SampledGenerator
            generator = SampledGenerator(models)""")
    found = by_file(project(**{"generators/multichannel.py": subclass, "generate.py": cli}))
    multi, = found["generators/multichannel.py"]
    assert multi.severity == "info" and multi.message.endswith("; so is its subclass SampledGenerator)")
    registered = subclass.replace("    class SampledGenerator", "    @register\n    class SampledGenerator").replace(
        "    import torch\n", "    import torch\n    from tasks import register\n")
    found = by_file(project(**{"generators/multichannel.py": registered, "generate.py": cli}))
    assert [f.severity for f in found["generators/multichannel.py"]] == ["warning"]


def test_a_class_users_build_keeps_what_its_forward_applies_a_warning():
    # torch.nn.SyncBatchNorm: re-exported by its package, also built by a classmethod that only
    # a non-XLA script calls; the autograd Function its forward applies stays a warning
    norm = """
        import torch

        class _SyncFn(torch.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                return x[x > 0]

        class SyncNorm(torch.nn.Module):
            def forward(self, x):
                return _SyncFn.apply(x)

            @classmethod
            def convert(cls, module):
                return SyncNorm()
    """
    script = """
        def main(module):
            return module.convert(module)

        if __name__ == "__main__":
            main(None)
    """
    files = project(**{"lib/__init__.py": "from .norm import SyncNorm\n", "lib/norm.py": norm, "convert.py": script})
    assert [(f.line, f.severity) for f in by_file(files)["lib/norm.py"]] == [(7, "warning")]
    files["lib/__init__.py"] = ""  # built only by the script's classmethod: no one else builds it
    assert [(f.line, f.severity) for f in by_file(files)["lib/norm.py"]] == [(7, "info")]


def test_inheritance_cycles_and_self_calls_in_them_end():
    cycle = """
        import torch

        class A(B, torch.nn.Module):
            def forward(self, x):
                self.step(x)
                return x.sum().item()

        class B(A):
            def step(self, x):
                return self.forward(x)

        def build():
            return A()
    """
    found = by_file(project(**{"cycle.py": cycle, "generate.py": GENERATE_CLI + "\n    import cycle\n    cycle.build()\n"}))
    # A is built only by the CLI, but its subclass B is built nowhere (users may): a warning
    assert [(f.code, f.severity) for f in found["cycle.py"]] == [("RC001", "warning")]


VOCODER = """
    import torch

    class Vocoder(torch.nn.Module):
        @classmethod
        def from_cfg(cls, cfg):
            return cls()

        def forward(self, x):
            return x[x > 0]

    def get_vocoder(cfg):
        return Vocoder.from_cfg(cfg)
"""
VOCODER_TASK = """
    import torch
    import torch_xla.core.xla_model as xm

    class Task:
        def build_vocoder(self, cfg):
            from vocoder import get_vocoder

            vocoder = get_vocoder(cfg)
            vocoder = vocoder.cuda() if torch.cuda.is_available() and not cfg.cpu else vocoder.cpu()
            return vocoder

        def valid_step(self, cfg, x):
            out = self.build_vocoder(cfg)(x)
            xm.mark_step()
            return out

    if __name__ == "__main__":
        Task().valid_step(None, None)
"""


def _vocoder(task=VOCODER_TASK):
    found = lint_sources({"vocoder.py": textwrap.dedent(VOCODER), "task.py": textwrap.dedent(task)})
    return [(f.severity, f.message) for f in found if f.path == "vocoder.py" and f.code == "RC005"]


def test_a_class_a_factory_builds_for_callers_that_move_it_to_cuda_or_the_cpu_is_eager():
    # fairseq's vocoders: get_vocoder(...), then `.cuda() if available else .cpu()`
    [(severity, message)] = _vocoder()
    assert severity == "info" and "whose result Task.build_vocoder moves to CUDA or the CPU" in message
    # the same move as an if statement with both sides
    as_if = VOCODER_TASK.replace(
        "            vocoder = vocoder.cuda() if torch.cuda.is_available() and not cfg.cpu else vocoder.cpu()",
        "            if torch.cuda.is_available():\n"
        "                vocoder = vocoder.cuda()\n"
        "            else:\n"
        "                vocoder = vocoder.cpu()")
    assert [s for s, _ in _vocoder(as_if)] == ["info"]


def test_a_result_left_where_it_is_or_used_by_another_caller_keeps_the_warning():
    # moved only when CUDA is there: on a TPU host it stays as built, and may go to XLA later
    one_side = VOCODER_TASK.replace(
        "            vocoder = vocoder.cuda() if torch.cuda.is_available() and not cfg.cpu else vocoder.cpu()",
        "            if torch.cuda.is_available():\n"
        "                vocoder = vocoder.cuda()")
    assert [s for s, _ in _vocoder(one_side)] == ["warning"]
    # another caller of the factory keeps the result as it is
    other = VOCODER_TASK.replace(
        "        def valid_step(self, cfg, x):",
        "        def raw_vocoder(self, cfg):\n"
        "            from vocoder import get_vocoder\n"
        "            return get_vocoder(cfg)\n\n"
        "        def valid_step(self, cfg, x):\n"
        "            self.raw_vocoder(cfg)(x)")
    assert [s for s, _ in _vocoder(other)] == ["warning"]
