"""Diagnose mode keeps the IR of every new graph, with the source locations attribution needs."""

from __future__ import annotations

from detective import load_run


def test_diagnose_saves_ir_of_each_new_graph(traced):
    result = traced["diagnose"]
    assert result.returncode == 0, result.stderr
    run = load_run(result.out)
    assert run.meta["mode"] == "diagnose"
    assert run.meta["env"]["XLA_IR_DEBUG"] == "1" and run.meta["env"]["XLA_HLO_DEBUG"] == "1"
    new = run.new_programs
    assert new["step"].tolist() == [0, 1, 3, 6]  # same storm as count mode
    assert new["ir_path"].notna().all()
    for _, row in new.iterrows():
        text = (result.out / row["ir_path"]).read_text()
        assert f"Graph Hash: {row['graph_hash']}" in text
        assert "location=forward@seq_len_broken.py:" in text
    assert len(list((result.out / "graphs").iterdir())) == 4
    # torch_xla's raw files are emptied as the run goes, so long runs do not fill the disk:
    # the IR dump once it passes 8 MiB (steps that compile nothing never read it), the debug
    # log once it passes 1 MiB
    raw = {p.name.split(".")[0]: p.stat().st_size for p in (result.out / "raw").iterdir()}
    assert 0 < raw["ir"] < 8 << 20 and 0 < raw["debug"] < 1 << 20


def test_hashes_differ_between_modes(traced):
    count = set(load_run(traced["seq_len_broken"].out).new_programs["graph_hash"])
    diagnose = set(load_run(traced["diagnose"].out).new_programs["graph_hash"])
    assert len(count) == len(diagnose) == 4
    assert not count & diagnose  # why reports never compare hashes across modes
