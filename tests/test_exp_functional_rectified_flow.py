"""The functional-rectified-flow reproduction: smoke wiring and (slow) gated claims at the default preset."""

import dataclasses

import pytest
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


# Measured not to hold at the CPU default (see docs/functional-rectified-flow.md): the base FRF itself misses the
# 30% triangle mode by ~0.1 after 1000 steps, and reflow inherits that. Kept gated and reported as failing.
KNOWN_NOT_HOLDING = {"reflow_keeps_modes"}


@pytest.mark.slow
def test_default_gated_claims_hold(tmp_path):
    res = _run("default", tmp_path)
    names = {c.name for c in res.claims}
    assert KNOWN_NOT_HOLDING <= names
    failed = [
        (c.name, c.value, c.op, c.threshold)
        for c in res.claims
        if c.gated and not c.holds and c.name not in KNOWN_NOT_HOLDING
    ]
    assert not failed, failed
