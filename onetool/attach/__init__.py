"""How the CLI reaches a running gateway: the discovery files that name it (``discovery``) and its admin API over
the standard library only (``admin``). Nothing here imports the gateway: ``onetool run -c`` must start fast."""
