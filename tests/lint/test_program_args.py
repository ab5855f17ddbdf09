"""Guards no call in the project's XLA or compiled programs satisfies
(detective/lint/program_args.py), as fairseq's prefix-token path: ``generate.py
--prefix-size`` passes ``prefix_tokens`` a tensor, but the ``--tpu`` trainer reaches the
generator only through ``inference_step(..., prefix_tokens=None)`` and ``**kwargs``."""

from __future__ import annotations

import textwrap

from detective.lint.engine import lint_sources

TRAIN = """
    import torch_xla.core.xla_model as xm
    from generator import Generator

    def valid(sample):
        task = Task()
        out = task.inference_step(Generator(), sample, prefix_tokens=None)
        xm.mark_step()
        return out

    class Task:
        def inference_step(self, generator, sample, prefix_tokens=None):
            return generator.generate(sample, prefix_tokens=prefix_tokens)

    if __name__ == "__main__":
        valid(None)
"""
GENERATOR = """
    import torch

    class Generator(torch.nn.Module):
        def generate(self, sample, **kwargs):
            return self._generate(sample, **kwargs)

        def forward(self, sample, prefix_tokens=None):
            return self._generate(sample, prefix_tokens)

        def _generate(self, sample, prefix_tokens=None):
            tokens = sample * 2
            if prefix_tokens is not None:
                tokens = self._prefix(tokens, prefix_tokens)
                if prefix_tokens.sum() > 0:
                    tokens = tokens + 1
            return tokens[tokens > 0]

        def _prefix(self, tokens, prefix_tokens):
            mask = prefix_tokens.ne(0)
            return tokens[mask]
"""
GENERATE_CLI = """
    from generator import Generator
    from train import Task

    def main(sample):
        prefix = sample[:, :2]
        return Task().inference_step(Generator(), sample, prefix_tokens=prefix)

    if __name__ == "__main__":
        main(None)
"""


def _lint(**files):
    sources = {f"{name}.py": textwrap.dedent(src) for name, src in files.items()}
    return {(f.path, f.line, f.code): f for f in lint_sources(sources)}


def _at(findings, path, needle, code):
    source = textwrap.dedent({"generator.py": GENERATOR}[path])
    line = next(i for i, text in enumerate(source.splitlines(), 1) if needle in text)
    return findings.get((path, line, code))


def test_a_path_only_the_other_cli_takes_is_info():
    found = _lint(train=TRAIN, generator=GENERATOR, generate=GENERATE_CLI)
    helper = _at(found, "generator.py", "return tokens[mask]", "RC005")
    assert helper is not None and helper.severity == "info"
    assert "`prefix_tokens` is given" in helper.message and "XLA or compiled programs" in helper.message
    under_guard = _at(found, "generator.py", "if prefix_tokens.sum() > 0", "RC002")
    assert under_guard is not None and under_guard.severity == "info"
    assert "runs only when `prefix_tokens` is given" in under_guard.message
    # the same function's unguarded code stays a warning
    assert _at(found, "generator.py", "return tokens[tokens > 0]", "RC005").severity == "warning"


def test_a_tensor_the_xla_program_passes_keeps_the_warning():
    train = TRAIN.replace("prefix_tokens=None)", "prefix_tokens=sample[:, :1])")
    found = _lint(train=train, generator=GENERATOR, generate=GENERATE_CLI)
    assert _at(found, "generator.py", "return tokens[mask]", "RC005").severity == "warning"
    assert _at(found, "generator.py", "if prefix_tokens.sum() > 0", "RC002").severity == "warning"


def test_a_positional_tensor_at_a_resolved_call_keeps_the_warning():
    generator = GENERATOR + textwrap.indent(textwrap.dedent("""
        class Beam(Generator):
            def generate(self, sample, **kwargs):
                return self._generate(sample, sample[:, :1])
        """), "    ")
    train = TRAIN.replace("from generator import Generator", "from generator import Beam as Generator")
    found = _lint(train=train, generator=generator, generate=GENERATE_CLI)
    assert _at(found, "generator.py", "return tokens[mask]", "RC005").severity == "warning"


def test_a_local_bound_once_to_none_is_none_and_a_rebound_one_is_not():
    once = TRAIN.replace("out = task.inference_step(Generator(), sample, prefix_tokens=None)",
                         "prefix = None\n        out = task.inference_step(Generator(), sample, prefix_tokens=prefix)")
    found = _lint(train=once, generator=GENERATOR, generate=GENERATE_CLI)
    assert _at(found, "generator.py", "return tokens[mask]", "RC005").severity == "info"
    twice = once.replace("prefix = None\n", "prefix = None\n        if sample is not None:\n"
                                            "            prefix = sample[:, :1]\n")
    found = _lint(train=twice, generator=GENERATOR, generate=GENERATE_CLI)
    assert _at(found, "generator.py", "return tokens[mask]", "RC005").severity == "warning"


def test_a_key_read_in_the_programs_keeps_the_warning():
    # the value may come from data the project does not show: generate(sample, **batch)
    train = TRAIN.replace("xm.mark_step()", "xm.mark_step()\n        sample.get(\"prefix_tokens\")")
    found = _lint(train=train, generator=GENERATOR, generate=GENERATE_CLI)
    assert _at(found, "generator.py", "return tokens[mask]", "RC005").severity == "warning"


def test_without_an_xla_program_nothing_is_decided():
    train = TRAIN.replace("xm.mark_step()", "pass").replace("import torch_xla.core.xla_model as xm", "import os")
    found = _lint(train=train, generator=GENERATOR, generate=GENERATE_CLI)
    assert _at(found, "generator.py", "return tokens[mask]", "RC005").severity == "warning"


PADDING = """
    import torch


    def convert(src, pad, right_to_left: bool = False, left_to_right: bool = False):
        mask = src.eq(pad)
        if left_to_right and not mask[:, 0].any():
            return src
        if right_to_left and not mask[:, -1].any():
            return src
        return src.flip(1)


    class Enc(torch.nn.Module):
        def forward(self, src):
            return convert(src, 0, left_to_right=True)
"""
PADDING_TEST = """
    from utils import convert

    def test_convert(src):
        assert convert(src, 0, right_to_left=True) is not None
"""
PADDING_TRAIN = """
    import torch_xla.core.xla_model as xm
    from utils import Enc

    def main(batch):
        Enc()(batch)
        xm.mark_step()

    if __name__ == "__main__":
        main(None)
"""


def _padding(**files):
    found = _lint(**files)
    lines = textwrap.dedent(PADDING).splitlines()
    at = {needle: next(i for i, text in enumerate(lines, 1) if needle in text)
          for needle in ("if left_to_right", "if right_to_left")}
    return {needle: found[("utils.py", line, "RC002")].severity for needle, line in at.items()}


def test_a_flag_no_call_passes_keeps_its_default_and_and_reads_only_when_it_is_set():
    # `right_to_left and ...` reads the mask only when the flag is on; no call turns it on
    assert _padding(utils=PADDING) == {"if left_to_right": "warning", "if right_to_left": "info"}
    # a call that turns it on makes it live
    on = PADDING.replace("return convert(src, 0, left_to_right=True)",
                         "return convert(convert(src, 0, left_to_right=True), 0, right_to_left=True)")
    assert _padding(utils=on)["if right_to_left"] == "warning"


def test_a_test_that_turns_the_flag_on_does_not_count_for_the_xla_program():
    # the unit test passes right_to_left=True: live in the repository ...
    files = {"utils": PADDING, "tests/test_utils": PADDING_TEST}
    assert _padding(**files)["if right_to_left"] == "warning"
    # ... but the XLA program never does
    found = _padding(**files, train=PADDING_TRAIN)
    assert found == {"if left_to_right": "warning", "if right_to_left": "info"}
