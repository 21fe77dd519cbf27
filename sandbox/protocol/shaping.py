"""What both sides need to know of how a run's result is shown: media, and the least of a value shown.

Media are the dicts an upstream's images, audio and resources become. The host passes such a dict on as MCP
content only when an upstream returned exactly it during the run (onetool's results module fingerprints them); its
search of a result is bounded by these numbers. The worker reads them to know when it may send a large result as
text already cut (sandbox/worker/_result.py): a result with no media within the host's search has nothing for the
host to find in it.
"""

from __future__ import annotations

__all__ = ["MEDIA_DEPTH", "MEDIA_TYPES", "MEDIA_WALK", "MIN_SHOWN"]

MEDIA_TYPES = ("image", "audio", "resource", "resource_link")
"""The `type` of a media dict."""
MEDIA_WALK = 10_000
"""Values the search for media in a result visits; the rest of a larger result stays as it is."""
MEDIA_DEPTH = 4
"""Levels of a result the search for media goes down."""
MIN_SHOWN = 1024
"""Characters of a value the result shows at least, however much of `sandbox.max_output` printed output took."""
