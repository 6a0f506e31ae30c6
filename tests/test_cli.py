"""CLI behaviour: listing, showing, running, reports, and one-line errors with exit code 2."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from iclr26 import cli, registry


@pytest.fixture
def fake_paper(monkeypatch):
    """Register tests/fake_experiment.py as an implemented paper named 'fake-paper'."""
    sys.path.insert(0, str(Path(__file__).parent))
    paper = registry.Paper("P0", "fake-paper", "test", "A fake paper", "none", module="fake_experiment")
    monkeypatch.setattr(registry, "PAPERS", registry.PAPERS + (paper,))
    monkeypatch.setitem(registry._BY_SLUG, "fake-paper", paper)
    yield paper
    sys.path.remove(str(Path(__file__).parent))


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
    claims = json.loads((run_dir / "claims.json").read_text())
    assert [c["name"] for c in claims] == ["C1", "C2"]
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


def test_planned_paper(capsys):
    planned = next(p.slug for p in registry.PAPERS if p.status == "planned")
    _one_line_error(capsys, ["run", planned], "planned, not implemented")


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
    run_dir = tmp_path / "fake-paper-smoke"
    assert not (run_dir / "metrics.json").exists() and not (run_dir / "claims.json").exists()
    assert not list(run_dir.rglob(".*tmp*"))


def test_report_on_non_run(tmp_path, capsys):
    _one_line_error(capsys, ["report", str(tmp_path)], "not a finished iclr26 run directory")


def test_python_dash_m_entry_point():
    out = subprocess.run([sys.executable, "-m", "iclr26", "list"], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and "sae-seeds" in out.stdout
