"""Data for latent planning (P11, "Latent Planning Emerges with Scale"): a definition -> noun -> article grammar for
model organisms, and a/an items for real models.

**Organism grammar** (:class:`PlanningGrammar`, word level). Nouns ``N0 … N{n-1}`` each take a fixed article class
(``a`` or ``an``, drawn at random); each noun is defined by an ordered pair of definition tokens ``Di Dj``. Sentence
types: (i) ``N takes a|an .`` (noun -> article), (ii) ``I saw the N' and a|an N .`` (article before the noun),
(iii) ``Di Dj means N .`` (definition -> noun, every noun), (iv) the a/an task with one in-context example
``Di Dj is a|an N . Dk Dl is a|an M .`` — for the *trained* nouns only; the last ``n_heldout`` nouns never occur in
(iv), so getting their article right after ``Dk Dl is`` needs composing (iii) with (i)/(ii). A query item is the
prefix of (iv) up to the second ``is``: the next token is the article, the one after it the (planned) noun.

**Real-model items** (:data:`AN_ITEMS`): 120 hand-written (word, definition) pairs, 60 taking "an" and 60 taking
"a", for the paper's task format ``"<definition> is an incinerator. <definition> is"`` (:func:`an_prompt`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from iclr26.core.errors import UserError

ARTICLES = ("a", "an")
GRAMMAR_WORDS = ("takes", "I", "saw", "the", "and", "means", "is", ".", *ARTICLES)
SENTENCE_TYPES = ("takes", "saw", "means", "task")


@dataclass(frozen=True)
class PlanningGrammar:
    """The fixed noun classes and definitions of the organism corpus (all drawn from ``seed``)."""

    n_nouns: int = 64
    n_defs: int = 24
    n_heldout: int = 16
    seed: int = 0
    mix: tuple[float, float, float, float] = (0.15, 0.15, 0.2, 0.5)  # sentence-type weights, SENTENCE_TYPES order
    _cls: np.ndarray = field(init=False, repr=False, compare=False)
    _defs: np.ndarray = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.n_nouns < 4 or not 1 <= self.n_heldout <= self.n_nouns - 2:
            raise UserError(f"PlanningGrammar needs n_nouns >= 4 and 1 <= n_heldout <= n_nouns - 2, got "
                            f"n_nouns={self.n_nouns}, n_heldout={self.n_heldout}")
        if self.n_defs * (self.n_defs - 1) < self.n_nouns:
            raise UserError(f"n_defs={self.n_defs} gives {self.n_defs * (self.n_defs - 1)} ordered pairs, fewer than "
                            f"n_nouns={self.n_nouns}")
        if len(self.mix) != 4 or min(self.mix) < 0 or sum(self.mix) <= 0:
            raise UserError(f"mix must be 4 non-negative weights ({', '.join(SENTENCE_TYPES)}), got {self.mix}")
        rng = np.random.default_rng(self.seed)
        # balanced article classes, shuffled separately inside the trained and the held-out nouns
        n_tr = self.n_nouns - self.n_heldout
        cls = np.concatenate([rng.permutation(np.arange(n_tr) % 2), rng.permutation(np.arange(self.n_heldout) % 2)])
        pairs = [(i, j) for i in range(self.n_defs) for j in range(self.n_defs) if i != j]
        pick = rng.choice(len(pairs), self.n_nouns, replace=False)
        object.__setattr__(self, "_cls", cls.astype(np.int64))
        object.__setattr__(self, "_defs", np.array([pairs[p] for p in pick], dtype=np.int64))

    # ------------------------------------------------------------------ facts
    @property
    def article_class(self) -> np.ndarray:
        """``[n_nouns]``: 0 = "a", 1 = "an"."""
        return self._cls.copy()

    @property
    def trained(self) -> np.ndarray:
        return np.arange(self.n_nouns - self.n_heldout)

    @property
    def heldout(self) -> np.ndarray:
        return np.arange(self.n_nouns - self.n_heldout, self.n_nouns)

    def article(self, noun: int) -> str:
        return ARTICLES[int(self._cls[noun])]

    def definition(self, noun: int) -> list[str]:
        i, j = self._defs[noun]
        return [f"D{i}", f"D{j}"]

    def nouns(self) -> list[str]:
        return [f"N{i}" for i in range(self.n_nouns)]

    def vocab(self) -> list[str]:
        return [*GRAMMAR_WORDS, *self.nouns(), *(f"D{i}" for i in range(self.n_defs))]

    # ------------------------------------------------------------------ sentences
    def task_words(self, example: int, query: int, *, full: bool = True) -> list[str]:
        """``<bos> Dex is ART ex . Dq is [ART q .]`` (``full=False`` stops after the second ``is``)."""
        words = ["<bos>", *self.definition(example), "is", self.article(example), f"N{example}", ".",
                 *self.definition(query), "is"]
        return words + [self.article(query), f"N{query}", "."] if full else words

    def sentence(self, rng: np.random.Generator) -> list[str]:
        """One training sentence (``<bos>`` … ``<eos>``) of a type drawn with weights ``mix``."""
        p = np.asarray(self.mix, dtype=float) / sum(self.mix)
        kind = SENTENCE_TYPES[int(rng.choice(4, p=p))]
        n = int(rng.integers(self.n_nouns))
        if kind == "takes":
            return ["<bos>", f"N{n}", "takes", self.article(n), ".", "<eos>"]
        if kind == "saw":
            m = int(rng.integers(self.n_nouns))
            return ["<bos>", "I", "saw", "the", f"N{m}", "and", self.article(n), f"N{n}", ".", "<eos>"]
        if kind == "means":
            return ["<bos>", *self.definition(n), "means", f"N{n}", ".", "<eos>"]
        ex, q = (int(v) for v in rng.choice(self.trained, 2, replace=False))
        return [*self.task_words(ex, q), "<eos>"]

    def query_items(self, nouns: np.ndarray | list[int], seed: int = 0) -> list[tuple[list[str], int, int]]:
        """One query prefix per noun: ``(words up to the second 'is', query noun, example noun)``; the example
        noun is a trained noun other than the query, drawn from ``seed``."""
        rng = np.random.default_rng(seed)
        out = []
        for q in nouns:
            q = int(q)
            pool = self.trained[self.trained != q]
            ex = int(rng.choice(pool))
            out.append((self.task_words(ex, q, full=False), q, ex))
        return out


# ---------------------------------------------------------------------------------------------- real-model items
#: (word, definition) pairs; the article is "an" for the first 60 and "a" for the last 60 (checked by tests)
AN_ITEMS: tuple[tuple[str, str], ...] = (
    ("accountant", "A person whose job is to keep and check financial records"),
    ("architect", "A person who designs buildings"),
    ("astronaut", "A person who travels into space in a rocket"),
    ("astronomer", "A scientist who studies the stars and planets"),
    ("engineer", "A person who designs engines, machines or bridges"),
    ("electrician", "A person who installs and repairs electrical wiring"),
    ("actor", "A person who performs in plays and films"),
    ("artist", "A person who paints or draws pictures"),
    ("author", "A person who writes books"),
    ("editor", "A person who corrects and prepares texts for publication"),
    ("umpire", "The official who enforces the rules of a baseball game"),
    ("inventor", "A person who creates new devices nobody has made before"),
    ("interpreter", "A person who translates speech between two languages"),
    ("optician", "A person who makes and sells glasses"),
    ("economist", "An expert who studies money, markets and trade"),
    ("orphan", "A child whose parents have died"),
    ("elephant", "A very large grey animal with a long trunk"),
    ("octopus", "A sea animal with eight arms"),
    ("owl", "A bird that hunts at night and hoots"),
    ("eagle", "A large bird of prey with a hooked beak"),
    ("ant", "A tiny insect that lives in a colony"),
    ("alligator", "A large reptile with strong jaws that lives in the rivers of Florida"),
    ("antelope", "A fast, deer-like animal of the African plains"),
    ("ostrich", "A very large bird that cannot fly but runs fast"),
    ("otter", "A furry animal that swims in rivers and eats fish"),
    ("oyster", "A shellfish that can contain a pearl"),
    ("eel", "A long fish shaped like a snake"),
    ("insect", "A small animal with six legs, such as a beetle"),
    ("apple", "A round fruit that is red or green and grows on trees"),
    ("orange", "A round citrus fruit with a thick peel"),
    ("onion", "A vegetable with layers that makes you cry when you cut it"),
    ("avocado", "A green fruit used to make guacamole"),
    ("egg", "The oval thing that a hen lays"),
    ("island", "A piece of land surrounded by water"),
    ("ocean", "A huge body of salt water"),
    ("iceberg", "A large floating mass of ice"),
    ("igloo", "A house built from blocks of snow"),
    ("oven", "A kitchen appliance used for baking bread"),
    ("envelope", "A paper cover in which you post a letter"),
    ("eraser", "A piece of rubber used to remove pencil marks"),
    ("umbrella", "The thing you hold over your head to stay dry in the rain"),
    ("anchor", "A heavy object that keeps a ship in place"),
    ("axe", "A tool with a blade used for chopping wood"),
    ("arrow", "A pointed stick that is shot from a bow"),
    ("ambulance", "A vehicle that takes sick people to hospital"),
    ("airport", "A place where planes take off and land"),
    ("orchestra", "A large group of musicians who play classical music together"),
    ("engine", "The machine that makes a car move"),
    ("emerald", "A green precious stone"),
    ("elbow", "The joint in the middle of your arm"),
    ("ear", "The part of the body that you hear with"),
    ("eye", "The part of the body that you see with"),
    ("album", "A collection of songs released together by a band"),
    ("attic", "A room just below the roof of a house"),
    ("aquarium", "A glass tank in which fish are kept"),
    ("apron", "A piece of clothing worn to keep your clothes clean while cooking"),
    ("alarm", "A device that makes a loud noise to warn people of danger"),
    ("encyclopedia", "A book with information on many subjects, arranged alphabetically"),
    ("orchard", "A field where fruit trees are grown"),
    ("earthquake", "A sudden violent shaking of the ground"),
    ("pilot", "A person who flies airplanes"),
    ("doctor", "A person who treats sick people"),
    ("teacher", "A person who teaches children at school"),
    ("baker", "A person who makes bread and cakes for a living"),
    ("farmer", "A person who grows crops and raises animals"),
    ("lawyer", "A person who gives legal advice and represents people in court"),
    ("dentist", "A doctor who takes care of teeth"),
    ("nurse", "A person who cares for patients in a hospital"),
    ("chef", "A person who cooks in a restaurant"),
    ("firefighter", "A person whose job is to put out fires"),
    ("plumber", "A person who fixes water pipes and drains"),
    ("carpenter", "A person who makes things out of wood"),
    ("journalist", "A person who writes news stories for a newspaper"),
    ("surgeon", "A doctor who performs operations"),
    ("librarian", "A person who works in a library"),
    ("tiger", "A large wild cat with orange fur and black stripes"),
    ("lion", "A large cat with a mane, known as the king of the jungle"),
    ("giraffe", "An African animal with a very long neck"),
    ("horse", "A large animal with a mane that people ride"),
    ("dog", "A loyal pet that barks"),
    ("cat", "A pet that purrs and catches mice"),
    ("rabbit", "A small animal with long ears that hops"),
    ("snake", "A long reptile with no legs"),
    ("penguin", "A black and white bird that cannot fly and lives in Antarctica"),
    ("dolphin", "A clever sea mammal that swims in groups"),
    ("shark", "A large fish with many sharp teeth"),
    ("frog", "A small green animal that jumps and croaks"),
    ("spider", "A small creature with eight legs that spins webs"),
    ("banana", "A long yellow fruit that monkeys like"),
    ("lemon", "A sour yellow citrus fruit"),
    ("carrot", "An orange root vegetable that rabbits like"),
    ("potato", "A vegetable used to make chips and fries"),
    ("tomato", "A red fruit used to make ketchup"),
    ("hammer", "A tool used to hit nails"),
    ("knife", "A tool with a sharp blade used for cutting food"),
    ("bicycle", "A vehicle with two wheels that you pedal"),
    ("car", "A vehicle with four wheels and an engine"),
    ("train", "A vehicle that runs on rails"),
    ("boat", "A small vessel for travelling on water"),
    ("piano", "A large musical instrument with black and white keys"),
    ("guitar", "A musical instrument with six strings"),
    ("drum", "A musical instrument that you hit with sticks"),
    ("clock", "A device on the wall that shows the time"),
    ("camera", "A device used to take photographs"),
    ("telescope", "An instrument for looking at distant stars"),
    ("microscope", "An instrument for looking at very small things"),
    ("bridge", "A structure built over a river so that people can cross it"),
    ("castle", "A large old building with towers where kings lived"),
    ("hospital", "A place where sick people are treated"),
    ("library", "A building where you can borrow books"),
    ("desert", "A dry sandy place with very little rain"),
    ("mountain", "A very high hill with a peak"),
    ("volcano", "A mountain that erupts lava"),
    ("river", "A large natural stream of water that flows to the sea"),
    ("forest", "A large area covered with trees"),
    ("ladder", "A set of steps used to climb up a wall"),
    ("pillow", "A soft thing you rest your head on in bed"),
    ("blanket", "A warm cover for a bed"),
    ("candle", "A stick of wax that gives light when it burns"),
    ("key", "A small metal object used to open a lock"),
)
AN_EXAMPLE = ("incinerator", "A machine that burns rubbish")


def an_article(word: str) -> str:
    """The article of an :data:`AN_ITEMS` word (every word there starts with a vowel sound iff with a vowel)."""
    return "an" if word[:1].lower() in "aeiou" else "a"


def an_prompt(definition: str, example: tuple[str, str] = AN_EXAMPLE) -> str:
    """The paper's a/an format: ``"<example definition> is an <example>. <definition> is"``."""
    ex_word, ex_def = example
    return f"{ex_def} is {an_article(ex_word)} {ex_word}. {definition} is"
