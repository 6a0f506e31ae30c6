"""The functional-rectified-flow reproduction: smoke wiring (default-preset claims: tests/test_common.py)."""

import dataclasses

import torch

from iclr26.experiments import functional_rectified_flow as exp
from iclr26.runs import RunContext


def _run(preset, tmp_path):
    cfg = dataclasses.replace(exp.Config(), **exp.PRESETS[preset])
    return exp.run(cfg, RunContext(tmp_path, torch.device("cpu"), 0, preset))


def test_smoke_runs_and_reports(tmp_path):
    res = _run("smoke", tmp_path)
    names = {c.name for c in res.claims}
    assert {"marginals_exact", "frf_matches_ffm_mmd", "reflow_straighter", "reflow_keeps_modes"} <= names
    assert all(torch.isfinite(torch.tensor(v)) for v in res.metrics.values())
    assert {"samples", "metrics_vs_nfe", "spectra", "straightness"} <= {
        p.stem for p in (tmp_path / "figures").iterdir()
    }
    # the exact-velocity check holds even at smoke scale (no training involved)
    assert next(c for c in res.claims if c.name == "marginals_exact").holds

