"""`detective report` on real diagnose runs of every storm example and the MoE block: the right
file, line and kind for each recompile, and none after warm-up once fixed; then runs it cannot
fully attribute: count mode, a cut events file, sources that moved, a missing graph file.

The runs are recorded once per session (two at a time) by the fixture below.
"""

from __future__ import annotations

import json
import os
import shutil
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from helpers import MOE, PAIRS, REPO, STORMS, Recorded, check_against_torch_xla, detective, record, report_json
from helpers import REPORT_SCRIPTS as SCRIPTS

from detective.lint.rule import rules_by_code
from detective.report.attribution import attributions_by_step
from detective.runtime.record import load_run
from detective.report.steps import text_report


# one run with XLA_FLAGS of the user's own, a dump directory included: kept as they are
USER_XLA_FLAGS = "--xla_dump_to={root}/user-dump --xla_cpu_enable_fast_math=false"


@pytest.fixture(scope="session")
def recorded(tmp_path_factory) -> dict[str, Recorded]:
    root = tmp_path_factory.mktemp("diagnosed")
    jobs = {"moe_broken": MOE / "moe_broken.py", "moe_fixed": MOE / "moe_fixed.py",
            "log_before_sync": SCRIPTS / "log_before_sync.py"}
    for pair in PAIRS:
        for variant in ("broken", "fixed"):
            jobs[f"{pair}_{variant}"] = STORMS / f"{pair}_{variant}.py"
    with ThreadPoolExecutor(max_workers=2) as pool:
        envs = {"log_before_sync": {**os.environ, "XLA_FLAGS": USER_XLA_FLAGS.format(root=root)}}
        futures = {name: pool.submit(record, root / name, script, "diagnose", env=envs.get(name))
                   for name, script in jobs.items()}
        futures["count_mode"] = pool.submit(record, root / "count_mode", STORMS / "counter_slice_broken.py", "count")
        results = {name: future.result() for name, future in futures.items()}
    for name, result in results.items():
        assert result.returncode == 0, f"{name}: {result.stderr}"
    return results


@pytest.mark.parametrize("name", ["moe_broken", "moe_fixed", "log_before_sync", "count_mode",
                                  *(f"{p}_{v}" for p in PAIRS for v in ("broken", "fixed"))])
def test_counts_agree_with_what_the_script_saw(recorded, name):
    """The diagnose runs (and the MoE block) recorded what torch_xla's own counters showed."""
    check_against_torch_xla(recorded[name].out)


def recompiles_at(data: dict) -> list[tuple[int, str, str, int]]:
    return [(r["step"], r["kind"], Path(r["file"]).name, r["line"]) for r in data["recompiles"]]


def test_seq_len(recorded):
    run = recorded["seq_len_broken"]
    data = report_json(run.out)
    line = run.line_of("tokens.to(device)")  # where the batch of a new length becomes device data
    assert recompiles_at(data) == [(3, "shape", "seq_len_broken.py", line), (6, "shape", "seq_len_broken.py", line)]
    first, second = data["recompiles"]
    assert (first["before"], first["after"]) == ("s64[8,8]", "s64[8,12]")
    assert (second["before"], second["after"]) == ("s64[8,12]", "s64[8,16]")
    assert first["previous_step"] == 1 and second["previous_step"] == 3  # the closest earlier graph
    assert first["trigger"]["line"] == run.line_of("torch_xla.sync()")
    assert first["code"] == run.source()[line - 1].strip()
    assert all(r["linter_gap"] for r in data["recompiles"])  # shapes from data: no rule sees them
    assert data["linter"]["gaps"] == [{"step": 3, "file": first["file"], "line": line, "kind": "shape"},
                                      {"step": 6, "file": first["file"], "line": line, "kind": "shape"}]


def test_counter_slice(recorded):
    run = recorded["counter_slice_broken"]
    data = report_json(run.out)
    line = run.line_of("x[:, : self.step]")
    assert recompiles_at(data) == [(s, "constant", "counter_slice_broken.py", line) for s in range(2, 8)]
    for r in data["recompiles"]:  # the slice's output grows by one each step, its input does not
        assert r["before"] == f"xla::select f32[8,{r['step']},8]" and r["after"] == f"f32[8,{r['step'] + 1},8]"
        assert r["previous_step"] == r["step"] - 1 and r["function"] == "forward"
    counter = run.line_of("self.step += 1")
    findings = {(f["code"], f["line"]) for f in data["recompiles"][0]["findings"]}
    assert ("RC003", counter) in findings
    assert not data["recompiles"][0]["linter_gap"]
    assert "RC109" in rules_by_code() and ("RC109", line) in findings


def test_item_in_step(recorded):
    run = recorded["item_in_step_broken"]
    data = report_json(run.out)
    read = run.line_of("(h.abs().max() > self.limit).item()")
    line = run.line_of("h = h.clamp(")
    assert recompiles_at(data) == [(4, "structure", "item_in_step_broken.py", line)]
    [r] = data["recompiles"]
    assert r["branch"]["line"] == read  # the clamp runs under the branch the value read decides
    assert r["split_by"] == [{"file": str(run.script), "line": read, "function": "forward"}]
    assert "+aten::clamp" in r["after"]
    assert {"code": "RC001", "line": read} in [{"code": f["code"], "line": f["line"]} for f in r["findings"]]
    [sync] = data["host_syncs"]
    assert (sync["line"], sync["steps"], sync["of_steps"]) == (read, 10, 10)
    # the value read is joined to the linter like a recompile: RC001 at that very line
    assert {"code": "RC001", "line": read, "relation": "at this line"} in [
        {k: f[k] for k in ("code", "line", "relation")} for f in sync["findings"]]
    assert not sync["linter_gap"] and data["linter"]["gaps"] == []
    kinds = [(p["step"], p["kind"]) for p in data["first_programs"]]
    assert kinds[0] == (0, "host-sync split") and data["first_programs"][0]["line"] == read


def test_optional_key(recorded):
    run = recorded["optional_key_broken"]
    data = report_json(run.out)
    line = run.line_of('batch["mask"].unsqueeze')
    assert recompiles_at(data) == [(3, "structure", "optional_key_broken.py", line)]
    [r] = data["recompiles"]
    branch = run.line_of('if "mask" in batch')
    assert r["branch"] == {"line": branch, "code": run.source()[branch - 1].strip()}
    assert "+aten::mul ×2" in r["after"] and "-" not in r["before"]
    assert [(f["code"], f["line"], f["relation"]) for f in r["findings"]] == [
        ("RC004", branch, "on the branch around it")]


def test_grad_accum(recorded):
    run = recorded["grad_accum_broken"]
    data = report_json(run.out)
    sync = run.line_of("torch_xla.sync()")
    # the optimizer step's ops come from torch's own sgd.py: the sync that cut the cycle is the line
    assert recompiles_at(data) == [(2, "structure", "grad_accum_broken.py", sync)]
    [r] = data["recompiles"]
    assert "_single_tensor_sgd@sgd.py" in r["note"]
    assert r["trigger"]["line"] == sync
    assert "RC102" in rules_by_code() and ("RC102", sync) in {(f["code"], f["line"]) for f in r["findings"]}


def test_moe_names_all_three_causes(recorded):
    run = recorded["moe_broken"]
    data = report_json(run.out)
    doc_ids = run.line_of('same_doc = batch["doc_ids"]')
    capacity = run.line_of("self.num_experts * capacity + 1")
    drop_rate = run.line_of("self._overflow_total / self._tokens_total")
    counter = run.line_of("self._overflow_total += int(")
    got = recompiles_at(data)
    assert got == [(3, "structure", "moe_broken.py", doc_ids), (3, "structure", "moe_broken.py", doc_ids),
                   (5, "constant", "moe_broken.py", drop_rate), (6, "constant", "moe_broken.py", capacity)]
    by_step = {r["step"]: r for r in data["recompiles"]}
    # 1. the optional key: both graphs of step 3 (before and after the value read) gained the mask
    assert by_step[3]["branch"]["line"] == run.line_of('if "doc_ids" in batch:  #')
    assert "RC004" in {f["code"] for f in by_step[3]["findings"]}
    # 2. the overflow counter: 0 (a special scalar) until the first drop at step 5, then a number
    assert "constant (a special scalar" in by_step[5]["before"] and "device data" in by_step[5]["after"]
    assert ("RC003", counter) in {(f["code"], f["line"]) for f in by_step[5]["findings"]}
    [sync] = data["host_syncs"]
    assert (sync["line"], sync["steps"]) == (counter, 8)
    assert {("RC001", counter), ("RC003", counter)} <= {(f["code"], f["line"]) for f in sync["findings"]}
    assert not sync["linter_gap"]
    # 3. the capacity from the collator's token count: the dispatch buffer shrinks at step 6
    assert by_step[6]["before"] == "aten::expand f32[129,32]" and by_step[6]["after"] == "f32[113,32]"
    capacity_line = run.line_of('capacity = math.ceil(self.capacity_factor * batch["ntokens"]')
    assert [f["line"] for f in by_step[6]["feeds"]] == [capacity_line]
    # RC109 follows batch["ntokens"] through `capacity` into the buffer size at the attributed line
    assert not by_step[6]["linter_gap"] and "RC109" in {f["code"] for f in by_step[6]["findings"]}
    assert [f["line"] for f in by_step[5]["feeds"]] == [counter]  # the counter, fed by .item()


@pytest.mark.parametrize("name", [f"{p}_fixed" for p in PAIRS] + ["moe_fixed"])
def test_fixed_versions_have_no_recompiles(recorded, name):
    data = report_json(recorded[name].out)
    assert data["recompiles"] == [] and data["programs_after_warmup"] == 0
    assert data["attribution"]["available"]
    assert len(data["first_programs"]) == data["total_unique_programs"] == 2
    text = detective("report", str(recorded[name].out)).stdout
    assert "No recompiles: no new programs after warm-up (step 2 on)" in text


def test_text_groups_by_line(recorded):
    run = recorded["counter_slice_broken"]
    proc = detective("report", str(run.out))
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    line = run.line_of("x[:, : self.step]")
    assert out.splitlines()[1].split()[:2] == ["step", "executions"]  # the per-step table still leads
    assert "Recompiles after warm-up (step 2 on): 6 new programs in 6 steps" in out
    assert f"#1 examples/storms/counter_slice_broken.py:{line} in forward · constant · 6 programs" in out
    assert f"    {line} | window = x[:, : self.step]" in out
    assert "step 2: constant: xla::select f32[8,2,8] → f32[8,3,8] (vs the graph of step 1)" in out
    assert "new programs per step   ████████" in out
    assert "keeps recompiling: new programs from this line in 6 steps" in out


def test_json_groups_by_line(recorded):
    data = report_json(recorded["counter_slice_broken"].out)
    [group] = data["by_line"]
    assert group["line"] == recorded["counter_slice_broken"].line_of("x[:, : self.step]")
    assert (group["programs"], group["steps"], group["kinds"], group["repeating"]) == (6, [2, 3, 4, 5, 6, 7],
                                                                                        ["constant"], True)
    assert group["compile_seconds"] == pytest.approx(sum(r["compile_seconds"] or 0 for r in data["recompiles"]))
    seq = report_json(recorded["seq_len_broken"].out)["by_line"]
    assert [(g["programs"], g["repeating"]) for g in seq] == [(2, False)]


def test_text_orders_groups_by_cost(recorded):
    run = recorded["moe_broken"]
    out = detective("report", str(run.out)).stdout
    headers = [line for line in out.splitlines() if line.startswith("#")]
    assert len(headers) == 3
    seconds = [float(h.split(" · ")[-2].rstrip(" s")) for h in headers]
    assert seconds == sorted(seconds, reverse=True)
    lines = {int(h.split(" in ")[0].rsplit(":", 1)[1]) for h in headers}
    assert lines == {run.line_of("same_doc = batch"), run.line_of("self.num_experts * capacity + 1"),
                     run.line_of("self._overflow_total / self._tokens_total")}
    assert "Value reads that cut steps into several graphs" in out


def test_markdown_and_html(recorded):
    run = recorded["optional_key_broken"]
    line = run.line_of('batch["mask"].unsqueeze')
    md = detective("report", str(run.out), "--format", "markdown").stdout
    assert md.startswith("### detective: 1 recompile after warm-up")
    assert f"`examples/storms/optional_key_broken.py:{line}` in `forward` — structure" in md
    assert "| 3 | structure |" in md and "**RC004** key-branch" in md
    page = detective("report", str(run.out), "--format", "html").stdout
    assert page.startswith("<!doctype html>") and page.rstrip().endswith("</html>")
    assert "<svg" in page and "<polyline" in page and "<script" not in page
    assert "https://" not in page and "src=" not in page  # self-contained
    assert f'<span class="hit">{line:>5} | ' in page  # the source excerpt marks the line
    assert "RC004" in page


def test_html_written_to_a_file(recorded, tmp_path):
    target = tmp_path / "report.html"
    proc = detective("report", str(recorded["moe_broken"].out), "--format", "html", "-o", str(target))
    assert proc.returncode == 0 and proc.stdout == ""
    page = target.read_text()
    assert page.count("<h3>") == 3 and "moe_broken.py" in page


def test_lint_paths_and_no_lint(recorded):
    run = recorded["optional_key_broken"]
    other = REPO / "examples" / "lint" / "python_counter_broken.py"
    data = report_json(run.out, "--lint", str(other))
    assert data["recompiles"][0]["findings"] == [] and data["recompiles"][0]["linter_gap"]
    assert data["linter"]["files"] and all("python_counter_broken.py" in f for f in data["linter"]["files"])
    data = report_json(run.out, "--no-lint")
    assert data["recompiles"][0]["findings"] == []


def test_host_sync_findings_in_every_format(recorded):
    run = recorded["item_in_step_broken"]
    read = run.line_of("(h.abs().max() > self.limit).item()")
    text = detective("report", str(run.out)).stdout
    section = text[text.index("Value reads that cut steps"):]
    assert f"item_in_step_broken.py:{read} in forward: 10 of 10 steps" in section
    assert f"        static: RC001 host-sync at examples/storms/item_in_step_broken.py:{read} (at this line)" in section
    md = detective("report", str(run.out), "--format", "markdown").stdout
    md_section = md[md.index("Value reads that cut steps"):]
    assert f"  - **RC001** host-sync at `examples/storms/item_in_step_broken.py:{read}` (at this line)" in md_section
    page = detective("report", str(run.out), "--format", "html").stdout
    html_section = page[page.index("Value reads that cut steps"):]
    assert "<b>RC001</b> host-sync" in html_section and "a gap in the linter" not in html_section


def test_host_sync_without_a_finding_is_a_linter_gap(recorded):
    """Linting an unrelated file: nothing relates to the value read, so it counts as a gap."""
    run = recorded["item_in_step_broken"]
    read = run.line_of("(h.abs().max() > self.limit).item()")
    other = REPO / "examples" / "lint" / "python_counter_broken.py"
    data = report_json(run.out, "--lint", str(other))
    [sync] = data["host_syncs"]
    assert sync["findings"] == [] and sync["linter_gap"]
    assert {"step": 0, "file": str(run.script), "line": read, "kind": "host-sync split"} in data["linter"]["gaps"]
    text = detective("report", str(run.out), "--lint", str(other)).stdout
    section = text[text.index("Value reads that cut steps"):]
    assert "        static: no static finding at this line: a gap in the linter" in section


def test_attributions_by_step_for_the_gate(recorded):
    run = recorded["counter_slice_broken"]
    line = run.line_of("x[:, : self.step]")
    sites = attributions_by_step(load_run(run.out))
    assert sorted(sites) == list(range(8))
    for step in range(2, 8):
        assert sites[step] == [{"file": str(run.script), "line": line, "function": "forward", "kind": "constant",
                                "code": "window = x[:, : self.step]"}]
    assert sites[0][0]["kind"] == "new call site"
    assert attributions_by_step(load_run(recorded["count_mode"].out)) == {}


def test_gate_shows_the_attributed_line(recorded):
    run = recorded["counter_slice_broken"]
    proc = detective("gate", str(run.out), "--after-step", "2", "--max-new-programs", "0")
    assert proc.returncode == 1
    assert f"counter_slice_broken.py:{run.line_of('x[:, : self.step]')}" in proc.stdout + proc.stderr


def test_value_read_that_cuts_a_later_step(recorded):
    run = recorded["log_before_sync"]
    data = report_json(run.out)
    read = run.line_of("loss.item()")
    assert recompiles_at(data) == [(3, "host-sync split", "log_before_sync.py", read)]
    [r] = data["recompiles"]
    assert r["previous_hash"] is None and r["trigger"]["line"] == read
    assert "access tensor value" in r["cause"]
    assert [(f["code"], f["line"]) for f in r["findings"]] == [("RC001", read)]
    [sync] = data["host_syncs"]
    assert (sync["line"], sync["steps"], sync["of_steps"]) == (read, 2, 8)
    assert [(f["code"], f["line"], f["relation"]) for f in sync["findings"]] == [("RC001", read, "at this line")]



def test_user_xla_flags_and_dump_directory_are_kept(recorded):
    """Diagnose mode adds to the user's XLA_FLAGS; their own dump directory is read, never emptied."""
    run = recorded["log_before_sync"]
    root = run.out.parent
    meta = load_run(run.out).meta
    flags = meta["traced_env"]["XLA_FLAGS"].split()
    assert flags[:2] == USER_XLA_FLAGS.format(root=root).split() and "--xla_dump_hlo_as_text" in flags
    compiles = meta["final_metrics"]["UncachedCompile"]
    assert len(list((root / "user-dump").glob("module_*.before_optimizations.txt"))) == compiles
    assert not list((run.out / "raw").glob("xla_dump.*"))
    assert len(list((run.out / "graphs").glob("*.hlo.txt"))) == compiles  # the report used them above


def test_count_mode_run_says_diagnose_is_needed(recorded):
    run = recorded["count_mode"]
    proc = detective("report", str(run.out))
    assert proc.returncode == 0
    assert "line attribution needs `detective run --mode diagnose`" in proc.stderr
    assert proc.stdout.startswith(text_report(load_run(run.out)))  # the step table, unchanged
    assert "Recompiles" not in proc.stdout
    data = report_json(run.out)
    assert data["attribution"]["available"] is False and data["recompiles"] == []
    assert data["programs_after_warmup"] == 6 and data["late_steps"] == [2, 3, 4, 5, 6, 7]
    md = detective("report", str(run.out), "--format", "markdown").stdout
    assert "line attribution needs" in md


def test_truncated_events_file(recorded, tmp_path):
    copy = tmp_path / "cut"
    shutil.copytree(recorded["counter_slice_broken"].out, copy)
    events = copy / "events.jsonl"
    data = events.read_bytes()
    events.write_bytes(data[: len(data) - 30])  # the final event, cut mid-line
    proc = detective("report", str(copy), "--format", "json")
    assert proc.returncode == 0
    assert "cut off" in proc.stderr
    report = json.loads(proc.stdout)
    assert [r["step"] for r in report["recompiles"]] == [2, 3, 4, 5, 6, 7]


def test_sources_that_moved_keep_their_location(recorded, tmp_path):
    """A run recorded in another checkout: its paths do not exist here."""
    run = recorded["counter_slice_broken"]
    copy = tmp_path / "moved"
    shutil.copytree(run.out, copy)
    elsewhere = "/nonexistent/checkout"
    for path in [copy / "events.jsonl", copy / "run.json", *(copy / "graphs").glob("*.txt")]:
        path.write_text(path.read_text().replace(str(REPO), elsewhere))
    line = run.line_of("x[:, : self.step]")
    data = report_json(copy)
    assert [(r["file"], r["line"], r["code"]) for r in data["recompiles"]] == [
        (f"{elsewhere}/examples/storms/counter_slice_broken.py", line, None)] * 6
    assert all(r["kind"] == "constant" for r in data["recompiles"])
    text = detective("report", str(copy)).stdout
    assert f"#1 {elsewhere}/examples/storms/counter_slice_broken.py:{line} in forward · constant" in text
    assert "source not found" in text


def test_missing_graph_file_falls_back_to_the_trigger(recorded, tmp_path):
    run = recorded["optional_key_broken"]
    copy = tmp_path / "no-graph"
    shutil.copytree(run.out, copy)
    late = [e for e in load_run(copy).execution_events if e.get("new") and e["step"] == 3]
    (copy / late[0]["ir_path"]).unlink()
    data = report_json(copy)
    [r] = data["recompiles"]
    assert r["line"] == run.line_of("torch_xla.sync()") and r["note"].endswith("is missing")
    assert r["kind"] == "unknown" and not r["linter_gap"]
    assert "IR of 1 graph is missing" in detective("report", str(copy)).stdout


def test_not_a_run_directory(tmp_path):
    proc = detective("report", str(tmp_path / "nothing"))
    assert proc.returncode == 2 and proc.stderr.startswith("detective: no such run directory")
