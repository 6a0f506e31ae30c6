"""Fuzz every config field of every implemented paper at the smoke preset.

For each field the test tries nan, inf, -inf, 0, -1, a huge value, a value of the wrong type, an
empty list and the declared boundaries (just inside and just outside). Whether a value should be
accepted is decided by a small oracle written here from the declared range (``param(low=...,
high=..., ...)``), independent of ``iclr26.core.config``. Rejected values must exit with code 2, a
one-line message and no run directory (checked through the real CLI, in-process). Accepted
boundary values are then run for real at the smoke preset (slow part): every closed lower bound at
once, every closed float upper bound at once, and the alternative choices of every choice field;
each must finish (or, for an asset that is not installed, exit 2 with nothing left behind).
"""

from __future__ import annotations

import dataclasses
import math
import typing

import pytest

from iclr26 import cli, registry
from iclr26.core.config import field_spec
from iclr26.core.errors import MissingAssetError, UserError
from iclr26.engine import build_config, run_paper

SLUGS = registry.implemented()
HUGE = 10**18


def _fields(slug: str):
    mod = registry.get(slug).load()
    hints = typing.get_type_hints(mod.Config)
    return mod, [(f.name, hints[f.name], field_spec(mod.Config, f.name)) for f in dataclasses.fields(mod.Config)]


def _is_list(tp) -> bool:
    return typing.get_origin(tp) in (list, tuple)


def _inside(x: float, lo, hi, lo_open=False, hi_open=False) -> bool:
    """Reference oracle for a numeric range (independent of the package's implementation)."""
    if isinstance(x, float) and not math.isfinite(x):
        return False
    if lo is not None and (x < lo or (lo_open and x == lo)):
        return False
    return not (hi is not None and (x > hi or (hi_open and x == hi)))


def _cases(tp, spec) -> list[tuple[str, bool]]:
    """(raw --set string, should the field check accept it?) for one field."""
    if "choices" in spec:
        ch = spec["choices"]
        cases = [("zzz-not-a-choice", False), ("", False), ("[]", False), ("nan", False)]
        if all(isinstance(c, int) for c in ch):
            cases += [(str(min(ch) - 1), False), (str(max(ch) + 1), False), ("-1", -1 in ch), ("0", 0 in ch)]
        return cases + [(str(c), True) for c in ch]
    if tp is bool:
        return [("maybe", False), ("2", False), ("nan", False), ("[]", False), ("true", True), ("false", True)]
    if tp is str:
        return [("", not spec.get("min_len")), ("[]", True), ("some-text", True)]
    if _is_list(tp):
        lo, hi = spec.get("elem_low"), spec.get("elem_high")
        n_lo = spec.get("min_len") or 0
        n_hi = spec.get("max_len")
        base = lo if lo is not None else 1

        def lst(vals):
            ok = n_lo <= len(vals) and (n_hi is None or len(vals) <= n_hi) and all(_inside(v, lo, hi) for v in vals)
            return "[" + ", ".join(str(v) for v in vals) + "]", ok

        cases = [lst([]), ("[nan]", False), ("[Infinity]", False), ("abc", False), ("[1.5]", False),
                 lst([0]), lst([-1]), lst([HUGE]), lst([base] * max(n_lo, 1))]
        if lo is not None:
            cases.append(lst([lo - 1] * max(n_lo, 1)))
        if hi is not None:
            cases += [lst([hi] * max(n_lo, 1)), lst([hi + 1] * max(n_lo, 1))]
        if n_hi is not None:
            cases.append(lst([base] * (n_hi + 1)))
        return cases
    lo, hi = spec.get("low"), spec.get("high")
    lo_open, hi_open = spec.get("low_open", False), spec.get("high_open", False)
    if tp is int:
        cases = [("nan", False), ("inf", False), ("-inf", False), ("abc", False), ("[]", False), ("1.5", False)]
        for v in (0, -1, HUGE, -HUGE):
            cases.append((str(v), _inside(v, lo, hi)))
        for b in (lo, hi):
            if b is not None:
                cases += [(str(b - 1), _inside(b - 1, lo, hi)), (str(b), _inside(b, lo, hi)),
                          (str(b + 1), _inside(b + 1, lo, hi))]
        return cases
    assert tp is float, tp
    cases = [("nan", False), ("inf", False), ("-inf", False), ("abc", False), ("[]", False)]
    for v in (0.0, -1.0, 1e300, -1e300):
        cases.append((repr(v), _inside(v, lo, hi, lo_open, hi_open)))
    for b in (lo, hi):
        if b is not None:
            eps = 1e-9 * max(1.0, abs(b))
            for v in (b - eps, float(b), b + eps):
                cases.append((repr(v), _inside(v, lo, hi, lo_open, hi_open)))
    return cases


@pytest.mark.parametrize("slug", SLUGS)
def test_every_field_declares_a_range(slug):
    _, fields = _fields(slug)
    missing = []
    for name, tp, spec in fields:
        if "choices" in spec or tp is bool:
            continue
        if tp is str:
            ok = bool(spec.get("min_len"))
        elif _is_list(tp):
            # min_len 0 is allowed where an empty list is documented to switch a part off (the lows case
            # of test_fuzz_boundary_values_run then runs it empty)
            ok = all(k in spec for k in ("min_len", "max_len", "elem_low", "elem_high")) and spec["min_len"] >= 0
        else:
            ok = "low" in spec and "high" in spec
        if not ok:
            missing.append(name)
    assert not missing, f"{slug}: fields without a declared range: {missing}"


@pytest.mark.parametrize("slug", SLUGS)
def test_fuzz_rejects_bad_values_with_one_line_and_no_run_dir(slug, tmp_path, capsys):
    _, fields = _fields(slug)
    out = tmp_path / "out"
    out.mkdir()
    (out / "keep.txt").write_text("written before")  # nothing previously in out/ may be lost
    checked = accepted = 0
    for name, tp, spec in fields:
        for raw, ok in _cases(tp, spec):
            if ok:
                # accepted by the field's range; a cross-field constraint (validate) may still refuse it
                try:
                    build_config(slug, "smoke", {name: raw})
                except UserError as e:
                    assert not str(e).startswith(f"config field {name}="), (name, raw, str(e))
                    assert "\n" not in str(e)
                accepted += 1
                continue
            rc = cli.main(["run", slug, "--preset", "smoke", "--out", str(out), "--set", f"{name}={raw}"])
            err = capsys.readouterr().err.strip()
            assert rc == 2, f"{slug} --set {name}={raw!r}: exit {rc}, stderr {err!r}"
            assert len(err.splitlines()) == 1 and "Traceback" not in err, err
            assert name in err, err
            assert sorted(p.name for p in out.iterdir()) == ["keep.txt"], f"{name}={raw!r} left files"
            checked += 1
    assert checked >= 5 * len(fields)
    assert (out / "keep.txt").read_text() == "written before"
    assert accepted > 0


# Smallest companions that make "every field at its lower bound" satisfy the cross-field
# constraints (each a documented validate() rule of that paper).
_LOW_COMPANIONS = {
    "fdfi": lambda c: {"flow_aux_n": c["d"] + 1},  # the Gaussian map needs more draws than d
    "sae-seeds": lambda c: {"expected_l0": 0.5},  # expected_l0 <= n_features / 2 (= 1/2 at its low)
}


def _closed_lows(slug: str) -> dict:
    _, fields = _fields(slug)
    over = {}
    for name, tp, spec in fields:
        if _is_list(tp):
            over[name] = [spec["elem_low"]] * spec["min_len"]
        elif tp in (int, float) and "low" in spec and not spec.get("low_open"):
            over[name] = spec["low"]
    over.update(_LOW_COMPANIONS.get(slug, lambda c: {})(over))
    return over


def _closed_float_highs(slug: str) -> dict:
    _, fields = _fields(slug)
    return {name: spec["high"] for name, tp, spec in fields
            if tp is float and "high" in spec and not spec.get("high_open")
            # a huge sample-size-like float bound (expected_l0, relu_target_l0) is a size, not a rate
            and spec["high"] <= 1000}


# Choice runs switch e.g. to Fashion-MNIST at full size and a CNN; keep the data small (cost, not range).
_CHOICE_COMPANIONS = {
    "composable-subnetworks": {"n_train_per_class": 20, "n_val_per_class": 5, "n_test_per_class": 5, "epochs": 1},
}


# Real-model choices that a dedicated test already runs end to end, with assertions on what comes out (a
# Gemma 3 270M load and scoring is 20-40 s; the fuzz run would repeat it and check only that it finishes).
_RUN_ELSEWHERE = {
    ("latent-planning", "model", "gemma-3-270m"): "test_exp_latent_planning.py::test_gemma3_an_items",
    ("culture-neurons", "model", "gemma-3-270m"): "test_exp_culture_neurons.py::test_gemma3_culture_units",
    # read only on the Gemma path, which that test runs in both formats
    ("culture-neurons", "real_format", "letter"): "test_exp_culture_neurons.py::test_gemma3_culture_units",
    ("strategic-dishonesty", "model", "gemma-3-270m"):
        "test_exp_strategic_dishonesty.py::test_gemma3_instructed_pairs_probe",
    ("reasoning-misalignment", "model", "gemma-3-270m"):
        "test_exp_reasoning_misalignment.py::test_gemma3_real_model_path_smoke",
}


# Choice fields that only a real-model path reads: on the smoke preset (the organism path) every value runs the same
# code, so a run per value would test nothing (strategic-dishonesty's three took 20 s). Each is checked below to be
# read in that path's function and nowhere else in the module.
_REAL_PATH_ONLY = {
    ("strategic-dishonesty", "real_train_relation"): "_run_real",
}


def test_real_path_only_choices_are_read_only_there():
    import inspect

    from iclr26 import registry

    for (slug, name), fn in _REAL_PATH_ONLY.items():
        mod = registry.get(slug).load()
        src = inspect.getsource(mod)
        inside = inspect.getsource(getattr(mod, fn))
        uses = src.count(f"cfg.{name}")
        assert uses > 0 and inside.count(f"cfg.{name}") == uses, (slug, name)


def _choice_runs(slug: str) -> list[dict]:
    """Alternative choices of every choice field (min and max for numeric ones), combined by index."""
    _, fields = _fields(slug)
    smoke = build_config(slug, "smoke")
    alts = []
    for name, _tp, spec in fields:
        ch = spec.get("choices")
        if not ch or (slug, name) in _REAL_PATH_ONLY:
            continue
        if all(isinstance(c, int) for c in ch):
            ch = (min(ch), max(ch))
        alts.append((name, [c for c in ch if c != getattr(smoke, name) and (slug, name, c) not in _RUN_ELSEWHERE]))
    n = max((len(a) for _, a in alts), default=0)
    extra = _CHOICE_COMPANIONS.get(slug, {})
    return [{**extra, **{name: a[i] for name, a in alts if i < len(a)}} for i in range(n)]


def test_choices_run_elsewhere_have_their_test():
    from pathlib import Path

    for (slug, name, value), test in _RUN_ELSEWHERE.items():
        assert value in field_spec(type(build_config(slug, "smoke")), name).get("choices", ()), (slug, name)
        file, func = test.split("::")
        assert f"def {func}(" in (Path(__file__).parent / file).read_text(), test


def _run_case(slug: str, over: dict, tmp_path, label: str) -> str:
    out = tmp_path / label
    try:
        cfg = build_config(slug, "smoke", over)
    except UserError as e:
        pytest.fail(f"{slug} {label}: boundary config {over} refused: {e}")
    try:
        run_dir, _ = run_paper(slug, preset="smoke", out=out, cfg=cfg, device="cpu")
    except MissingAssetError:
        assert not out.exists() or not list(out.iterdir()), "a refused run left files"
        return "missing"
    assert (run_dir / "claims.json").exists()
    return "ok"


@pytest.mark.slow
@pytest.mark.parametrize("slug", SLUGS)
def test_fuzz_boundary_values_run(slug, tmp_path):
    assert _run_case(slug, _closed_lows(slug), tmp_path, "lows") == "ok"
    highs, choices = _closed_float_highs(slug), _choice_runs(slug)
    # the float highs ride along with the first choice run where the two configs validate together (one smoke run
    # less per paper, ~10 s each); choice fields are never floats, so neither overrides the other
    if highs and choices and _validates(slug, {**choices[0], **highs}):
        choices[0] = {**choices[0], **highs}
    elif highs:
        assert _run_case(slug, highs, tmp_path, "highs") == "ok"
    for i, over in enumerate(choices):
        _run_case(slug, over, tmp_path, f"choices{i}")


def _validates(slug: str, over: dict) -> bool:
    try:
        build_config(slug, "smoke", over)
    except UserError:
        return False
    return True
