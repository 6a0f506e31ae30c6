"""Claims as data, decided by the engine with an interval and a null arm.

An experiment computes metrics; it never writes a verdict. For every statement it checks it builds a
:class:`Claim` record with :func:`claim`:

- ``estimate``: an :class:`~iclr26.stats.Est` - the measured value with its 95 % interval over the
  independent unit (seeds, topics, scenes, facts; ``"exact"`` for a noiseless quantity);
- ``op`` and ``threshold``: the gate, e.g. ``> 0``;
- ``null``: the same metric, in the same run, when the method does nothing new (the predecessor, a
  random / shuffled / constant variant, the untrained or unplanted model), with ``null_what`` naming it.
  It goes through the same gate.

The verdict is one of :data:`VERDICTS` and is computed here, never passed in:

- ``held``: the whole interval lies on the passing side of the threshold;
- ``not held``: the whole interval lies on the failing side;
- ``inconclusive``: the interval straddles the threshold, is undefined (NaN), or a decisive verdict rests
  on one training seed of a claim marked ``trained=True`` (see below);
- ``no power``: the null arm's estimate passes the gate too, so passing says nothing about the method
  (a claim whose interval is wholly failing stays ``not held``: that is evidence whatever the null did).

A gated claim of kind ``paper`` must have a null arm; :func:`claim` raises otherwise. Controls
(``ctrl_*``) and sanity checks (``sanity_*``) may go without one, but must then say ``why``.

**Training seeds.** A claim whose metric depends on a trained model (``trained=True``) is decided only
over >= :data:`MIN_TRAINING_SEEDS` training seeds (an estimate with ``unit="seed"``: the experiment trains
several seeds itself, or the engine combines ``iclr26 run --seeds N``). Otherwise a held / not held
verdict becomes inconclusive, unless ``seed_spread`` - a seed-to-seed standard deviation measured and
recorded in the paper's docs - is under a quarter of the margin ``|estimate - threshold|``.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from typing import Any

from iclr26.stats import Est, exact

VERDICTS = ("held", "not held", "inconclusive", "no power")
CLAIM_KINDS = ("paper", "control", "sanity")
MIN_TRAINING_SEEDS = 3

_PASS = {
    ">": lambda a, b: a > b,
    ">=": lambda a, b: a >= b,
    "<": lambda a, b: a < b,
    "<=": lambda a, b: a <= b,
}


def claim_kind(name: str, statement: str = "") -> str:
    """``control`` for names ``ctrl_*`` / statements "control: ...", ``sanity`` for ``sanity_*`` /
    "sanity: ...", else ``paper`` (a statement of the paper itself)."""
    low = statement.strip().lower()
    if name.startswith("ctrl_") or low.startswith("control:"):
        return "control"
    if name.startswith("sanity_") or low.startswith("sanity:"):
        return "sanity"
    return "paper"


def passes(value: float, op: str, threshold: float) -> bool:
    """``value op threshold`` with NaN failing."""
    return bool(math.isfinite(value) and _PASS[op](value, threshold))


def decide(est: Est, op: str, threshold: float) -> str:
    """Three-way verdict of one estimate against a gate: held / not held / inconclusive."""
    if not est.finite:
        return "inconclusive"
    if passes(est.lo, op, threshold) and passes(est.hi, op, threshold):
        return "held"
    if not passes(est.lo, op, threshold) and not passes(est.hi, op, threshold):
        return "not held"
    return "inconclusive"


@dataclass
class Claim:
    """One checkable statement with its measured estimate, gate, null arm and computed verdict."""

    name: str
    statement: str
    estimate: Est
    op: str
    threshold: float
    null: Est | None = None
    null_what: str = ""
    gated: bool = True
    trained: bool = False
    seed_spread: float | None = None
    why: str = ""
    detail: str = ""
    kind: str = ""
    verdict: str = field(init=False, default="")
    reason: str = field(init=False, default="")

    def __post_init__(self) -> None:
        if self.op not in _PASS:
            raise ValueError(f"claim {self.name}: op must be one of {sorted(_PASS)}, got {self.op!r}")
        if not isinstance(self.estimate, Est):
            raise TypeError(f"claim {self.name}: estimate must be an iclr26.stats.Est, got {type(self.estimate).__name__}")
        self.threshold = float(self.threshold)
        self.kind = self.kind or claim_kind(self.name, self.statement)
        if self.kind not in CLAIM_KINDS:
            raise ValueError(f"claim {self.name}: kind must be one of {CLAIM_KINDS}, got {self.kind!r}")
        if self.gated and self.null is None:
            if self.kind == "paper":
                raise ValueError(f"gated claim {self.name} has no null arm: pass null=Est(...) (the same metric "
                                 "when the method does nothing new), or gated=False")
            if not self.why.strip():
                raise ValueError(f"gated {self.kind} check {self.name} has no null arm: say why with why='...'")
        if self.null is not None and not isinstance(self.null, Est):
            raise TypeError(f"claim {self.name}: null must be an iclr26.stats.Est")
        self.verdict, self.reason = self._decide()

    @property
    def value(self) -> float:
        return self.estimate.value

    @property
    def holds(self) -> bool:
        return self.verdict == "held"

    @property
    def null_passes(self) -> bool:
        return self.null is not None and passes(self.null.value, self.op, self.threshold)

    def _decide(self) -> tuple[str, str]:
        v = decide(self.estimate, self.op, self.threshold)
        if v == "inconclusive":
            if not self.estimate.finite:
                return v, "undefined estimate or interval (NaN)"
            why = "the interval straddles the threshold"
            if self.estimate.unit == "seed" and self.estimate.method == "t":
                from iclr26.stats import seeds_to_decide

                n = seeds_to_decide(self.estimate, self.threshold)
                why += (f"; at this mean and SD about {n} seeds would decide it" if n is not None
                        else "; the mean sits too close to the threshold for any affordable number of seeds")
            return v, why
        if v == "held" and self.null_passes:
            return "no power", f"the null arm ({self.null_what or 'null'}) passes the gate too: {self.null.value:.4g}"
        if self.trained and not (self.estimate.unit == "seed" and self.estimate.n >= MIN_TRAINING_SEEDS):
            margin = abs(self.estimate.value - self.threshold)
            if self.seed_spread is None or not self.seed_spread < 0.25 * margin:
                return "inconclusive", (f"would be {v}, but decided on {self.estimate.n if self.estimate.unit == 'seed' else 1} "
                                        f"training seed(s); run with --seeds {MIN_TRAINING_SEEDS}")
        return v, ""

    def to_dict(self) -> dict[str, Any]:
        d = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        d["estimate"] = self.estimate.to_dict()
        d["null"] = self.null.to_dict() if self.null is not None else None
        d["value"] = self.estimate.value
        d["holds"] = self.holds
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Claim:
        kw = {f.name: d[f.name] for f in dataclasses.fields(cls) if f.init and f.name in d}
        kw["estimate"] = Est.from_dict(d["estimate"])
        kw["null"] = Est.from_dict(d["null"]) if d.get("null") else None
        return cls(**kw)


def _as_est(x: Est | float) -> Est:
    return x if isinstance(x, Est) else exact(float(x))


def claim(name: str, statement: str, estimate: Est | float, op: str, threshold: float, *,
          null: Est | float | None = None, null_what: str = "", gated: bool = True, trained: bool = False,
          seed_spread: float | None = None, why: str = "", detail: str = "", kind: str = "") -> Claim:
    """Build a :class:`Claim`; its verdict is computed, never passed.

    ``estimate`` and ``null`` should be :class:`~iclr26.stats.Est`; a bare float is taken as exact (no
    sampling noise), which is right only for quantities that have none.
    """
    named, implied = claim_kind(name), kind or claim_kind(name, statement)
    if implied != named:  # the status table and EXPECTED know a claim by its name only
        prefix = {"control": "ctrl_", "sanity": "sanity_"}.get(implied, "no ctrl_/sanity_ ")
        raise ValueError(f"claim {name}: its kind is {implied} (from its statement or kind=) but its name says "
                         f"{named}; name it with the {prefix}prefix")
    return Claim(name=name, statement=statement, estimate=_as_est(estimate), op=op, threshold=threshold,
                 null=None if null is None else _as_est(null), null_what=null_what, gated=gated,
                 trained=trained, seed_spread=seed_spread, why=why, detail=detail, kind=kind)


def combine_seeds(per_seed: list[list[Claim]]) -> list[Claim]:
    """One claim per name from runs at several seeds: estimate and null become the mean over seeds with a
    t-interval (``unit="seed"``); statement, gate and flags come from the first seed's record."""
    from iclr26.stats import t_interval

    if len(per_seed) == 1:
        return list(per_seed[0])
    out = []
    for first in per_seed[0]:
        recs = [next((c for c in run if c.name == first.name), None) for run in per_seed]
        vals = [r.estimate.value if r is not None else math.nan for r in recs]
        est = t_interval(vals, unit="seed")
        if any(r is None for r in recs):
            est = Est(est.value, math.nan, math.nan, "seed", est.n, "t")
        null = None
        if first.null is not None:
            nv = [r.null.value if r is not None and r.null is not None else math.nan for r in recs]
            null = t_interval(nv, unit="seed")
        per = ", ".join(f"{v:.4g}" for v in vals)
        out.append(Claim(name=first.name, statement=first.statement, estimate=est, op=first.op,
                         threshold=first.threshold, null=null, null_what=first.null_what, gated=first.gated,
                         trained=first.trained, seed_spread=first.seed_spread, why=first.why,
                         detail=f"per seed: {per}" + (f"; {first.detail}" if first.detail else ""), kind=first.kind))
    return out


def apply_seed_spread(claims: list[Claim], spread: dict[str, float]) -> list[Claim]:
    """Give each trained claim named in ``spread`` its measured seed-to-seed standard deviation (an experiment
    module's ``SEED_SPREAD``, measured with ``iclr26 run <slug> --seeds 3`` and recorded in the paper's docs), so a
    one-seed run can decide it when that spread is under a quarter of the margin (see the module docstring).
    Claims that already carry a spread, or are not ``trained``, are returned unchanged."""
    out = []
    for c in claims:
        sd = spread.get(c.name)
        if sd is not None and c.trained and c.seed_spread is None:
            if not (isinstance(sd, int | float) and math.isfinite(sd) and sd >= 0):
                raise ValueError(f"SEED_SPREAD[{c.name!r}] must be a finite standard deviation >= 0, got {sd!r}")
            c = dataclasses.replace(c, seed_spread=float(sd))
        out.append(c)
    return out


def combine_nested(groups: list[list[list[Claim]]], *, inner: str = "alignment seed",
                   outer: str = "base organism") -> list[Claim]:
    """One claim per name from a nested design: ``groups[g][k]`` are the claims of inner seed ``k`` on outer
    training seed ``g`` (for example two alignment seeds on each of four independently trained base organisms).

    The inner seeds share their outer model, so they are not independent: each group is first reduced to the
    mean of its inner estimates (and of its inner nulls; NaN entries dropped), and the t-interval is taken over
    the groups (:func:`combine_seeds`, ``unit="seed"``, ``n`` = number of groups). With a single group there is
    nothing to nest over and the inner seeds are combined as :func:`combine_seeds` would.
    """
    if len(groups) == 1:
        return combine_seeds(groups[0])
    reduced: list[list[Claim]] = []
    for g in groups:
        recs = []
        for first in g[0]:
            same = [next((c for c in run if c.name == first.name), None) for run in g]
            vals = [c.estimate.value if c is not None else math.nan for c in same]
            m = _nanmean(vals)
            null = None
            if first.null is not None:
                nm = _nanmean([c.null.value if c is not None and c.null is not None else math.nan for c in same])
                null = Est(nm, nm, nm, "seed", len(same), "mean")
            recs.append(dataclasses.replace(first, estimate=Est(m, m, m, "seed", len(same), "mean"), null=null,
                                            detail=""))
        reduced.append(recs)
    out = combine_seeds(reduced)
    k = {len(g) for g in groups}
    k_text = str(k.pop()) if len(k) == 1 else "several"
    for c in out:
        c.detail = c.detail.replace("per seed:", f"per {outer} (mean of {k_text} {inner}s):", 1)
    return out


def _nanmean(vals: list[float]) -> float:
    fin = [v for v in vals if math.isfinite(v)]
    return float(sum(fin) / len(fin)) if fin else math.nan


class ClaimCounts:
    """Verdict counts of one run: gated paper claims by verdict, reported-only ones, and the checks."""

    def __init__(self, claims: list[dict[str, Any]]):
        paper = [c for c in claims if _kind(c) == "paper"]
        gated = [c for c in paper if c.get("gated", True)]
        checks = [c for c in claims if _kind(c) != "paper" and c.get("gated", True)]
        self.by_verdict = {v: sum(1 for c in gated if _verdict_of(c) == v) for v in VERDICTS}
        self.paper_gated = len(gated)
        self.paper_reported = len(paper) - len(gated)
        self.checks = len(checks)
        self.checks_held = sum(1 for c in checks if _verdict_of(c) == "held")
        self.gated_failed = sum(1 for c in gated + checks if _verdict_of(c) != "held")

    @property
    def paper_held(self) -> int:
        return self.by_verdict["held"]

    def paper_text(self) -> str:
        """``held/not held/inconclusive/no power`` of the gated paper claims, e.g. ``2/1/3/0``."""
        b = self.by_verdict
        return f"{b['held']}/{b['not held']}/{b['inconclusive']}/{b['no power']}"

    def checks_text(self) -> str:
        return f"{self.checks_held}/{self.checks}"


def _kind(c: dict[str, Any]) -> str:
    return c.get("kind") or claim_kind(c["name"], c.get("statement", ""))


def _verdict_of(c: dict[str, Any]) -> str:
    return c.get("verdict") or ("held" if c.get("holds") else "not held")


def summary_counts(claims: list[dict[str, Any]]) -> ClaimCounts:
    return ClaimCounts(claims)


def expected_entry(v: Any) -> tuple[str, str, tuple[str, ...]]:
    """One ``EXPECTED`` value as ``(verdict, reason, also)``: ``"held"``, ``(verdict, reason)`` or
    ``(verdict, reason, also)``, where ``also`` lists the verdicts another machine of the same kind gave."""
    if isinstance(v, str):
        return v, "", ()
    if not isinstance(v, tuple | list) or len(v) not in (2, 3):
        raise ValueError(f"an EXPECTED value must be a verdict or (verdict, reason[, also]); got {v!r}")
    return str(v[0]), str(v[1]), tuple(v[2]) if len(v) == 3 else ()


def check_expected(module: Any, claims: list[Claim]) -> list[str]:
    """Differences between a run's gated verdicts and the module's ``EXPECTED`` declaration (both ways).

    ``EXPECTED`` maps every gated claim name to ``"held"`` or to ``(verdict, reason)``; every verdict other
    than held needs its reason. ``(verdict, reason, also)`` declares, in ``also``, the other verdicts that the same
    code, seed and preset gave on another machine of the same kind (its kernels train other small organisms, like
    another seed): the reason must give each machine's estimate, and any of them matches. Returns one line per
    difference (empty when they agree).
    """
    expected = getattr(module, "EXPECTED", None)
    if expected is None:
        return [f"{module.__name__} declares no EXPECTED verdicts"]
    got = {c.name: c.verdict for c in claims if c.gated}
    want: dict[str, tuple[str, ...]] = {}
    errs = []
    for name, v in expected.items():
        verdict, reason, also = expected_entry(v)
        for one in (verdict, *also):
            if one not in VERDICTS:
                errs.append(f"EXPECTED[{name!r}] = {one!r}: not one of {VERDICTS}")
        if (verdict != "held" or also) and not str(reason).strip():
            errs.append(f"EXPECTED[{name!r}] = {verdict!r} has no reason")
        want[name] = (verdict, *also)
    for name in sorted(set(want) | set(got)):
        if name not in got:
            errs.append(f"{name}: declared {want[name][0]!r} but the run has no gated claim of that name")
        elif name not in want:
            errs.append(f"{name}: the run says {got[name]!r} but EXPECTED does not declare it")
        elif got[name] not in want[name]:
            c = next(c for c in claims if c.name == name)
            exp = " or ".join(repr(v) for v in want[name])
            errs.append(f"{name}: expected {exp}, got {got[name]!r} ({c.estimate}; {c.reason})")
    return errs
