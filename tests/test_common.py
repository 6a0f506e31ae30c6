"""Checks every implemented paper passes: config, presets, smoke run, output files."""

from __future__ import annotations

import dataclasses
import json
import math

import pytest

from iclr26 import registry
from iclr26.core.config import config_from_dict, config_to_dict, field_docs
from iclr26.engine import build_config, run_paper

IMPLEMENTED = registry.implemented()


def test_registry_has_19_unique_papers():
    slugs = [p.slug for p in registry.PAPERS]
    assert len(slugs) == 19 and len(set(slugs)) == 19
    assert all(p.area and p.title and p.id for p in registry.PAPERS)


@pytest.mark.parametrize("slug", IMPLEMENTED)
def test_config_default_constructible_and_documented(slug):
    mod = registry.get(slug).load()
    cfg = mod.Config()
    assert dataclasses.is_dataclass(cfg)
    docs = field_docs(mod.Config)
    assert all(docs.values()), f"undocumented fields: {[k for k, v in docs.items() if not v]}"
    assert getattr(mod, "DESCRIPTION", "").strip()


@pytest.mark.parametrize("slug", IMPLEMENTED)
def test_config_json_round_trip_and_presets(slug):
    mod = registry.get(slug).load()
    for preset in registry.PRESET_NAMES:
        cfg = build_config(slug, preset)
        again = config_from_dict(mod.Config, json.loads(json.dumps(config_to_dict(cfg))))
        assert config_to_dict(again) == config_to_dict(cfg)


@pytest.mark.parametrize("slug", IMPLEMENTED)
def test_smoke_preset_runs_and_writes_files(slug, tmp_path):
    run_dir, result = run_paper(slug, preset="smoke", out=tmp_path, device="cpu")
    for name in ("config.json", "metrics.json", "claims.json", "env.json", "report.md"):
        assert (run_dir / name).exists(), name
    assert list((run_dir / "figures").glob("*.png")), "no figure written"
    metrics = json.loads((run_dir / "metrics.json").read_text())
    bad = [k for k, v in metrics.items() if not math.isfinite(v)]
    assert not bad, f"non-finite metrics: {bad}"
    claims = json.loads((run_dir / "claims.json").read_text())
    assert claims and all({"name", "statement", "value", "threshold", "holds"} <= set(c) for c in claims)
