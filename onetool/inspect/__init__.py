"""The inspect/exec face's pure parts: compressed schemas, TOON results, the ``inspect`` description."""

from onetool.inspect.compress import DEFAULT_MAX_DESCRIPTION_LEN, compress

__all__ = ["DEFAULT_MAX_DESCRIPTION_LEN", "compress"]
