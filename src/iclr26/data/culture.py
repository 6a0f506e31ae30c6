"""Synthetic countries' knowledge as multiple-choice questions, and a country-knowledge MCQ set for real LMs (P5).

Neuron-Level Analysis of Cultural Understanding in Large Language Models (ICLR 2026, arXiv 2510.08284) scores
units on cultural MCQs (BLEnD), an options-only control, a reading task that names countries (CountryRC) and NLU
tasks. This module writes the same four kinds of input for a word-level model organism, plus a country-knowledge
MCQ set (capitals, currencies, languages; options-only control, reading passages, a number-comparison NLU proxy)
for real models such as Gemma 3 270M, and the same facts in cloze form (antonyms as the NLU proxy) for base
models too small to answer by letter.

Organism world (:class:`CultureWorld`): ``n_countries`` countries ``C0 C1 ...`` in regions of two "sibling"
countries; every (country, topic) has one gold value ``v0 ... v{n_values-1}``; siblings share the value on a fixed
fraction of topics. ``n_topics`` topics (6 as in BLEnD, up to 12); the first half forms the *neuron split*
(scoring: food / work / sport with six), the second half the *test split* (education / family / holiday).
Every item is ``(prompt words ending in "answer", gold word)``:

- cultural MCQ   ``Q C3 food ? A:v2 B:v5 C:v1 D:v7 answer`` -> ``B`` (option order shuffled)
- control        ``Q ? A:v2 B:v5 C:v1 D:v7 answer`` -> ``B`` (country and topic removed, gold letter kept)
- CountryRC      ``passage C3 has v5 . Q C3 ? A:.. D:.. answer`` -> letter of ``v5`` (copied, not recalled)

An option is one word ``letter:value`` (a word-level organism learns the letter-to-value binding of separate
tokens only after a slow induction-like phase change, which the CPU budget does not afford).
- NLU            ``cmp n3 n7 answer`` -> ``n7``; ``same n2 n2 answer`` -> ``yes``
- held-back NLU  ``min n3 n7 answer`` -> ``n3`` (the fine-tuning task; the spec's parity-of-the-sum task was not
  learnt by one layer's MLP in 300 steps, see docs/culture-neurons.md)
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np

from iclr26.core.errors import UserError
from iclr26.data.statements import CAPITALS, CURRENCIES

#: every topic a world can have. The first six keep BLEnD's split (food/work/sport score, the other three test);
#: topics 7-12 join the two halves in turn (see CultureWorld.topics)
TOPIC_NAMES = ("food", "work", "sport", "education", "family", "holiday",
               "music", "dress", "greeting", "wedding", "festival", "housing")
TOPICS = TOPIC_NAMES[:6]  # the six-topic world (the organism's layout until 2026-12-07)
NEURON_TOPICS = TOPICS[:3]
TEST_TOPICS = TOPICS[3:]
LETTERS = ("A", "B", "C", "D")
N_NUMBERS = 10
NLU_TASKS = ("cmp", "same")
Item = tuple[list[str], str]  # (prompt words ending in "answer", gold word)


@dataclass(frozen=True)
class CultureWorld:
    """The fixed fact table of the synthetic countries and the corpus vocabulary."""

    n_countries: int = 8
    n_values: int = 8
    share: float = 0.6
    seed: int = 0
    n_topics: int = 6

    def __post_init__(self) -> None:
        if self.n_countries < 4 or self.n_countries % 2:
            raise UserError(f"CultureWorld needs an even n_countries >= 4 (sibling pairs), got {self.n_countries}")
        if self.n_values < len(LETTERS):
            raise UserError(f"CultureWorld needs n_values >= {len(LETTERS)} (four options), got {self.n_values}")
        if not 0.0 <= self.share <= 1.0:
            raise UserError(f"CultureWorld share must be in [0, 1], got {self.share}")
        if not 2 <= self.n_topics <= len(TOPIC_NAMES) or self.n_topics % 2:
            raise UserError(f"CultureWorld needs an even n_topics in [2, {len(TOPIC_NAMES)}] (half neuron split, "
                            f"half test split), got {self.n_topics}")

    @cached_property
    def topics(self) -> tuple[str, ...]:
        """The world's topics: the first half of them is the neuron split, the second half the test split."""
        h = self.n_topics // 2
        first, rest = TOPIC_NAMES[:6], TOPIC_NAMES[6:]
        # six-topic world: BLEnD's order; larger worlds add topics to both halves in turn
        neuron = list(first[:3]) + list(rest[0::2])
        test = list(first[3:]) + list(rest[1::2])
        return tuple(neuron[:h]) + tuple(test[:h])

    @property
    def neuron_topics(self) -> tuple[str, ...]:
        return self.topics[: self.n_topics // 2]

    @property
    def test_topics(self) -> tuple[str, ...]:
        return self.topics[self.n_topics // 2:]

    @property
    def countries(self) -> list[str]:
        return [f"C{i}" for i in range(self.n_countries)]

    @staticmethod
    def sibling(country: str) -> str:
        """The other country of the same region (C0-C1, C2-C3, ...)."""
        return f"C{int(country[1:]) ^ 1}"

    @cached_property  # read on every MCQ the corpus draws: built once (read-only), not per item
    def table(self) -> np.ndarray:
        """Gold value index per (country, topic), ``[n_countries, n_topics]``.

        The even country of each region draws its values; its sibling copies them on ``round(share·n_topics)``
        topics (a fixed random subset per region) and takes a different value on the others. Columns follow
        :attr:`topics`.
        """
        rng = np.random.default_rng(self.seed)
        T = self.n_topics
        k = int(round(self.share * T))
        out = np.zeros((self.n_countries, T), dtype=np.int64)
        for r in range(0, self.n_countries, 2):
            out[r] = rng.integers(0, self.n_values, T)
            shared = np.zeros(T, dtype=bool)
            shared[rng.permutation(T)[:k]] = True
            other = (out[r] + rng.integers(1, self.n_values, T)) % self.n_values
            out[r + 1] = np.where(shared, out[r], other)
        out.setflags(write=False)
        return out

    def gold(self, country: str, topic: str) -> str:
        return f"v{int(self.table[self.countries.index(country), self.topics.index(topic)])}"

    def vocab(self) -> list[str]:
        words = ["Q", "?", "answer", "passage", "has", ".", "cmp", "same", "min", "yes", "no", "even", "odd",
                 *LETTERS, *self.topics, *self.countries]
        words += [f"v{j}" for j in range(self.n_values)] + [f"n{j}" for j in range(N_NUMBERS)]
        words += [f"{letter}:v{j}" for letter in LETTERS for j in range(self.n_values)]
        return words

    # ------------------------------------------------------------------ items
    def _options(self, rng: np.random.Generator, gold: str) -> tuple[list[str], str]:
        """Four shuffled options containing ``gold``: words ``A:v. B:v. C:v. D:v.`` and the gold letter."""
        others = [f"v{j}" for j in range(self.n_values) if f"v{j}" != gold]
        opts = [gold, *(others[i] for i in rng.choice(len(others), len(LETTERS) - 1, replace=False))]
        order = rng.permutation(len(LETTERS))
        opts = [opts[i] for i in order]
        return [f"{letter}:{o}" for letter, o in zip(LETTERS, opts, strict=True)], LETTERS[opts.index(gold)]

    def mcq(self, rng: np.random.Generator, country: str, topic: str) -> Item:
        """A cultural question about ``country``'s ``topic`` with shuffled options."""
        if country not in self.countries or topic not in self.topics:
            raise UserError(f"unknown country/topic {country!r}/{topic!r}; countries {self.countries}, "
                            f"topics {self.topics}")
        opts, letter = self._options(rng, self.gold(country, topic))
        return ["Q", country, topic, "?", *opts, "answer"], letter

    @staticmethod
    def control(item: Item) -> Item:
        """The options-only control of a cultural MCQ: country and topic removed, the gold letter kept."""
        words, letter = item
        if len(words) < 4 or words[0] != "Q" or "?" not in words:
            raise UserError("control() takes a cultural MCQ item from CultureWorld.mcq")
        return ["Q", *words[words.index("?"):]], letter

    def reading(self, rng: np.random.Generator, country: str) -> Item:
        """A CountryRC-like item: the answer is stated in the passage (any value, not the country's fact)."""
        if country not in self.countries:
            raise UserError(f"unknown country {country!r}; allowed: {', '.join(self.countries)}")
        v = f"v{int(rng.integers(self.n_values))}"
        opts, letter = self._options(rng, v)
        return ["passage", country, "has", v, ".", "Q", country, "?", *opts, "answer"], letter

    @staticmethod
    def nlu(rng: np.random.Generator, task: str) -> Item:
        """An NLU-like item: ``cmp`` (larger of two different numbers), ``same`` (equal?), and the held-back task
        ``min`` (smaller of the two)."""
        a, b = (int(x) for x in rng.choice(N_NUMBERS, 2, replace=False))
        if task == "cmp":
            return ["cmp", f"n{a}", f"n{b}", "answer"], f"n{max(a, b)}"
        if task == "same":
            if rng.random() < 0.5:
                b = a
            return ["same", f"n{a}", f"n{b}", "answer"], "yes" if a == b else "no"
        if task == "min":
            return ["min", f"n{a}", f"n{b}", "answer"], f"n{min(a, b)}"
        raise UserError(f"unknown NLU task {task!r}; allowed: cmp, same, min")

    # ------------------------------------------------------------------ sets and corpus
    def mcq_set(self, rng: np.random.Generator, topics, per: int) -> tuple[list[Item], list[str]]:
        """``per`` shuffles of every (country, topic): items and their country labels (country-major order)."""
        items, groups = [], []
        for c in self.countries:
            for t in topics:
                for _ in range(per):
                    items.append(self.mcq(rng, c, t))
                    groups.append(c)
        return items, groups

    def reading_set(self, rng: np.random.Generator, per: int) -> tuple[list[Item], list[str]]:
        items, groups = [], []
        for c in self.countries:
            for _ in range(per):
                items.append(self.reading(rng, c))
                groups.append(c)
        return items, groups

    def pretrain_item(self, rng: np.random.Generator) -> Item:
        """Training mixture: 50 % cultural MCQ (all topics), 20 % CountryRC, 30 % NLU (cmp / same)."""
        u = rng.random()
        if u < 0.5:
            return self.mcq(rng, self.countries[int(rng.integers(self.n_countries))],
                            self.topics[int(rng.integers(self.n_topics))])
        if u < 0.7:
            return self.reading(rng, self.countries[int(rng.integers(self.n_countries))])
        return self.nlu(rng, NLU_TASKS[int(rng.integers(len(NLU_TASKS)))])


def encode_items(tok, items: list[Item], bos: str = "<bos>") -> tuple[dict, np.ndarray]:
    """Right-padded batch of the prompts (``bos`` + words) and the gold token ids ``[N]``."""
    import torch

    if not items:
        raise UserError("encode_items needs at least one item")
    conv = tok.convert_tokens_to_ids
    rows = [conv([bos, *w]) for w, _ in items]
    T = max(map(len, rows))
    ids = torch.zeros((len(rows), T), dtype=torch.long)
    att = torch.zeros((len(rows), T), dtype=torch.long)
    for i, r in enumerate(rows):
        ids[i, : len(r)] = torch.tensor(r)
        att[i, : len(r)] = 1
    return {"input_ids": ids, "attention_mask": att}, np.array(conv([g for _, g in items]))


# ---------------------------------------------------------------------- real models: country-knowledge MCQs
LANGUAGES = {
    "France": "French", "Germany": "German", "Italy": "Italian", "Spain": "Spanish", "Portugal": "Portuguese",
    "Greece": "Greek", "Poland": "Polish", "Hungary": "Hungarian", "Sweden": "Swedish", "Norway": "Norwegian",
    "Finland": "Finnish", "Denmark": "Danish", "the Netherlands": "Dutch", "Russia": "Russian",
    "Ukraine": "Ukrainian", "Turkey": "Turkish", "Japan": "Japanese", "China": "Chinese", "South Korea": "Korean",
    "Thailand": "Thai", "Vietnam": "Vietnamese", "Indonesia": "Indonesian", "Iran": "Persian", "Israel": "Hebrew",
    "Brazil": "Portuguese", "Mexico": "Spanish", "Argentina": "Spanish", "Egypt": "Arabic",
    "Saudi Arabia": "Arabic", "Romania": "Romanian", "Bulgaria": "Bulgarian", "Serbia": "Serbian",
    "Croatia": "Croatian", "the Czech Republic": "Czech", "Iceland": "Icelandic", "Latvia": "Latvian",
    "Lithuania": "Lithuanian", "Estonia": "Estonian", "Bangladesh": "Bengali", "Nepal": "Nepali",
    "Malaysia": "Malay", "Pakistan": "Urdu",
}
RELATION_TABLES = {"capital": CAPITALS, "currency": CURRENCIES, "language": LANGUAGES}
_QUESTION = {"capital": "What is the capital of {c}?", "currency": "What is the currency of {c}?",
             "language": "What is the official language of {c}?"}


@dataclass(frozen=True)
class CountryMCQ:
    """One country-knowledge question: text up to and including ``Answer:``, its options-only control, the gold
    letter and the country it names."""

    relation: str
    country: str
    prompt: str
    control: str
    gold: str


def _relations(relations) -> list[str]:
    """One relation name or several, checked against :data:`RELATION_TABLES`."""
    rels = [relations] if isinstance(relations, str) else list(relations)
    bad = [r for r in rels if r not in RELATION_TABLES]
    if bad or not rels:
        raise UserError(f"unknown relation(s) {bad or rels}; allowed: {', '.join(RELATION_TABLES)}")
    return rels


def country_mcqs(relations=tuple(RELATION_TABLES), seed: int = 0) -> list[CountryMCQ]:
    """Every (country, relation) fact as a 4-option MCQ (distractors: other values of the same relation).

    Capitals (68) + currencies (30) + languages (42) = 140 items; the control keeps the options and the answer
    slot and drops the question (the options-only control of the paper).
    """
    rels = _relations(relations)
    rng = np.random.default_rng(seed)
    out = []
    for r in rels:
        table = RELATION_TABLES[r]
        values = sorted(set(table.values()))
        for c, v in table.items():
            others = [x for x in values if x != v]
            opts = [v, *(others[i] for i in rng.choice(len(others), 3, replace=False))]
            opts = [opts[i] for i in rng.permutation(4)]
            block = "".join(f"\n{L}. {o}" for L, o in zip(LETTERS, opts, strict=True))
            gold = LETTERS[opts.index(v)]
            out.append(CountryMCQ(r, c, f"Question: {_QUESTION[r].format(c=c)}{block}\nAnswer:",
                                  f"Question:{block}\nAnswer:", gold))
    return out


_NAMES = ("Maria", "Ken", "Aisha", "Leo", "Sofia", "Omar", "Lena", "Ravi")
_PETS = ("a dog", "a cat", "a parrot", "a rabbit")


def country_reading(countries, per: int = 1, seed: int = 0) -> list[CountryMCQ]:
    """CountryRC-like passages that name a country; the question is answered from the passage alone."""
    rng = np.random.default_rng(seed)
    out = []
    for c in countries:
        for _ in range(per):
            name = _NAMES[int(rng.integers(len(_NAMES)))]
            order = rng.permutation(4)
            opts = [_PETS[i] for i in order]
            pet = _PETS[int(rng.integers(4))]
            block = "".join(f"\n{L}. {o}" for L, o in zip(LETTERS, opts, strict=True))
            p = f"{name} moved to {c} last year and lives there with {pet}.\nQuestion: What pet does {name} have?"
            out.append(CountryMCQ("reading", c, f"{p}{block}\nAnswer:", f"Question:{block}\nAnswer:",
                                  LETTERS[opts.index(pet)]))
    return out


def number_mcqs(n: int, seed: int = 0) -> list[CountryMCQ]:
    """The NLU proxy for real models: which of four two-digit numbers is the largest."""
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n):
        nums = [int(x) for x in rng.choice(np.arange(10, 100), 4, replace=False)]
        block = "".join(f"\n{L}. {o}" for L, o in zip(LETTERS, nums, strict=True))
        out.append(CountryMCQ("number", "", f"Question: Which number is the largest?{block}\nAnswer:",
                              f"Question:{block}\nAnswer:", LETTERS[nums.index(max(nums))]))
    return out


# ---- cloze form for small base models -------------------------------------------------------------------------
# A 270M base model answers the lettered MCQs above at chance (0.17-0.26 per relation, zero- and two-shot), so its
# knowledge cannot be read through a letter. In cloze form the same facts are read from the next token: the prompt
# ends where the answer starts and the four options are compared by the logit of their first token.

_CLOZE = {"capital": "The capital city of {c} is", "currency": "The official currency of {c} is the",
          "language": "The most widely spoken language in {c} is"}
_CLOZE_CONTROL = {"capital": "The capital city of the country is", "currency": "The official currency of the country "
                  "is the", "language": "The most widely spoken language in the country is"}
_PET_WORDS = ("dog", "cat", "parrot", "rabbit")
ANTONYMS = (("hot", "cold"), ("big", "small"), ("up", "down"), ("fast", "slow"), ("light", "dark"),
            ("happy", "sad"), ("open", "closed"), ("early", "late"), ("young", "old"), ("rich", "poor"),
            ("strong", "weak"), ("wet", "dry"), ("tall", "short"), ("hard", "soft"), ("full", "empty"),
            ("loud", "quiet"), ("clean", "dirty"), ("thick", "thin"), ("cheap", "expensive"), ("true", "false"),
            ("win", "lose"), ("buy", "sell"), ("push", "pull"), ("left", "right"), ("day", "night"),
            ("north", "south"), ("east", "west"), ("inside", "outside"), ("above", "below"), ("before", "after"),
            ("first", "last"), ("good", "bad"), ("love", "hate"), ("friend", "enemy"), ("safe", "dangerous"),
            ("heavy", "light"), ("sweet", "sour"), ("near", "far"), ("begin", "end"), ("question", "answer"))


@dataclass(frozen=True)
class ClozeItem:
    """One next-token question: ``prompt`` ends where the answer starts; ``options`` are the four continuations
    (each with its leading space), ``gold`` the index of the right one; ``control`` is the prompt with the country
    (the knowledge cue) removed."""

    relation: str
    country: str
    prompt: str
    control: str
    options: tuple[str, str, str, str]
    gold: int


def _four(rng, v, pool):
    by_word = {}  # one value per first word, none sharing the answer's: the four first tokens differ
    for x in sorted(set(pool)):
        if x.split()[0] != v.split()[0]:
            by_word.setdefault(x.split()[0], x)
    others = sorted(by_word.values())
    opts = [v, *(others[i] for i in rng.choice(len(others), 3, replace=False))]
    order = rng.permutation(4)
    opts = [opts[i] for i in order]
    return tuple(" " + o for o in opts), opts.index(v)


def country_cloze(relations=tuple(RELATION_TABLES), seed: int = 0) -> list[ClozeItem]:
    """Every (country, relation) fact in cloze form, 4 options (distractors: other values of the relation whose
    first word differs from the answer's). 140 items over the three relations, as :func:`country_mcqs`."""
    rels = _relations(relations)
    rng = np.random.default_rng(seed)
    out = []
    for r in rels:
        table = {c: v.removeprefix("the ") for c, v in RELATION_TABLES[r].items()}
        pool = sorted(set(table.values()))
        for c, v in table.items():
            opts, gold = _four(rng, v, pool)
            out.append(ClozeItem(r, c, _CLOZE[r].format(c=c), _CLOZE_CONTROL[r], opts, gold))
    return out


def reading_cloze(countries, per: int = 1, seed: int = 0) -> list[ClozeItem]:
    """CountryRC-like passages in cloze form: the pet is named in the passage and asked for at the end."""
    rng = np.random.default_rng(seed)
    out = []
    for c in countries:
        for _ in range(per):
            name = _NAMES[int(rng.integers(len(_NAMES)))]
            pet = _PET_WORDS[int(rng.integers(4))]
            order = rng.permutation(4)
            opts = tuple(" " + _PET_WORDS[i] for i in order)
            out.append(ClozeItem("reading", c, f"{name} moved to {c} last year and lives there with a {pet}. "
                                 f"{name}'s pet is a", f"{name}'s pet is a", opts, opts.index(" " + pet)))
    return out


# Frame-matched non-cultural facts: the same "The <relation> of <thing> is" cloze frame as the country questions,
# about things no culture owns (colours, irregular plurals, animals' young, homes and females, materials). Culture
# units should spare them. Two relations were tried and dropped before any suppression was run, because Gemma 3
# 270M answers them near chance clean (legs of an animal, sides of a polygon): a set it does not know cannot lose.
GENERAL_FACTS = {
    "colour": ("The colour of {x} is", (("the sky", "blue"), ("grass", "green"), ("snow", "white"), ("blood", "red"),
                                        ("coal", "black"), ("a banana", "yellow"), ("chocolate", "brown"),
                                        ("a carrot", "orange"), ("a ripe tomato", "red"), ("milk", "white"),
                                        ("a lemon", "yellow"), ("an emerald", "green"),
                                        # added 2026-12-07 (see the note above)
                                        ("a cucumber", "green"), ("a polar bear", "white"), ("a crow", "black"),
                                        ("a strawberry", "red"), ("a plum", "purple"), ("an elephant", "grey"),
                                        ("a flamingo", "pink"), ("a pumpkin", "orange"), ("a lime", "green"),
                                        ("a cherry", "red"), ("the ocean", "blue"), ("a sunflower", "yellow"),
                                        ("coffee", "brown"), ("a blueberry", "blue")),
               ("blue", "green", "white", "red", "black", "yellow", "brown", "orange", "purple", "pink", "grey")),
    "plural": ("The plural of {x} is", (("mouse", "mice"), ("child", "children"), ("foot", "feet"),
                                         ("tooth", "teeth"), ("man", "men"), ("goose", "geese"), ("woman", "women"),
                                         ("person", "people"), ("ox", "oxen"), ("louse", "lice"),
                                         ("knife", "knives"), ("leaf", "leaves"), ("wolf", "wolves"),
                                         ("half", "halves"), ("wife", "wives"), ("shelf", "shelves"),
                                         ("city", "cities"), ("baby", "babies"), ("box", "boxes"),
                                         ("loaf", "loaves"), ("thief", "thieves"), ("calf", "calves")),
               ("mice", "children", "feet", "teeth", "men", "geese", "women", "people", "oxen", "lice", "knives",
                "leaves", "wolves", "halves", "wives", "shelves", "cities", "babies", "boxes", "loaves", "thieves",
                "calves")),
    "young": ("The young of a {x} is called a", (("cat", "kitten"), ("dog", "puppy"), ("cow", "calf"),
                                                  ("sheep", "lamb"), ("horse", "foal"), ("frog", "tadpole"),
                                                  ("kangaroo", "joey"), ("bear", "cub"), ("duck", "duckling"),
                                                  ("hen", "chick"),
                                                  ("goat", "kid"), ("swan", "cygnet"), ("deer", "fawn"),
                                                  ("goose", "gosling"), ("owl", "owlet"), ("pig", "piglet"),
                                                  ("lion", "cub"), ("elephant", "calf"), ("eagle", "eaglet"),
                                                  ("butterfly", "caterpillar"), ("wolf", "pup"), ("tiger", "cub")),
              ("kitten", "puppy", "calf", "lamb", "foal", "tadpole", "joey", "cub", "duckling", "chick", "kid",
               "cygnet", "fawn", "gosling", "owlet", "piglet", "eaglet", "caterpillar", "pup")),
    "home": ("The home of a {x} is called a", (("bee", "hive"), ("bird", "nest"), ("spider", "web"),
                                                ("rabbit", "burrow"), ("horse", "stable"), ("pig", "sty"),
                                                ("dog", "kennel"), ("bear", "den"), ("lion", "den"), ("fox", "den"),
                                                ("hen", "coop"), ("wasp", "nest"), ("ant", "anthill"),
                                                ("beaver", "lodge"), ("eagle", "eyrie"), ("squirrel", "drey"),
                                                ("mole", "burrow"), ("tiger", "den")),
             ("hive", "nest", "web", "burrow", "stable", "sty", "kennel", "den", "coop", "anthill", "lodge", "eyrie",
              "drey")),
    "female": ("The female of a {x} is called a", (("horse", "mare"), ("sheep", "ewe"), ("deer", "doe"),
                                                    ("pig", "sow"), ("lion", "lioness"), ("bull", "cow"),
                                                    ("rooster", "hen"), ("fox", "vixen"),
                                                    ("tiger", "tigress"), ("goat", "nanny"), ("peacock", "peahen"),
                                                    ("rabbit", "doe"), ("elephant", "cow"), ("ram", "ewe"),
                                                    ("swan", "pen")),
               ("mare", "ewe", "doe", "sow", "lioness", "cow", "hen", "vixen", "queen", "tigress", "nanny", "peahen",
                "pen")),
    "material": ("The material of a {x} is", (("window", "glass"), ("candle", "wax"), ("tyre", "rubber"),
                                               ("sweater", "wool"), ("brick", "clay"), ("pencil", "wood"),
                                               ("coin", "metal"), ("shoe", "leather"), ("bottle", "glass"),
                                               ("book", "paper"), ("mirror", "glass"), ("envelope", "paper"),
                                               ("spoon", "metal"), ("eraser", "rubber"), ("scarf", "wool"),
                                               ("wallet", "leather"), ("crayon", "wax")),
                 ("glass", "wax", "rubber", "wool", "clay", "wood", "metal", "leather", "paper", "stone")),
}


def general_cloze(seed: int = 0) -> list[ClozeItem]:
    """The non-cultural control set in cloze form (120 items): the country questions' frame with a thing in place
    of the country, four options from the relation's value pool (first words distinct)."""
    rng = np.random.default_rng(seed)
    out = []
    for rel, (frame, facts, pool) in GENERAL_FACTS.items():
        for x, v in facts:
            opts, gold = _four(rng, v, [p for p in pool if p != v])
            out.append(ClozeItem(rel, "", frame.format(x=x), frame.replace("{x}", "X"), opts, gold))
    return out


def antonym_cloze(seed: int = 0) -> list[ClozeItem]:
    """The NLU proxy for the cloze form: "The opposite of hot is" -> " cold" among four antonyms (40 items)."""
    rng = np.random.default_rng(seed)
    pool = sorted({b for _, b in ANTONYMS})
    out = []
    for a, b in ANTONYMS:
        opts, gold = _four(rng, b, [x for x in pool if x != a])
        out.append(ClozeItem("antonym", "", f"The opposite of {a} is", "The opposite is", opts, gold))
    return out
