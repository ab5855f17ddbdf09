"""Diagnose mode keeps the graph of every new program, as XLA compiled it, with the source lines
attribution needs; steps that compile nothing write no graph at all."""

from __future__ import annotations

import json

from helpers import STORMS, counts_path

from detective import load_run
from detective.report.ir import read_graph


def test_diagnose_saves_the_graph_of_each_compile_and_nothing_else(traced):
    result = traced["diagnose"]
    assert result.returncode == 0, result.stderr
    run = load_run(result.out)
    assert run.meta["mode"] == "diagnose"
    env = run.meta["traced_env"]  # as the traced process saw it
    assert env["XLA_IR_DEBUG"] == "1" and env["XLA_HLO_DEBUG"] == "1"
    # no per-sync IR dump; XLA's compile-time dump instead, added to the user's XLA_FLAGS
    assert "XLA_SAVE_TENSORS_FILE" not in env
    assert "--xla_dump_hlo_as_text" in env["XLA_FLAGS"] and "--xla_cpu_enable_fast_math=false" in env["XLA_FLAGS"]
    source = (STORMS / "seq_len_broken.py").read_text().splitlines()
    made = next(n for n, line in enumerate(source, 1) if "tokens.to(device)" in line)
    forward = next(n for n, line in enumerate(source, 1) if "self.out(self.embed(tokens)" in line)
    new = run.new_programs
    assert new["step"].tolist() == [0, 1, 3, 6]  # same storm as count mode
    assert new["ir_path"].notna().all()
    modules = []
    for _, row in new.iterrows():
        assert row["ir_path"] == f"graphs/{row['graph_hash']}.hlo.txt"
        text = (result.out / row["ir_path"]).read_text()
        assert f"# Graph Hash: {row['graph_hash']}\n" in text and "\nHloModule " in text
        modules.append(text.split("# XLA dump file: module_", 1)[1].split(".", 1)[0])
        graph = read_graph(str(result.out / row["ir_path"]))
        assert graph.hash == row["graph_hash"]
        # the batch's tokens are a graph input made at `tokens.to(device)`, in main
        tokens = [n for n in graph.inputs if n.location and n.location.file == "seq_len_broken.py"]
        assert {(n.location.function, n.location.line) for n in tokens} == {("main", made)}
        assert any(n.location and (n.location.function, n.location.line) == ("forward", forward) for n in graph.nodes)
    # XLA numbers the modules it compiles: one per compile torch_xla counted (the script's own
    # record), none for the syncs that hit the cache
    counts = json.loads(counts_path(result.out).read_text())
    assert counts[-1][0] == 4 and len(counts) == 12
    assert [int(m) for m in modules] == [0, 1, 2, 3]
    assert len(list((result.out / "graphs").iterdir())) == 4
    # the dump's other files (LLVM IR, objects) are deleted as the run goes; the debug log is
    # emptied once it passes 1 MiB
    raw = result.out / "raw"
    assert [p.name for p in raw.iterdir() if p.is_file()] == [p.name for p in raw.glob("debug.*.log")]
    assert [list(d.iterdir()) for d in raw.glob("xla_dump.*")] == [[]]
    assert 0 < next(raw.glob("debug.*.log")).stat().st_size < 1 << 20


def test_hashes_differ_between_modes(traced):
    count = set(load_run(traced["seq_len_broken"].out).new_programs["graph_hash"])
    diagnose = set(load_run(traced["diagnose"].out).new_programs["graph_hash"])
    assert len(count) == len(diagnose) == 4
    assert not count & diagnose  # why reports never compare hashes across modes
