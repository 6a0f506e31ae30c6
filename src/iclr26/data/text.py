"""Offline English text: Jane Austen's six novels (Debian ``r-cran-janeaustenr``) and gensim's test corpora.

Used by the interpretability reproductions (SAE training and probing on real text). The Debian package
stores each novel as an R character vector of lines inside an R lazy-load database
(``data/Rdata.rdx`` index + ``data/Rdata.rdb`` blobs, each blob a 4-byte length then zlib data); we read it
with the pure-Python ``rdata`` parser, without R. Lines are joined into paragraphs at blank lines, and long
paragraphs are split at sentence ends into chunks of at most ``chunk_words`` words.
"""

from __future__ import annotations

import functools
import logging
import re
import warnings
import zlib
from collections.abc import Iterable, Sequence
from pathlib import Path

from iclr26.assets import debian_dir, manual_command, unpack_debian
from iclr26.core.errors import MissingAssetError, UserError
from iclr26.core.paths import cache_home, data_home

log = logging.getLogger(__name__)

# janeaustenr::austen_books() order (publication order)
BOOKS = ("sensesensibility", "prideprejudice", "mansfieldpark", "emma", "northangerabbey", "persuasion")
_PKG_REL = "usr/lib/R/site-library/janeaustenr"


def _install_hint() -> str:
    return manual_command("janeaustenr") + ", then: pip install rdata"


def _candidate_roots() -> list[Path]:
    # data_home() is where `python -m iclr26.assets fetch` unpacks; cache_home() holds older
    # whole-package extractions; "/" finds a system-wide `apt-get install r-cran-janeaustenr`
    roots = [debian_dir("janeaustenr"), data_home() / "janeaustenr", cache_home() / "janeaustenr", Path("/")]
    return list(dict.fromkeys(roots))


def find_austen() -> Path | None:
    """The ``janeaustenr`` package folder (holding ``data/Rdata.rdx``), or None."""
    for root in _candidate_roots():
        for pkg in (root / _PKG_REL, root, root / "usr/lib/R/library/janeaustenr"):
            if (pkg / "data" / "Rdata.rdx").exists() and (pkg / "data" / "Rdata.rdb").exists():
                return pkg
    return None


def ensure_austen() -> Path:
    """Find the extracted package; if absent, unpack it with :func:`iclr26.assets.unpack_debian`
    (``apt-get download`` + ``dpkg -x`` into ``$ICLR26_DATA/janeaustenr``). No R is installed."""
    found = find_austen()
    if found is not None:
        return found
    unpack_debian("janeaustenr")
    found = find_austen()
    if found is None:
        raise MissingAssetError(
            "Jane Austen corpus (extracted package has no data/Rdata.rdx)", _install_hint()
        )
    return found


def read_rdata_lazyload(pkg_dir: str | Path) -> dict[str, list[str]]:
    """Read every object of an R lazy-load database ``data/Rdata.{rdx,rdb}`` as lists of strings."""
    try:
        import rdata
    except ImportError as e:
        raise MissingAssetError("the rdata parser (PyPI rdata)", "pip install rdata") from e
    data = Path(pkg_dir) / "data"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # rdata warns "Unknown file type: assumed RDS" on raw serializations
        index = rdata.conversion.convert(rdata.parser.parse_data((data / "Rdata.rdx").read_bytes()))
        blob = (data / "Rdata.rdb").read_bytes()
        out = {}
        for name, (off, length) in index["variables"].items():
            off, length = int(off), int(length)
            # each record: 4-byte big-endian uncompressed length, then a zlib stream
            obj = rdata.conversion.convert(
                rdata.parser.parse_data(zlib.decompress(blob[off + 4 : off + length]))
            )
            out[str(name)] = ["" if s is None else str(s) for s in obj]
    return out


# a sentence end, but not after the abbreviations that fill Austen's pages (Mr. Mrs. Dr. St.)
_SENT_END = re.compile(r"(?<!\bMr\.)(?<!\bMrs\.)(?<!\bDr\.)(?<!\bSt\.)(?<=[.!?])[\"')\]]*\s+")


def paragraphs(lines: Iterable[str]) -> list[str]:
    """Join consecutive non-blank lines into paragraphs (blank lines separate paragraphs)."""
    paras, cur = [], []
    for line in lines:
        s = line.strip()
        if s:
            cur.append(s)
        elif cur:
            paras.append(" ".join(cur))
            cur = []
    if cur:
        paras.append(" ".join(cur))
    return paras


def chunk_paragraphs(paras: Sequence[str], *, chunk_words: int = 200, min_words: int = 5) -> list[str]:
    """Split paragraphs longer than ``chunk_words`` at sentence ends (hard-splitting run-on sentences);
    drop paragraphs under ``min_words`` words (chapter headings, titles)."""
    if chunk_words < 1 or min_words < 0:
        raise UserError(f"chunk_words must be >= 1 and min_words >= 0, got {chunk_words}, {min_words}")
    out = []
    for p in paras:
        words = p.split()
        if len(words) < min_words:
            continue
        if len(words) <= chunk_words:
            out.append(" ".join(words))
            continue
        # aim for equal-sized chunks so that no tiny tail fragment is left over
        target = -(-len(words) // -(-len(words) // chunk_words))
        cur: list[str] = []
        for sent in _SENT_END.split(p):
            sw = sent.split()
            while len(sw) > chunk_words:  # a single sentence longer than a chunk
                if cur:
                    out.append(" ".join(cur))
                    cur = []
                out.append(" ".join(sw[:chunk_words]))
                sw = sw[chunk_words:]
            if cur and len(cur) + len(sw) > chunk_words:
                out.append(" ".join(cur))
                cur = []
            cur += sw
            if len(cur) >= target:
                out.append(" ".join(cur))
                cur = []
        if cur:
            out.append(" ".join(cur))
    return out


@functools.lru_cache(maxsize=2)
def _austen_lines(pkg_dir: str) -> dict[str, tuple[str, ...]]:
    return {k: tuple(v) for k, v in read_rdata_lazyload(pkg_dir).items()}


def load_austen(
    max_words: int | None = None,
    *,
    books: Sequence[str] | None = None,
    chunk_words: int = 200,
    min_words: int = 5,
    download: bool = False,
) -> list[str]:
    """Jane Austen's novels as paragraph-sized text chunks, in publication order (~717k words in all).

    ``max_words`` stops after that many words (whole chunks); ``books`` picks novels by their janeaustenr
    names (``BOOKS``). ``download=True`` may fetch the Debian package with apt (see :func:`ensure_austen`).
    """
    books = list(books) if books is not None else list(BOOKS)
    bad = [b for b in books if b not in BOOKS]
    if bad:
        raise UserError(f"unknown Austen book(s) {bad}; choose from {', '.join(BOOKS)}")
    pkg = ensure_austen() if download else find_austen()
    if pkg is None:
        raise MissingAssetError("Jane Austen corpus (Debian r-cran-janeaustenr)", _install_hint())
    lines = _austen_lines(str(pkg))
    out, n = [], 0
    for b in books:
        for c in chunk_paragraphs(paragraphs(lines[b]), chunk_words=chunk_words, min_words=min_words):
            if max_words is not None and n >= max_words:
                return out
            out.append(c)
            n += len(c.split())
    return out


def load_wiki_sample(source: str = "lee") -> list[str]:
    """gensim's bundled test corpora (needs ``pip install gensim``): ``"lee"`` = 300 news documents
    (``lee_background.cor``), ``"wiki"`` = article texts of the shortened Wikipedia dump (wikitext markup
    crudely stripped)."""
    try:
        import gensim.test.utils as gtu
    except ImportError as e:
        raise MissingAssetError("gensim test corpora", "pip install gensim") from e
    if source == "lee":
        p = Path(gtu.datapath("lee_background.cor"))
        return [
            ln.strip() for ln in p.read_text(encoding="utf-8", errors="replace").splitlines() if ln.strip()
        ]
    if source == "wiki":
        import bz2

        cands = sorted(Path(gtu.datapath("")).glob("enwiki-*shortened*.bz2"))
        if not cands:
            raise MissingAssetError("gensim's shortened Wikipedia dump", "pip install gensim")
        xml = bz2.decompress(cands[0].read_bytes()).decode("utf-8", errors="replace")
        docs = [_strip_wikitext(m.group(1)) for m in re.finditer(r"<text[^>]*>(.*?)</text>", xml, flags=re.S)]
        docs = [d for d in docs if len(d.split()) >= 20]
        return docs
    raise UserError(f"source={source!r}; choose 'lee' or 'wiki'")


def _strip_wikitext(t: str) -> str:
    """Crude wikitext -> plain text (enough for activation statistics, not for display)."""
    import html

    t = html.unescape(t)
    t = re.sub(r"<ref[^>/]*/>|<ref[^>]*>.*?</ref>|<!--.*?-->", " ", t, flags=re.S)
    t = re.sub(r"^\s*\[\[(?:File|Image|Category):.*$", " ", t, flags=re.M | re.I)
    t = re.sub(r"^(?:\{\||\||!).*$", " ", t, flags=re.M)  # table lines: {| |- | ! |}
    for _ in range(5):  # nested templates, innermost first
        t = re.sub(r"\{\{[^{}]*\}\}", " ", t)
    t = re.sub(r"\[\[(?:[^|\]]*\|)?([^\]]*)\]\]", r"\1", t)  # [[target|label]] -> label
    t = re.sub(r"\[https?://\S+\s*([^\]]*)\]", r"\1", t)  # [url label] -> label
    t = re.sub(r"<[^>]+>|'{2,}|={2,}|^[*#:;]+", " ", t, flags=re.M)
    return re.sub(r"\s+", " ", t).strip()
