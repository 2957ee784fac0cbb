"""The searchable words of a title (a run's workflow id and name, a gate's title): split, case-folded, bounded. The run
search indexes them (rules/run_search.py); a run head or an event batch that holds a ModuleX gate's message elsewhere
keeps them as that gate's title (domain/head_parts.py), so a read that puts nothing back finds the same words."""

from __future__ import annotations

import re

# Words of one title that are indexed (the workflow's id and name together; each gate's title), and a word's length:
# longer words are cut to it, in the index and in a query alike.
MAX_TITLE_WORDS = 8
MAX_WORD_LENGTH = 32
MIN_WORD_LENGTH = 2

_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")
_WORD = re.compile(r"[^\W_]+")


def words(text: str) -> list[str]:
    """A title's searchable words, in order, each once: split at anything not a letter or digit and between
    camelCase parts, case-folded, at least MIN_WORD_LENGTH long, cut to MAX_WORD_LENGTH."""
    found = (w[:MAX_WORD_LENGTH] for w in _WORD.findall(_CAMEL.sub(" ", text).casefold()))
    return list(dict.fromkeys(w for w in found if len(w) >= MIN_WORD_LENGTH))
