"""AMPO's reply format and reward shaping (P14): ``parse_mode`` and ``sotopia_style_reward``.

A reply opens with ``Thinking Level: k``. Level 1 answers at once; levels 2-4 first think between
``<|begin_of_thinking|>`` and ``<|end_of_thinking|>`` in fixed sections (L2: Intent / Style / Response;
L3: History / Goal / Intent / Assess / Strategy / Style / Response; L4: L3 plus Deduction / Integration
after Strategy), then answer between ``<|begin_of_answer|>`` and ``<|end_of_answer|>`` with one quoted
utterance. A reply that breaks the format gets reward -2 and mode -1.

The reward of a well-formed reply is ``r_ans * r_len``: ``r_ans = (g' + 1) / 2`` with the judge's goal-score
gain ``g = s_after - s_before`` scaled by the room left (``g / (10 - s_before)`` up, ``g / s_before`` down),
and ``r_len = (clip((250 - answer_tokens) / 75, -1, 1) + 1) / 2`` on the answer's tokens only. Thinking
tokens cost nothing. (Written from the authors' ``sotopia.py`` reward of their verl fork.)
"""

from __future__ import annotations

import numpy as np

from iclr26.core.errors import UserError

__all__ = [
    "FORMAT_FAILURE_REWARD",
    "JUDGE_FAILURE_REWARD",
    "THINK_OPEN",
    "THINK_CLOSE",
    "ANSWER_OPEN",
    "ANSWER_CLOSE",
    "SECTIONS",
    "parse_mode",
    "split_reply",
    "format_reply",
    "scaled_gain",
    "answer_length_factor",
    "sotopia_style_reward",
]

FORMAT_FAILURE_REWARD = -2.0  # and mode -1
JUDGE_FAILURE_REWARD = 0.0  # and mode -1
THINK_OPEN, THINK_CLOSE = "<|begin_of_thinking|>", "<|end_of_thinking|>"
ANSWER_OPEN, ANSWER_CLOSE = "<|begin_of_answer|>", "<|end_of_answer|>"
#: the thinking sections of each level, in order (level 1 has none)
SECTIONS: dict[int, tuple[str, ...]] = {
    1: (),
    2: ("Intent", "Style", "Response"),
    3: ("History", "Goal", "Intent", "Assess", "Strategy", "Style", "Response"),
    4: ("History", "Goal", "Intent", "Assess", "Strategy", "Deduction", "Integration", "Style", "Response"),
}


def _header(level: int) -> str:
    return f"Thinking Level: {level}\n" + (f"{ANSWER_OPEN}\n" if level == 1 else f"{THINK_OPEN}\n")


def _once_in_order(text: str, markers: list[str]) -> bool:
    """Every marker occurs exactly once and they occur in the given order."""
    pos = []
    for mk in markers:
        if text.count(mk) != 1:
            return False
        pos.append(text.find(mk))
    return all(a < b for a, b in zip(pos, pos[1:], strict=False))


def parse_mode(text: str) -> int:
    """The thinking level 1..4 of a reply, or -1 if it breaks the per-level format.

    The level is the first k whose header (``Thinking Level: k`` + newline + the opening tag) occurs.
    Then: each tag exactly once and in order (think open < think close < answer open < answer close); the
    answer is one utterance in double quotes (exactly two ``"``, first and last character); for k >= 2
    each section header (``Intent:`` + newline, later ones preceded by a blank line) exactly once inside
    the thinking, in the level's order.
    """
    if not isinstance(text, str):
        raise UserError(f"parse_mode takes the decoded reply as a str, got {type(text).__name__}")
    level = next((k for k in SECTIONS if _header(k) in text), None)
    if level is None:
        return -1
    if level == 1:
        tags = [_header(1), f"\n{ANSWER_CLOSE}"]
    else:
        tags = [_header(level), f"\n{THINK_CLOSE}", f"{ANSWER_OPEN}\n", f"\n{ANSWER_CLOSE}"]
    if not _once_in_order(text, tags):
        return -1
    answer = text.split(f"{ANSWER_OPEN}\n")[-1].split(f"\n{ANSWER_CLOSE}")[0]
    if answer.count('"') != 2 or not (answer.startswith('"') and answer.endswith('"')):
        return -1
    if level >= 2:
        thinking = text[text.find(_header(level)) : text.find(f"\n{THINK_CLOSE}")]
        names = SECTIONS[level]
        markers = [f"{names[0]}:\n"] + [f"\n\n{n}:\n" for n in names[1:]]
        if not _once_in_order(thinking, markers) or any(thinking.count(f"{n}:\n") != 1 for n in names):
            return -1
    return level


def split_reply(text: str) -> tuple[str, str]:
    """(thinking, answer) text of a reply; either is "" when its tags are missing."""
    think = ""
    if THINK_OPEN in text and THINK_CLOSE in text:
        think = text.split(THINK_OPEN, 1)[1].split(THINK_CLOSE, 1)[0].strip()
    answer = text.split(ANSWER_OPEN)[-1].split(ANSWER_CLOSE)[0].strip() if ANSWER_OPEN in text else ""
    return think, answer


def format_reply(level: int, answer: str, sections: dict[str, str] | None = None) -> str:
    """A well-formed reply of the given level (``parse_mode`` returns ``level``); for prompts and tests."""
    if level not in SECTIONS:
        raise UserError(f"level must be one of {sorted(SECTIONS)}, got {level!r}")
    ans = f'"{answer.replace(chr(34), "")}"'
    if level == 1:
        return f"{_header(1)}{ans}\n{ANSWER_CLOSE}"
    sections = sections or {}
    body = "\n\n".join(f"{n}:\n{sections.get(n, '...')}" for n in SECTIONS[level])
    return f"{_header(level)}{body}\n{THINK_CLOSE}\n{ANSWER_OPEN}\n{ans}\n{ANSWER_CLOSE}"


def _scores(s, name: str) -> np.ndarray:
    a = np.asarray(s, dtype=np.float64)
    if not np.all(np.isfinite(a)) or np.any(a < 0) or np.any(a > 10):
        raise UserError(f"{name} must be judge goal scores in [0, 10]")
    return a


def scaled_gain(s_before, s_after) -> np.ndarray:
    """``g / (10 - s_before)`` if the score rose, ``g / s_before`` if it fell, 0 if unchanged (in [-1, 1])."""
    b, a = _scores(s_before, "s_before"), _scores(s_after, "s_after")
    g = a - b
    with np.errstate(divide="ignore", invalid="ignore"):
        out = np.where(g > 0, g / (10.0 - b), np.where(g < 0, g / b, 0.0))
    return out


def answer_length_factor(answer_tokens) -> np.ndarray:
    """``(clip((250 - l) / 75, -1, 1) + 1) / 2``: 1 up to 175 answer tokens, 0.5 at 250, 0 from 325."""
    n = np.asarray(answer_tokens, dtype=np.float64)
    if not np.all(np.isfinite(n)) or np.any(n < 0):
        raise UserError("answer_tokens must be finite token counts >= 0")
    return (np.clip((250.0 - n) / 75.0, -1.0, 1.0) + 1.0) / 2.0


def sotopia_style_reward(s_before, s_after, answer_tokens):
    """The reward of a well-formed reply, ``r_ans * r_len`` (arrays broadcast; a float for scalars)."""
    r = (scaled_gain(s_before, s_after) + 1.0) / 2.0 * answer_length_factor(answer_tokens)
    return float(r) if np.ndim(r) == 0 else r
