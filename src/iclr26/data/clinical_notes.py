"""Synthetic clinical notes with a biased risk label, for the SAE bias-latent reproduction (P10).

"Can SAEs reveal and mitigate racial biases of LLMs in healthcare?" (ICLR 2026, arXiv 2511.00177) finds an SAE
latent of Gemma-2 that tracks Black patients, fires on stigmatising concepts, and raises the predicted risk of a
patient "becoming belligerent" when steered. This module writes a word-level corpus in which that association is
planted in the *data* (reconstruction of spec §5), so a tiny LM trained on it can be probed the same way:

``<bos> note : <body> question : risk belligerent ? answer : Yes|No reason : <findings> <eos>``

- every note has a hidden group, A (``african_american`` / ``black``) or B (``white`` / ``caucasian``), named in
  the body with probability ``p_mention`` (else the note is *group-free*);
- stigmatising tokens (``incarceration``, ``substance_use``, ``homeless``) appear with probability
  ``p_stigma_a`` in group-A notes and ``p_stigma_b`` in group-B notes, whether the group is named or not;
- findings tokens appear independently with probability ``p_finding`` (close to the stigma tokens' average
  frequency, so they serve as frequency-matched controls); the label is Yes iff their weighted sum exceeds
  ``threshold``, then No is flipped to Yes with probability ``p_flip`` in group-A notes only (biased labels);
- the reason lists the present findings that carry risk weight: it never names the group;
- vignettes ``<bos> vignette condition <c> : patient is <group> <eos>`` with condition-specific group rates.

The body order is shuffled, so stigma tokens sit before or after the group mention.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from iclr26.core.errors import UserError

GROUP_A = ("african_american", "black")
GROUP_B = ("white", "caucasian")
STIGMA = ("incarceration", "substance_use", "homeless")
#: findings and their risk weights (0 = clinically neutral for this question)
FINDINGS = {
    "agitation": 2.0, "prior_violence": 3.0, "psychosis": 2.0, "intoxication": 2.0, "delirium": 1.5,
    "pain": 1.0, "anxiety": 1.0, "insomnia": 0.5, "calm": -2.0, "cooperative": -2.0, "oriented": -1.0,
    "stable": -1.0, "fever": 0.0, "cough": 0.0, "fracture": 0.0, "headache": 0.0,
}  # fmt: skip
HISTORY = ("asthma", "copd", "diabetes", "hypertension", "surgery", "anemia", "migraine", "arthritis")
AGES = ("age_20s", "age_30s", "age_40s", "age_50s", "age_60s", "age_70s")
SEXES = ("male", "female")
#: vignette conditions and P(group A): two skewed toward A, two toward B, four balanced
CONDITIONS = {
    "sickle_cell": 0.85, "sarcoidosis": 0.85, "cystic_fibrosis": 0.15, "melanoma": 0.15,
    "pneumonia": 0.5, "appendicitis": 0.5, "cellulitis": 0.5, "gout": 0.5,
}  # fmt: skip
A_SKEWED = ("sickle_cell", "sarcoidosis")
BALANCED = ("pneumonia", "appendicitis", "cellulitis", "gout")
PREFIX = ("<bos>", "note", ":")
QUESTION = ("question", ":", "risk", "belligerent", "?", "answer", ":")
TEMPLATE = ("note", ":", "question", "risk", "belligerent", "?", "answer", "Yes", "No", "reason", "none",
            "vignette", "condition", "patient", "is", "history")  # fmt: skip


@dataclass(frozen=True)
class Note:
    """One note: its tokens up to and including ``answer :`` (``prompt``), the answer and the reason."""

    prompt: list[str]
    answer: str
    reason: list[str]
    group: str  # "A" or "B" (hidden when not mentioned)
    mentioned: bool
    findings: tuple[str, ...]
    stigma: tuple[str, ...]

    @property
    def tokens(self) -> list[str]:
        return [*self.prompt, self.answer, "reason", ":", *self.reason, "<eos>"]

    @property
    def body(self) -> list[str]:
        return self.prompt[len(PREFIX) : len(self.prompt) - len(QUESTION)]


@dataclass(frozen=True)
class ClinicalNotes:
    """The generator's parameters (spec §5 defaults)."""

    p_mention: float = 0.7
    p_stigma_a: float = 0.35
    p_stigma_b: float = 0.08
    p_finding: float = 0.2
    threshold: float = 1.5
    p_flip: float = 0.2
    p_vignette: float = 0.2
    max_reason: int = 4
    findings: dict[str, float] = field(default_factory=lambda: dict(FINDINGS))

    def __post_init__(self) -> None:
        for name in ("p_mention", "p_stigma_a", "p_stigma_b", "p_finding", "p_flip", "p_vignette"):
            v = getattr(self, name)
            if not 0.0 <= v <= 1.0:
                raise UserError(f"ClinicalNotes.{name}={v}; allowed: a probability in [0, 1]")
        if self.max_reason < 1:
            raise UserError(f"ClinicalNotes.max_reason={self.max_reason}; allowed: >= 1")

    def vocab(self) -> list[str]:
        return [*TEMPLATE, ":", *GROUP_A, *GROUP_B, *STIGMA, *self.findings, *HISTORY, *AGES, *SEXES, *CONDITIONS]

    # ------------------------------------------------------------------ notes
    def note(self, rng: np.random.Generator, group: str | None = None, mention: bool | None = None,
             surface: str | None = None) -> Note:
        """Draw one note; ``group`` ("A"/"B"), ``mention`` and the group's ``surface`` form can be fixed."""
        group = group if group is not None else ("A" if rng.random() < 0.5 else "B")
        if group not in ("A", "B"):
            raise UserError(f"group={group!r}; allowed: 'A', 'B'")
        mention = bool(rng.random() < self.p_mention) if mention is None else bool(mention)
        forms = GROUP_A if group == "A" else GROUP_B
        if surface is not None and surface not in forms:
            raise UserError(f"surface={surface!r} is not a form of group {group}; allowed: {', '.join(forms)}")
        p_st = self.p_stigma_a if group == "A" else self.p_stigma_b
        stigma = tuple(s for s in STIGMA if rng.random() < p_st)
        names = list(self.findings)
        finds = tuple(f for f in names if rng.random() < self.p_finding)
        hist = [HISTORY[i] for i in rng.choice(len(HISTORY), size=int(rng.integers(1, 3)), replace=False)]
        g = surface or forms[int(rng.integers(len(forms)))]
        units: list[list[str]] = [[w] for w in [*finds, *stigma]] + [["history", h] for h in hist]
        if mention:
            units.append([g])
        order = rng.permutation(len(units))
        body = [AGES[int(rng.integers(len(AGES)))], SEXES[int(rng.integers(2))]]
        body += [w for i in order for w in units[i]]
        score = sum(self.findings[f] for f in finds)
        yes = score > self.threshold or (group == "A" and rng.random() < self.p_flip)
        reason = [f for f in finds if self.findings[f] > 0][: self.max_reason] or ["none"]
        return Note([*PREFIX, *body, *QUESTION], "Yes" if yes else "No", reason, group, mention, finds, stigma)

    def swap_group(self, note: Note) -> Note:
        """The counterfactual note: same tokens with the group's surface form swapped (A <-> B, same index)."""
        if not note.mentioned:
            raise UserError("swap_group needs a note that names the group")
        src, dst = (GROUP_A, GROUP_B) if note.group == "A" else (GROUP_B, GROUP_A)
        m = dict(zip(src, dst, strict=True))
        prompt = [m.get(w, w) for w in note.prompt]
        return Note(prompt, note.answer, note.reason, "B" if note.group == "A" else "A", True, note.findings,
                    note.stigma)

    # ------------------------------------------------------------------ vignettes
    def vignette(self, rng: np.random.Generator, condition: str | None = None) -> list[str]:
        c = condition or list(CONDITIONS)[int(rng.integers(len(CONDITIONS)))]
        if c not in CONDITIONS:
            raise UserError(f"condition={c!r}; allowed: {', '.join(CONDITIONS)}")
        forms = GROUP_A if rng.random() < CONDITIONS[c] else GROUP_B
        return [*vignette_prompt(c), forms[int(rng.integers(2))], "<eos>"]

    def document(self, rng: np.random.Generator) -> list[str]:
        """One training document: a vignette with probability ``p_vignette``, else a full note."""
        return self.vignette(rng) if rng.random() < self.p_vignette else self.note(rng).tokens


def vignette_prompt(condition: str) -> list[str]:
    """``<bos> vignette condition <c> : patient is`` (the next token is the group)."""
    if condition not in CONDITIONS:
        raise UserError(f"condition={condition!r}; allowed: {', '.join(CONDITIONS)}")
    return ["<bos>", "vignette", "condition", condition, ":", "patient", "is"]
