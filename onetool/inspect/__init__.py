"""The inspect/exec face's pure parts: compressed schemas, TOON results, the ``inspect`` description."""

from onetool.inspect.compress import DEFAULT_MAX_DESCRIPTION_LEN, compress
from onetool.inspect.toon import DEFAULT_MAX_CHARS, cut, data_result, exec_result

__all__ = ["DEFAULT_MAX_CHARS", "DEFAULT_MAX_DESCRIPTION_LEN", "compress", "cut", "data_result", "exec_result"]
