"""`onetool completion bash|zsh|fish`: a completion script for the shell, made from the command's own parser, so
it never lists a command or option that does not exist nor misses a new one.

It completes commands, `servers` actions, each one's options, the choices of an option that has them, and file
names after an option that takes a file. Install: ``eval "$(onetool completion bash)"`` in ~/.bashrc (zsh: the same
with ``zsh`` in ~/.zshrc), or ``onetool completion fish > ~/.config/fish/completions/onetool.fish``.
"""

from __future__ import annotations

import argparse
import shlex
from collections.abc import Callable, Iterator
from dataclasses import dataclass

SHELLS = ("bash", "zsh", "fish")
# Options whose value is a file or folder: the shell completes paths there.
_PATH_OPTIONS = {"--config", "--log-file", "--output", "-o", "--state-dir", "--tls-cert", "--tls-key"}


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


def _commands(parser: argparse.ArgumentParser, path: tuple[str, ...] = (), help_text: str = "") -> Iterator[_Command]:
    options: dict[str, list[str]] = {}
    valued: set[str] = set()
    arguments: list[str] = []
    children: list[tuple[str, argparse.ArgumentParser, str]] = []
    for action in parser._actions:  # argparse's only way to read a parser back
        if isinstance(action, argparse._SubParsersAction):
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
    yield _Command(path, help_text, options, frozenset(valued), tuple(arguments), subcommands)
    for name, sub, sub_help in children:
        yield from _commands(sub, (*path, name), sub_help)


def completion_script(shell: str, parser: argparse.ArgumentParser) -> str:
    commands = list(_commands(parser))
    return _fish(commands) if shell == "fish" else _bash(commands) if shell == "bash" else _zsh(commands)


# bash and zsh run the same function, with their own ways to read the words and to offer candidates. It finds the
# command so far (the words before the cursor that name commands, not options nor their values), then offers a
# path after an option that takes one, an option's choices, or the command's actions and options.
_FUNCTION = """_onetool() {{
    {setup}
    local cmd="" word i
    local known=" {known} " valued=" {valued} "
    for ((i = {first}; i < {current}; i++)); do
        word=${{{words}[i]}}
        [[ "$valued" == *" ${{{words}[i-1]}} "* ]] && continue
        [[ "$known" == *" $word "* ]] && cmd="${{cmd:+$cmd }}$word"
    done
    case "$prev" in
        {paths}) {offer_paths}; return;;
    esac
    case "$cmd" in
{cases}
    esac
}}
"""


def _function(commands: list[_Command], offer: Callable[[str], str], **syntax: str) -> str:
    cases = []
    for command in commands:
        choices = "".join(
            f"            {option}) {offer(' '.join(values))}; return;;\n"
            for option, values in command.options.items()
            if values
        )
        values = f'            case "$prev" in\n{choices}            esac\n' if choices else ""
        words = " ".join([*command.subcommands, *command.arguments, *command.options])
        cases.append(f"        {shlex.quote(' '.join(command.path))})\n{values}            {offer(words)};;")
    return _FUNCTION.format(
        known=" ".join(sorted({word for c in commands for word in c.subcommands})),
        valued=" ".join(sorted({option for c in commands for option in c.valued})),
        paths="|".join(sorted(_PATH_OPTIONS)),
        cases="\n".join(cases),
        **syntax,
    )


def _bash(commands: list[_Command]) -> str:
    function = _function(
        commands,
        lambda words: f'COMPREPLY=($(compgen -W {shlex.quote(words)} -- "$cur"))',
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
        setup="local prev=${words[CURRENT-1]}",
        first="2",
        current="CURRENT",
        words="words",
        offer_paths="_files",
    )
    return (
        '# onetool completion for zsh: eval "$(onetool completion zsh)" in ~/.zshrc, after compinit\n'
        f"{function}(( $+functions[compdef] )) || {{ autoload -Uz compinit && compinit }}\ncompdef _onetool onetool\n"
    )


def _fish(commands: list[_Command]) -> str:
    lines = [
        "# onetool completion for fish: onetool completion fish > ~/.config/fish/completions/onetool.fish",
        "complete -c onetool -f",
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
        for option, values in command.options.items():
            flag = f"-l {shlex.quote(option[2:])}" if option.startswith("--") else f"-s {shlex.quote(option[1:])}"
            if option in _PATH_OPTIONS:
                flag += " -r -F"
            elif values:
                flag += f" -x -a {shlex.quote(' '.join(values))}"
            lines.append(f"complete -c onetool -n {condition} {flag}")
    return "\n".join(lines) + "\n"
