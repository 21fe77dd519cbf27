"""The spine: the gateway's shared services, a run, and the one path every tool call takes.

``gateway`` opens and closes what every face uses; ``runs`` runs one snippet (``precheck``, the sandbox, its pack
calls, the shaped result); ``calls`` is the path of every tool call, whatever face asked; ``describe`` and
``listing`` write ``run``'s description within its budget; ``relay`` carries a run's progress and logs to its
client; ``startup`` is the first wave the catalogue waits for, ``drain`` the stop that lets calls in flight
finish, ``traces`` the OpenTelemetry spans.
"""
