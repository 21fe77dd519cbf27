"""The words a tool is found by, and a query is made of: identifiers split, lower case, stop words out, stemmed.

``getFileContents``, ``get_file_contents`` and ``get-file-contents`` are the words ``get file content``; so is a
user's "getting the file's contents". Stemming is the Snowball English stemmer (PyStemmer, a C extension), so
"deleting", "deleted" and "deletes" meet at ``delet``. What comes out is only letters and digits: a word can never
be read as FTS5 query syntax (quotes, ``*``, ``NEAR``, ``OR`` and column filters are punctuation or plain words).
"""

from __future__ import annotations

import re
from functools import lru_cache

import Stemmer

__all__ = ["MAX_WORD_CHARS", "spelled", "stem", "words"]

MAX_WORD_CHARS = 40
"""A longer run of letters is no word a user types (a hash, base64): it is left out."""

_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z]{2})")
"""Where ``getFileContents`` and ``HTTPServer`` break: before an upper-case letter after a lower one, and before
the last capital of a run followed by a lower-case word (``listPRs`` keeps ``PRs``)."""
_POSSESSIVE = re.compile(r"['’]s\b")
_HYPHENATED = re.compile(r"\b[^\W_]+(?:-[^\W_]+)+\b")
"""``to-do``, ``e-mail``, ``sign-in``: also read as one word (``todo``), as others write them."""
_WORD = re.compile(r"[^\W_]+")
"""Letters and digits of any script; ``_``, ``-``, ``.``, ``/`` and every other mark separate words."""

_STOP_WORDS = """a an the and or but of to in on at by for from with without into onto over under about as is are was
    were be
    been being it its this that these those there here i me my we our you your he she they them their what which
    who whom whose when where why how can could would should will shall may might must do does did done doing
    have has had having please want wants need needs like just also some any each every all via using use used
    so then than too very much many more most such only own same other another one thing things something way
    able let lets help tell give im"""
STOP_WORDS = frozenset(_STOP_WORDS.split())
"""Words that say nothing about which tool to use. "all", "one" and "use" are here on purpose: "list all", "use
the tool" match every tool's text. Verbs that do say something (get, list, show, find, make) are not."""

_stemmer = Stemmer.Stemmer("english")


@lru_cache(maxsize=65_536)
def stem(word: str) -> str:
    """``word`` (lower case) as the Snowball English stemmer has it: ``repositories`` -> ``repositori``."""
    stemmed: str = _stemmer.stemWord(word)
    return stemmed


def words(text: str, *, split_camel: bool = True) -> list[str]:
    """The stemmed words of ``text``, in order, repeats kept (BM25 counts them): ``snake_case`` and ``kebab-case``
    split; a ``camelCase`` word both whole and split (``GitHub`` is ``github``, ``git`` and ``hub``), or only
    whole with ``split_camel=False`` (a query: people write names that way, and mean the name); ``base64`` and
    ``s3`` stay whole, as people type them. Stop words, single letters and words longer than MAX_WORD_CHARS are
    left out."""
    out: list[str] = []
    text = _POSSESSIVE.sub("", text)
    if "-" in text:
        text = _HYPHENATED.sub(_joined, text)
    for token in _WORD.findall(text):
        word = token.lower()
        if _kept(word):
            out.append(stem(word))
        # Most words are lower case: only a mixed-case one is looked at for its parts.
        if split_camel and word != token and _CAMEL.search(token):
            out.extend(stem(part) for part in _CAMEL.sub(" ", token).lower().split() if _kept(part))
    return out


def spelled(text: str) -> str:
    """``text``'s words as a sentence, for a model that reads words rather than stems: identifiers split
    (``getFileContents`` and ``get_file_contents`` are ``get File Contents`` and ``get file contents``), every
    mark and every word longer than MAX_WORD_CHARS left out, case and stop words kept."""
    return " ".join(word for word in _WORD.findall(_CAMEL.sub(" ", text)) if len(word) <= MAX_WORD_CHARS)


def _joined(match: re.Match[str]) -> str:
    return f"{match.group()} {match.group().replace('-', '')}"


def _kept(word: str) -> bool:
    return word not in STOP_WORDS and len(word) <= MAX_WORD_CHARS and (len(word) > 1 or word.isdigit())
