"""An example local pack: in a snippet, `text.slugify("Hello World")`.

Every public function of a module in a `packs.dirs` folder is a tool of the
pack named after the file. Signatures and docstrings are what the model sees.
Local packs run in the gateway process (trusted code), sync or async.
"""

import re
from collections import Counter


def slugify(title: str, max_length: int = 60) -> str:
    """Turn a title into a lowercase URL slug."""
    slug = re.sub(r"[^a-z0-9]+", "-", title.lower()).strip("-")
    return slug[:max_length].rstrip("-")


def word_counts(text: str, top: int = 10) -> list[dict]:
    """The most frequent words of a text, as [{"word", "count"}], most frequent first."""
    words = re.findall(r"[a-zA-Z']+", text.lower())
    return [{"word": w, "count": n} for w, n in Counter(words).most_common(top)]
