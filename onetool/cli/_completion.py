"""`onetool completion bash|zsh|fish`: a completion script for the shell, made from the command's own parser, so
it never lists a command or option that does not exist nor misses a new one.

It completes commands, `servers` actions, each one's options, the choices of an option that has them, file
names after an option that takes a file, and server names where an argument names a server (:class:`ServerName`):
the script asks ``onetool completion --servers [--config FILE]`` (the command line's own ``--config``), which reads
the config file and the servers added to its SQLite store, imports none of the gateway's modules and connects
nothing. Install: ``eval "$(onetool completion bash)"`` in ~/.bashrc (zsh: the same with ``zsh`` in ~/.zshrc), or
``onetool completion fish > ~/.config/fish/completions/onetool.fish``.
"""

from __future__ import annotations

import argparse
import shlex
from collections.abc import Callable, Iterator
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path
from typing import Any

SHELLS = ("bash", "zsh", "fish")
# Options whose value is a file or folder: the shell completes paths there.
_PATH_OPTIONS = {"--config", "--log-file", "--output", "-o", "--state-dir", "--tls-cert", "--tls-key"}
SERVERS_FLAG = "--servers"
"""``onetool completion --servers [--config FILE]``: the server names the scripts offer, one a line."""


class ServerName(argparse.Action):
    """A positional argument that names a server: the completion scripts offer the config's server names there."""

    def __call__(
        self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any, option: str | None = None
    ) -> None:
        setattr(namespace, self.dest, values)


def server_names(config: str | None) -> list[str]:
    """The names of the servers of the config a command line names (else ``$ONETOOL_CONFIG``, else
    ``./onetool.yaml``), and of those added at run time to its SQLite store. Read, not validated: whatever cannot be
    read gives nothing, since a completion has no one to tell."""
    from onetool.state.paths import find_config

    path = find_config(config)
    if path is None:
        return []
    path = path.expanduser()
    raw = _read(path)
    names: list[str] = []
    for key in ("servers", "mcpServers"):
        servers = raw.get(key)
        if isinstance(servers, dict):
            names += [n for n, entry in servers.items() if isinstance(n, str) and not _itself(key, n, entry)]
    return list(dict.fromkeys([*names, *_added(path, raw.get("state"))]))


def _itself(key: str, name: str, entry: Any) -> bool:
    """A client file's own entry for OneTool, which a config read from it leaves out."""
    from onetool.config.clients import MCP_SERVERS, is_onetool

    return key == MCP_SERVERS and isinstance(entry, dict) and is_onetool(name, entry)


def _read(path: Path) -> dict[str, Any]:
    """The file's top-level mapping, YAML or JSON as the config loader reads it; empty when it is not one."""
    import json

    import yaml

    try:
        text = path.read_text(encoding="utf-8")
        # The C loader where PyYAML has it: a completion runs at every TAB.
        loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
        raw = json.loads(text) if path.suffix.lower() == ".json" else yaml.load(text, Loader=loader)
    except (OSError, ValueError, yaml.YAMLError):
        return {}
    return raw if isinstance(raw, dict) else {}


def _added(config: Path, state: Any) -> list[str]:
    """The servers added at run time, from the config's own SQLite store (read only; a PostgreSQL one is not asked)."""
    import sqlite3

    from onetool.state.paths import project_database

    state = state if isinstance(state, dict) else {}
    folder = state.get("dir")
    if state.get("url") or (folder is not None and (not isinstance(folder, str) or "${" in folder)):
        return []
    database = project_database(config, config.resolve().parent / folder if folder else None)
    if not database.is_file():
        return []
    try:
        with closing(sqlite3.connect(f"{database.as_uri()}?mode=ro", uri=True, timeout=0.5)) as db:
            return [str(row[0]) for row in db.execute("SELECT name FROM servers ORDER BY name")]
    except sqlite3.Error:
        return []


@dataclass(frozen=True)
class _Command:
    path: tuple[str, ...]
    """The words that name it: ("servers", "add")."""
    help: str
    options: dict[str, list[str]]
    """Each option string, with its choices (empty when it has none)."""
    valued: frozenset[str]
    """The options that take a value."""
    arguments: tuple[str, ...]
    """The choices of its positional arguments (``completion``'s shells)."""
    subcommands: tuple[str, ...]
    servers: bool = False
    """Its first positional argument names a server (:class:`ServerName`)."""


def _commands(parser: argparse.ArgumentParser, path: tuple[str, ...] = (), help_text: str = "") -> Iterator[_Command]:
    options: dict[str, list[str]] = {}
    valued: set[str] = set()
    arguments: list[str] = []
    children: list[tuple[str, argparse.ArgumentParser, str]] = []
    servers = False
    for action in parser._actions:  # argparse's only way to read a parser back
        if isinstance(action, ServerName):
            servers = True
        elif isinstance(action, argparse._SubParsersAction):
            helps = {choice.dest: choice.help or "" for choice in action._choices_actions}
            children += [(name, sub, helps.get(name, "")) for name, sub in action.choices.items()]
        elif action.option_strings and action.help != argparse.SUPPRESS:
            for option in action.option_strings:
                options[option] = [str(choice) for choice in action.choices or ()]
            if action.nargs != 0:
                valued.update(action.option_strings)
        elif not action.option_strings and action.choices:
            arguments += [str(choice) for choice in action.choices]
    subcommands = tuple(name for name, _, _ in children)
    yield _Command(path, help_text, options, frozenset(valued), tuple(arguments), subcommands, servers)
    for name, sub, sub_help in children:
        yield from _commands(sub, (*path, name), sub_help)


def completion_script(shell: str, parser: argparse.ArgumentParser) -> str:
    commands = list(_commands(parser))
    return _fish(commands) if shell == "fish" else _bash(commands) if shell == "bash" else _zsh(commands)


# bash and zsh run the same function, with their own ways to read the words and to offer candidates. It finds the
# command so far (the words before the cursor that name commands, not options nor their values), the --config given
# and how many arguments came after the command; then offers a path after an option that takes one, an option's
# choices, the configured servers where an argument names one (and none was given yet), or the command's actions and
# options.
_FUNCTION = """_onetool_servers() {{
    local exe=${{1/#\\~/$HOME}} config=${{2/#\\~/$HOME}}
    local -a asked=(completion {servers_flag})
    [[ -n $config ]] && asked+=(--config "$config")
    "$exe" "${{asked[@]}}" 2>/dev/null
}}
_onetool() {{
    {setup}
    local cmd="" word i config="" given=0 option=""
    local known=" {known} " valued=" {valued} "
    # bash splits `--config=FILE` into three words at the '=' (COMP_WORDBREAKS): the value is the word after it.
    [[ $cur == = ]] && cur=""
    [[ $prev == = ]] && prev=${{{words}[{current}-2]}}
    for ((i = {first}; i < {current}; i++)); do
        word=${{{words}[i]}}
        if [[ -n $option ]]; then
            [[ $word == = ]] && continue
            [[ $option == --config ]] && config=$word
            option=""
            continue
        fi
        if [[ "$valued" == *" $word "* ]]; then
            option=$word
        elif [[ "$known" == *" $word "* ]]; then
            cmd="${{cmd:+$cmd }}$word"
            given=0
        elif [[ $word == --config=* ]]; then
            config=${{word#--config=}}
        elif [[ $word != -* ]]; then
            given=$((given + 1))
        fi
    done
    case "$prev" in
        {paths}) {offer_paths}; return;;
    esac
    case "$cmd" in
{cases}
    esac
}}
"""


def _function(commands: list[_Command], offer: Callable[[str], str], offer_servers: str, **syntax: str) -> str:
    cases = []
    for command in commands:
        choices = "".join(
            f"            {option}) {offer(' '.join(values))}; return;;\n"
            for option, values in command.options.items()
            if values
        )
        values = f'            case "$prev" in\n{choices}            esac\n' if choices else ""
        if command.servers:
            values += f"            if [[ $cur != -* ]] && ((given == 0)); then {offer_servers}; return; fi\n"
        words = " ".join([*command.subcommands, *command.arguments, *command.options])
        cases.append(f"        {shlex.quote(' '.join(command.path))})\n{values}            {offer(words)};;")
    return _FUNCTION.format(
        known=" ".join(sorted({word for c in commands for word in c.subcommands})),
        valued=" ".join(sorted({option for c in commands for option in c.valued})),
        paths="|".join(sorted(_PATH_OPTIONS)),
        cases="\n".join(cases),
        servers_flag=SERVERS_FLAG,
        **syntax,
    )


def _bash(commands: list[_Command]) -> str:
    function = _function(
        commands,
        lambda words: f'COMPREPLY=($(compgen -W {shlex.quote(words)} -- "$cur"))',
        'COMPREPLY=($(compgen -W "$(_onetool_servers "${COMP_WORDS[0]}" "$config")" -- "$cur"))',
        setup="local cur=${COMP_WORDS[COMP_CWORD]} prev=${COMP_WORDS[COMP_CWORD-1]}",
        first="1",
        current="COMP_CWORD",
        words="COMP_WORDS",
        offer_paths='COMPREPLY=($(compgen -f -- "$cur"))',
    )
    return f'# onetool completion for bash: eval "$(onetool completion bash)" in ~/.bashrc\n{function}' + (
        "complete -F _onetool onetool\n"
    )


def _zsh(commands: list[_Command]) -> str:
    function = _function(
        commands,
        lambda words: f"compadd -- {words}",
        'compadd -- ${(f)"$(_onetool_servers "${words[1]}" "$config")"}',
        setup="local cur=${words[CURRENT]} prev=${words[CURRENT-1]}",
        first="2",
        current="CURRENT",
        words="words",
        offer_paths="_files",
    )
    return (
        '# onetool completion for zsh: eval "$(onetool completion zsh)" in ~/.zshrc, after compinit\n'
        f"{function}(( $+functions[compdef] )) || {{ autoload -Uz compinit && compinit }}\ncompdef _onetool onetool\n"
    )


_FISH_SERVERS = """function __onetool_servers --description 'the servers of the config the command line names'
    set -l tokens (commandline -opc)
    set -l asked completion {servers_flag}
    set -l at (contains -i -- --config $tokens)
    and test (count $tokens) -gt $at
    and set -a asked --config (string replace -r '^~' $HOME -- $tokens[(math $at + 1)])
    set -l given (string replace -r -f '^--config=' '' -- $tokens)
    and set -a asked --config (string replace -r '^~' $HOME -- $given[1])
    set -l exe (string replace -r '^~' $HOME -- $tokens[1])
    $exe $asked 2>/dev/null
end"""


def _fish(commands: list[_Command]) -> str:
    lines = [
        "# onetool completion for fish: onetool completion fish > ~/.config/fish/completions/onetool.fish",
        "complete -c onetool -f",
        _FISH_SERVERS.format(servers_flag=SERVERS_FLAG),
    ]
    for command in commands:
        # This command's words were given, and none of its own subcommands yet.
        given = [f"__fish_seen_subcommand_from {shlex.quote(word)}" for word in command.path]
        given = given or ["__fish_use_subcommand"]
        if command.path and command.subcommands:
            given.append(f"not __fish_seen_subcommand_from {' '.join(map(shlex.quote, command.subcommands))}")
        condition = shlex.quote("; and ".join(given))
        for sub in command.subcommands:
            about = next((c.help for c in commands if c.path == (*command.path, sub)), "")
            lines.append(f"complete -c onetool -n {condition} -a {shlex.quote(sub)} -d {shlex.quote(about)}")
        if command.arguments:
            lines.append(f"complete -c onetool -n {condition} -a {shlex.quote(' '.join(command.arguments))}")
        if command.servers:
            lines.append(f"complete -c onetool -n {condition} -a '(__onetool_servers)'")
        for option, values in command.options.items():
            flag = f"-l {shlex.quote(option[2:])}" if option.startswith("--") else f"-s {shlex.quote(option[1:])}"
            if option in _PATH_OPTIONS:
                flag += " -r -F"
            elif values:
                flag += f" -x -a {shlex.quote(' '.join(values))}"
            lines.append(f"complete -c onetool -n {condition} {flag}")
    return "\n".join(lines) + "\n"
