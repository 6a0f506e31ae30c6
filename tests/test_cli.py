"""CLI behaviour: listing, showing, running, reports, and one-line errors with exit code 2."""

from __future__ import annotations

import dataclasses
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from iclr26 import cli, registry


def _one_line_error(capsys, argv, needle):
    rc = cli.main(argv)
    err = capsys.readouterr().err.strip()
    assert rc == 2, err
    assert len(err.splitlines()) == 1, err
    assert needle in err, err
    assert "Traceback" not in err
    return err


def test_list_shows_all_19(capsys):
    assert cli.main(["list"]) == 0
    out = capsys.readouterr().out
    for p in registry.PAPERS:
        assert p.slug in out
    assert len(registry.PAPERS) == 19


def test_show_lists_fields_and_presets(capsys, fake_paper):
    assert cli.main(["show", "fake-paper"]) == 0
    out = capsys.readouterr().out
    assert "n = 1000" in out and "sample size" in out and "smoke=50" in out


def test_run_writes_run_directory(tmp_path, capsys, fake_paper):
    assert cli.main(["run", "fake-paper", "--preset", "smoke", "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    run_dir = tmp_path / "fake-paper-smoke"
    for name in ("config.json", "metrics.json", "claims.json", "env.json", "report.md", "figures/hist.png"):
        assert (run_dir / name).exists(), name
    doc = json.loads((run_dir / "claims.json").read_text())
    claims = doc["claims"]
    assert doc["headline"] == "C1" and [c["name"] for c in claims] == ["C1", "C2"]
    e = claims[0]["estimate"]
    assert claims[0]["verdict"] in ("held", "inconclusive") and e["unit"] == "draw" and claims[0]["null"]
    assert e["lo"] <= e["value"] <= e["hi"] and claims[0]["null"]["value"] > 0.5  # the null arm fails the gate
    assert claims[1]["holds"] is False and claims[1]["gated"] is False
    cfg = json.loads((run_dir / "config.json").read_text())
    assert cfg["config"]["n"] == 50 and cfg["preset"] == "smoke"
    assert "C1" in out and str(run_dir) in out
    # a second run never overwrites the first
    assert cli.main(["run", "fake-paper", "--preset", "smoke", "--out", str(tmp_path), "--set", "n=60"]) == 0
    assert (tmp_path / "fake-paper-smoke-1").is_dir()
    assert json.loads((run_dir / "config.json").read_text())["config"]["n"] == 50


def test_report_html_embeds_figures(tmp_path, fake_paper, capsys):
    cli.main(["run", "fake-paper", "--preset", "smoke", "--out", str(tmp_path)])
    cli.main(["run", "fake-paper", "--preset", "smoke", "--out", str(tmp_path)])
    assert cli.main(["report", str(tmp_path / "fake-paper-smoke"), str(tmp_path / "fake-paper-smoke-1"),
                     "--out", str(tmp_path / "rep")]) == 0
    page = (tmp_path / "rep" / "report.html").read_text()
    assert page.count("data:image/png;base64,") == 2
    assert "sample mean within 0.2" in page
    md = (tmp_path / "rep" / "report.md").read_text()
    assert "fake-paper" in md and "| C1 |" in md


def test_set_overrides_and_types(tmp_path, fake_paper):
    assert cli.main(["run", "fake-paper", "--preset", "smoke", "--out", str(tmp_path),
                     "--set", "mu=1.5", "--set", "widths=3,4"]) == 0
    cfg = json.loads((tmp_path / "fake-paper-smoke" / "config.json").read_text())["config"]
    assert cfg["mu"] == 1.5 and cfg["widths"] == [3, 4]


def test_unknown_slug(capsys):
    err = _one_line_error(capsys, ["run", "sae-seed"], "unknown paper slug")
    assert "sae-seeds" in err


def test_planned_paper(capsys, monkeypatch):
    # all nineteen papers are implemented; register a planned one so the error path stays covered
    paper = registry.Paper("P0", "planned-paper", "test", "A planned paper", "none")
    assert paper.status == "planned"
    monkeypatch.setattr(registry, "PAPERS", registry.PAPERS + (paper,))
    monkeypatch.setitem(registry._BY_SLUG, "planned-paper", paper)
    _one_line_error(capsys, ["run", "planned-paper"], "planned, not implemented")


def test_unknown_set_key(capsys, fake_paper):
    err = _one_line_error(capsys, ["run", "fake-paper", "--set", "nn=3"], "unknown config key")
    assert "valid keys: n, mu" in err and "did you mean n" in err


def test_ill_typed_set(capsys, fake_paper):
    _one_line_error(capsys, ["run", "fake-paper", "--set", "n=abc"], "expected a value of type int")


def test_choice_violation(capsys, fake_paper):
    _one_line_error(capsys, ["run", "fake-paper", "--set", "mode=zzz"], "allowed values are ok, missing")


def test_unknown_preset(capsys, fake_paper):
    _one_line_error(capsys, ["run", "fake-paper", "--preset", "huge"], "unknown preset")


def test_unwritable_out(tmp_path, capsys, fake_paper):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    _one_line_error(capsys, ["run", "fake-paper", "--preset", "smoke", "--out", str(blocker / "sub")],
                    "not a writable directory")


def test_missing_asset(tmp_path, capsys, fake_paper):
    err = _one_line_error(capsys, ["run", "fake-paper", "--out", str(tmp_path), "--set", "mode=missing"],
                          "install it with: pip install fake-asset")
    assert "fake asset" in err


def test_interrupted_run_leaves_no_final_files(tmp_path, capsys, fake_paper):
    rc = cli.main(["run", "fake-paper", "--preset", "smoke", "--out", str(tmp_path), "--set", "mode=interrupt"])
    assert rc == 130
    assert list(tmp_path.iterdir()) == []  # no final directory, and the staging folder is removed


def test_report_on_non_run(tmp_path, capsys):
    _one_line_error(capsys, ["report", str(tmp_path)], "not a finished iclr26 run directory")


def test_python_dash_m_entry_point():
    out = subprocess.run([sys.executable, "-m", "iclr26", "list"], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and "sae-seeds" in out.stdout


# ---- issue 7 §2: run mechanics -----------------------------------------------------------------
@pytest.fixture
def broken_paper(monkeypatch, fake_paper):
    paper = registry.Paper("P00", "broken-paper", "test", "A failing fake paper", "none",
                           module="fake_broken_experiment")
    monkeypatch.setattr(registry, "PAPERS", registry.PAPERS + (paper,))
    monkeypatch.setitem(registry._BY_SLUG, "broken-paper", paper)
    return paper


def test_multi_slug_unknown_set_key_is_an_error(tmp_path, capsys):
    err = _one_line_error(capsys, ["run", "nufilt", "fdfi", "--set", "stepz=3", "--out", str(tmp_path)],
                          "not a config field of any of nufilt, fdfi")
    assert "valid keys:" in err and "flow_steps" in err and "nufilt_steps" in err
    assert list(tmp_path.iterdir()) == []


def test_multi_slug_set_key_applied_where_it_exists(capsys):
    split = cli._split_sets(["nufilt", "fdfi"], {"n": "200", "epochs": "2"})
    assert split == {"nufilt": {"epochs": "2"}, "fdfi": {"n": "200"}}
    out = capsys.readouterr().out.splitlines()
    assert "--set n: applied to fdfi; not a field of nufilt" in out
    assert "--set epochs: applied to nufilt; not a field of fdfi" in out


def test_out_of_range_value_leaves_no_run_dir(tmp_path, capsys):
    err = _one_line_error(capsys, ["run", "sae-seeds", "--set", "n_seeds=1", "--out", str(tmp_path)], "n_seeds")
    assert "2 <= n_seeds" in err
    assert list(tmp_path.iterdir()) == []


def test_cross_field_validate_runs_before_any_dir(tmp_path, capsys):
    _one_line_error(capsys, ["run", "sae-seeds", "--preset", "smoke", "--set", "relu_width=40",
                             "--out", str(tmp_path)], "must be one of widths")
    assert list(tmp_path.iterdir()) == []


def test_run_many_continues_after_a_failure(tmp_path, capsys, broken_paper):
    rc = cli.main(["run", "broken-paper", "fake-paper", "--preset", "smoke", "--out", str(tmp_path),
                   "--set", "steps=2"])
    cap = capsys.readouterr()
    assert rc == 1
    assert "--set steps: applied to broken-paper; not a field of fake-paper" in cap.out
    summary = cap.out[cap.out.index("summary:"):]
    assert re.search(r"broken-paper\s+-\s+FAILED", summary) and re.search(r"fake-paper\s+C1: \S+\s+ok\s+\d/0/\d/0\s+1", summary)
    assert "!! broken-paper: FAILED: RuntimeError: boom" in summary
    assert (tmp_path / "fake-paper-smoke" / "claims.json").exists()
    assert not (tmp_path / "broken-paper-smoke").exists()
    assert (tmp_path / "report.html").exists() and "report:" in cap.out
    assert "1 of 2 papers did not finish: broken-paper" in cap.err


def test_missing_assets_are_loud_in_summary_and_report(tmp_path, capsys, broken_paper):
    rc = cli.main(["run", "fake-paper", "broken-paper", "--preset", "smoke", "--out", str(tmp_path),
                   "--set", "behaviour=note-missing"])
    out = capsys.readouterr().out
    assert rc == 0, out
    line = "MISSING ASSET: the fake dataset (part (b) skipped); install with: pip install fake-data"
    assert f"!! broken-paper: {line}" in out[out.index("summary:"):]
    env = json.loads((tmp_path / "broken-paper-smoke" / "env.json").read_text())
    assert env["missing_assets"] == [{"name": "the fake dataset", "install": "pip install fake-data",
                                      "skipped": "part (b) skipped"}]
    assert line in (tmp_path / "report.html").read_text()
    assert line in (tmp_path / "broken-paper-smoke" / "report.md").read_text()
    # a paper that raises MissingAssetError is a loud row too, and the others still run
    rc = cli.main(["run", "broken-paper", "fake-paper", "--preset", "smoke", "--out", str(tmp_path / "b"),
                   "--set", "behaviour=missing"])
    out = capsys.readouterr().out
    assert rc == 1 and re.search(r"broken-paper\s+-\s+MISSING ASSET", out)
    assert (tmp_path / "b" / "fake-paper-smoke").is_dir()


def _tree(d: Path) -> dict:
    return {str(p.relative_to(d)): (p.stat().st_mtime_ns, p.read_bytes()) for p in d.rglob("*") if p.is_file()}


def test_report_writes_nothing_into_run_dirs(tmp_path, capsys, fake_paper):
    cli.main(["run", "fake-paper", "--preset", "smoke", "--out", str(tmp_path)])
    cli.main(["run", "fake-paper", "--preset", "smoke", "--out", str(tmp_path)])
    runs = [tmp_path / "fake-paper-smoke", tmp_path / "fake-paper-smoke-1"]
    before = [_tree(d) for d in runs]
    assert cli.main(["report", *map(str, runs)]) == 0
    assert cli.main(["report", str(runs[0])]) == 0
    assert [_tree(d) for d in runs] == before
    assert (tmp_path / "report.html").exists() and (tmp_path / "report.md").exists()
    _one_line_error(capsys, ["report", str(runs[0]), "--out", str(runs[0] / "sub")], "never writes into a run")
    assert [_tree(d) for d in runs] == before


def test_report_refuses_staging_folder(tmp_path, capsys):
    stage = tmp_path / ".x-smoke.partial-123"
    stage.mkdir()
    (stage / "claims.json").write_text("[]")
    _one_line_error(capsys, ["report", str(stage)], "unfinished run")


def test_engine_thread_policy_and_backend(tmp_path, fake_paper):
    import matplotlib
    import torch

    from iclr26 import engine

    before = torch.get_num_threads()

    @dataclasses.dataclass
    class C:
        threads: int = 1

    threads, restore = engine._apply_thread_policy(C())
    assert threads == 1 and torch.get_num_threads() == 1
    restore()
    assert torch.get_num_threads() == before
    engine.run_paper("fake-paper", preset="smoke", out=tmp_path)
    assert matplotlib.get_backend().lower() == "agg"
    assert torch.get_num_threads() == before
    assert not hasattr(engine, "load_run")


def test_claim_kinds_are_counted_apart():
    """Controls and sanity checks never count as the paper's claims, in the summary or the report."""
    from iclr26.report import summary_counts
    from iclr26.runs import claim, claim_kind

    assert claim_kind("ctrl_x") == claim_kind("C9", "control: the random baseline") == "control"
    assert claim_kind("sanity_bounds") == claim_kind("S0", "Sanity: sparsity on target") == "sanity"
    with pytest.raises(ValueError, match="sanity_"):  # a kind the name does not show is refused (status counts names)
        claim("S0", "sanity: a check", 0.0, ">", 0.5, why="a precondition")
    assert claim_kind("C1", "the headline holds") == "paper"
    claims = [claim("C1", "headline", 1.0, ">", 0.5, null=0.0).to_dict(),
              claim("C2", "second", 0.0, ">", 0.5, null=0.0).to_dict(),
              claim("C3", "reported", 0.0, ">", 0.5, gated=False).to_dict(),
              claim("ctrl_a", "control: baseline", 1.0, ">", 0.5, why="a baseline").to_dict(),
              claim("sanity_S0", "sanity: a check", 0.0, ">", 0.5, why="a precondition").to_dict()]
    n = summary_counts(claims)
    assert (n.paper_held, n.paper_gated, n.paper_reported, n.checks_held, n.checks) == (1, 2, 1, 1, 2)
    assert n.gated_failed == 2  # C2 and the sanity check sanity_S0


def test_report_lists_controls_apart(tmp_path, capsys, fake_paper):
    assert cli.main(["run", "fake-paper", "--preset", "smoke", "--out", str(tmp_path), "--set", "n=1000"]) == 0
    out = capsys.readouterr().out
    assert "headline C1: held · gated paper claims (held / not held / inconclusive / no power): 1/0/0/0, " \
           "1 reported only" in out
    md = next(tmp_path.glob("fake-paper-smoke*/report.md")).read_text()
    assert "## Paper claims" in md


def test_notes_deduplicated(tmp_path, fake_paper, monkeypatch):
    import fake_experiment
    from iclr26 import engine

    real_run = fake_experiment.run

    def run_twice_noted(cfg, ctx):
        ctx.add_note("fake run")  # the same text the Result carries
        return real_run(cfg, ctx)

    monkeypatch.setattr(fake_experiment, "run", run_twice_noted)
    run_dir, _ = engine.run_paper("fake-paper", preset="smoke", out=tmp_path)
    assert (run_dir / "notes.md").read_text().count("fake run") == 1


def test_seeds_combine_claims_over_seeds(tmp_path, fake_paper):
    """--seeds 3: one folder per seed, the claim re-decided over seeds (t-interval), serial == parallel."""
    from iclr26 import engine

    run_dir, res = engine.run_paper("fake-paper", preset="smoke", out=tmp_path / "serial", seeds=3, workers=1)
    c = next(c for c in res.claims if c.name == "C1")
    assert c.estimate.unit == "seed" and c.estimate.n == 3 and c.detail.startswith("per seed:")
    per = [json.loads((run_dir / "seeds" / str(s) / "claims.json").read_text())[0]["value"] for s in (0, 1, 2)]
    assert c.estimate.value == pytest.approx(sum(per) / 3)
    assert list((run_dir / "figures").glob("*.png"))
    doc = json.loads((run_dir / "claims.json").read_text())
    assert doc["claims"][0]["estimate"]["unit"] == "seed"
    assert json.loads((run_dir / "config.json").read_text())["seeds"] == [0, 1, 2]
    # what each seed found in the cache is the machine's state: env.json, per seed, never a metric
    env = json.loads((run_dir / "env.json").read_text())
    assert {s: c["fake-model"]["hit"] for s, c in env["cache"].items()} == {"0": False, "1": True, "2": False}
    assert not any("cached" in k for k in res.metrics)
    _, par = engine.run_paper("fake-paper", preset="smoke", out=tmp_path / "par", seeds=3, workers=2, threads=1)
    assert [x.estimate for x in par.claims] == [x.estimate for x in res.claims]


def test_threads_flag_wins_and_is_recorded(tmp_path, fake_paper, capsys):
    assert cli.main(["run", "fake-paper", "--preset", "smoke", "--out", str(tmp_path), "--threads", "1"]) == 0
    env = json.loads(next(tmp_path.glob("fake-paper-smoke*/env.json")).read_text())
    assert env["threads"] == 1
    assert env["cache"] == {"fake-model": {"hit": False, "build_seconds": 0.5}}
    _one_line_error(capsys, ["run", "fake-paper", "--threads", "0"], "positive integer")
    _one_line_error(capsys, ["run", "fake-paper", "--seeds", "x"], "positive integer")


def test_default_run_says_whether_its_verdicts_match_expected(tmp_path, capsys, fake_paper, monkeypatch):
    """`make demo` (run all --preset default) compares each declared run with EXPECTED: a match is said, a
    difference is a loud line in the summary; a run with --set is not the declared run and is not compared."""
    from iclr26 import registry

    fake = registry.get("fake-paper").load()

    assert cli.main(["run", "fake-paper", "--preset", "default", "--out", str(tmp_path)]) == 0
    assert "verdicts as the README declares them" in capsys.readouterr().out
    monkeypatch.setitem(fake.EXPECTED, "C1", ("not held", "planted difference"))
    assert cli.main(["run", "fake-paper", "--preset", "default", "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "verdicts differ from the README's (EXPECTED): C1: expected 'not held', got 'held'" in out
    assert cli.main(["run", "fake-paper", "--preset", "default", "--out", str(tmp_path), "--set", "n=60"]) == 0
    assert "README" not in capsys.readouterr().out
