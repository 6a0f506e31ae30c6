"""English text loaders: paragraph chunking (pure logic) and the real Austen / gensim corpora."""

from __future__ import annotations

import pytest

from iclr26.core import MissingAssetError, UserError
from iclr26.data import text as text_mod
from iclr26.data.text import BOOKS, chunk_paragraphs, load_austen, paragraphs


def test_paragraphs_join_lines_at_blank_lines():
    lines = ["CHAPTER I", "", "", "It is a truth universally", "acknowledged, that a man", "", "Short.", ""]
    assert paragraphs(lines) == ["CHAPTER I", "It is a truth universally acknowledged, that a man", "Short."]


def test_chunking_splits_long_paragraphs_at_sentences_and_drops_headings():
    sent = "Mr. Knightley walked in the garden with Emma today."  # 9 words, abbreviation not a sentence end
    para = " ".join([sent] * 5)  # 45 words
    out = chunk_paragraphs(["CHAPTER II", para], chunk_words=20, min_words=3)
    assert all(len(c.split()) <= 20 for c in out)
    assert " ".join(out) == para  # nothing lost, order kept
    assert all(c.endswith("today.") for c in out)  # split only at sentence ends
    assert [len(c.split()) for c in out] == [18, 18, 9]
    runon = " ".join(["word"] * 50)  # no sentence end: hard split
    assert [len(c.split()) for c in chunk_paragraphs([runon], chunk_words=20)] == [20, 20, 10]
    with pytest.raises(UserError):
        chunk_paragraphs([para], chunk_words=0)


def test_missing_corpus_gives_commands(monkeypatch, tmp_path):
    monkeypatch.setattr(text_mod, "_candidate_roots", lambda: [tmp_path])
    with pytest.raises(MissingAssetError, match="apt-get download r-cran-janeaustenr && dpkg -x"):
        load_austen()
    with pytest.raises(UserError, match="unknown Austen"):
        load_austen(books=["ulysses"])


@pytest.mark.real
def test_austen_corpus():
    pytest.importorskip("rdata")
    if text_mod.find_austen() is None:
        pytest.skip("r-cran-janeaustenr not extracted (see docs for the apt-get download + dpkg -x commands)")
    raw = text_mod.read_rdata_lazyload(text_mod.find_austen())
    assert sorted(raw) == sorted(BOOKS)
    assert raw["prideprejudice"][0] == "PRIDE AND PREJUDICE"
    chunks = load_austen()
    n_words = sum(len(c.split()) for c in chunks)
    assert 700_000 < n_words < 730_000  # ~717k words in the six novels
    assert chunks[0].startswith("The family of Dashwood had long been settled in Sussex.")
    small = load_austen(max_words=1000, books=["emma"])
    assert 1000 <= sum(len(c.split()) for c in small) < 1200
    assert small[0].startswith("Emma Woodhouse, handsome, clever, and rich")


@pytest.mark.optional
def test_wiki_sample():
    pytest.importorskip("gensim")
    lee = text_mod.load_wiki_sample("lee")
    assert len(lee) == 300
    assert len(text_mod.load_wiki_sample("wiki")) > 50


def test_strip_wikitext():
    raw = (
        "{{Infobox|x={{nested}}}}'''Achilles''' was a [[Greece|Greek]] hero of the [[Trojan War]]."
        "&lt;ref&gt;Homer, ''Iliad''.&lt;/ref&gt;\n[[File:A.jpg|thumb|a [[vase]]]]\n== Life ==\n"
    )
    assert text_mod._strip_wikitext(raw) == "Achilles was a Greek hero of the Trojan War. Life"
