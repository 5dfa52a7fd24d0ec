"""`leasectl completion bash|zsh|fish`: shell completion scripts, generated from the argument parser itself,
so every subcommand, option and choice the parser knows is completed and none it does not."""

from __future__ import annotations

import argparse
from dataclasses import dataclass, field
from typing import Any

from .cli_context import EXIT_OK, Context
from .client import SchedulerClient

SHELLS = ("bash", "zsh", "fish")


@dataclass
class _Option:
    names: list[str]
    takes_value: bool
    choices: list[str]
    help: str


@dataclass
class _Command:
    name: str
    help: str
    options: list[_Option] = field(default_factory=list)
    positional_choices: list[str] = field(default_factory=list)


def _options(parser: argparse.ArgumentParser) -> tuple[list[_Option], list[str]]:
    options: list[_Option] = []
    positional: list[str] = []
    for action in parser._actions:  # argparse has no public walk of its actions
        if isinstance(action, argparse._SubParsersAction):
            continue
        choices = [str(choice) for choice in action.choices or ()]
        if action.option_strings:
            takes_value = action.nargs != 0
            options.append(_Option(list(action.option_strings), takes_value, choices, action.help or ""))
        else:
            positional += choices
    return options, positional


def _commands(parser: argparse.ArgumentParser) -> list[_Command]:
    subparsers = next(action for action in parser._actions if isinstance(action, argparse._SubParsersAction))
    helps = {choice.dest: choice.help or "" for choice in subparsers._choices_actions}
    commands = []
    for name, sub in subparsers.choices.items():
        options, positional = _options(sub)
        commands.append(_Command(name, helps.get(name, ""), options, positional))
    return commands


def _shell_words(words: list[str]) -> str:
    return " ".join(words)


def bash_script(parser: argparse.ArgumentParser) -> str:
    """A bash completion function for the parser's program, registered with `complete -F`."""
    prog = parser.prog
    function = "_" + prog.replace("-", "_")
    global_options, _ = _options(parser)
    commands = _commands(parser)
    valued_globals = [name for option in global_options if option.takes_value for name in option.names]
    choices: dict[str, list[str]] = {}
    for option in [*global_options, *(option for command in commands for option in command.options)]:
        for name in option.names:
            if option.choices:
                choices[name] = option.choices
    valued_options = {
        name for command in commands for option in command.options if option.takes_value for name in option.names
    }
    valued = sorted((valued_options | set(valued_globals)) - set(choices))
    command_names = [command.name for command in commands]
    global_names = [name for option in global_options for name in option.names]
    lines = [
        f"# bash completion for {prog}: source <({prog} completion bash)",
        f"{function}() {{",
        '    local cur="${COMP_WORDS[COMP_CWORD]}" prev="${COMP_WORDS[COMP_CWORD-1]}" command="" i',
        "    for ((i = 1; i < COMP_CWORD; i++)); do",
        '        case "${COMP_WORDS[i]}" in',
        f"            {'|'.join(valued_globals) or '--'}) ((i++)) ;;",
        "            -*) ;;",
        '            *) command="${COMP_WORDS[i]}"; break ;;',
        "        esac",
        "    done",
        '    case "$prev" in',
    ]
    for name, values in sorted(choices.items()):
        lines.append(f'        {name}) COMPREPLY=($(compgen -W "{_shell_words(values)}" -- "$cur")); return ;;')
    if valued:
        lines.append(f"        {'|'.join(valued)}) COMPREPLY=(); return ;;")
    lines += [
        "    esac",
        "    local options arguments",
        '    case "$command" in',
        f'        "") options="{_shell_words(global_names)}"; arguments="{_shell_words(command_names)}" ;;',
    ]
    for command in commands:
        names = [name for option in command.options for name in option.names]
        lines.append(
            f'        {command.name}) options="{_shell_words(names)}"; '
            f'arguments="{_shell_words(command.positional_choices)}" ;;'
        )
    lines += [
        "    esac",
        '    if [[ "$cur" == -* ]]; then',
        '        COMPREPLY=($(compgen -W "$options" -- "$cur"))',
        "    else",
        '        COMPREPLY=($(compgen -W "$arguments" -- "$cur"))',
        "    fi",
        "}",
        f"complete -F {function} {prog}",
        "",
    ]
    return "\n".join(lines)


def zsh_script(parser: argparse.ArgumentParser) -> str:
    """For zsh: the bash function through zsh's bashcompinit (it understands `complete -F`)."""
    prog = parser.prog
    header = [
        f"# zsh completion for {prog}: source <({prog} completion zsh)",
        "autoload -U +X compinit && compinit",
        "autoload -U +X bashcompinit && bashcompinit",
    ]
    return "\n".join(header) + "\n" + bash_script(parser)


def _fish_quote(text: str) -> str:
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def fish_script(parser: argparse.ArgumentParser) -> str:
    """A fish completion script: subcommands, then each one's options and their choices."""
    prog = parser.prog
    commands = _commands(parser)
    names = " ".join(command.name for command in commands)
    lines = [f"# fish completion for {prog}: {prog} completion fish | source", f"complete -c {prog} -f"]
    global_options, _ = _options(parser)
    for option in global_options:
        lines.append(_fish_option(prog, "__fish_use_subcommand", option))
    for command in commands:
        lines.append(f"complete -c {prog} -n '__fish_use_subcommand' -a {command.name} -d {_fish_quote(command.help)}")
    for command in commands:
        condition = f"__fish_seen_subcommand_from {command.name}"
        for option in command.options:
            lines.append(_fish_option(prog, condition, option))
        if command.positional_choices:
            choices = " ".join(command.positional_choices)
            lines.append(f"complete -c {prog} -n '{condition}' -a {_fish_quote(choices)}")
    lines.append(f"# subcommands: {names}")
    return "\n".join(lines) + "\n"


def _fish_option(prog: str, condition: str, option: _Option) -> str:
    parts = [f"complete -c {prog} -n '{condition}'"]
    for name in option.names:
        parts.append(f"-l {name[2:]}" if name.startswith("--") else f"-s {name[1:]}")
    if option.choices:
        parts.append(f"-xa {_fish_quote(' '.join(option.choices))}")
    elif option.takes_value:
        parts.append("-r")
    if option.help and option.help != argparse.SUPPRESS:
        parts.append(f"-d {_fish_quote(option.help.split(' (')[0])}")
    return " ".join(parts)


def completion_script(parser: argparse.ArgumentParser, shell: str) -> str:
    """The completion script of `shell` for the parser's program."""
    builders = {"bash": bash_script, "zsh": zsh_script, "fish": fish_script}
    return builders[shell](parser)


def add_completion_parser(commands: Any) -> None:
    """The `completion` command's argument."""
    completion = commands.add_parser(
        "completion",
        help="print a shell completion script",
        description="Print the completion script for SHELL; load it from your shell's startup file.",
    )
    completion.add_argument("shell", choices=SHELLS, metavar="SHELL", help="bash, zsh or fish")


def cmd_completion(ctx: Context, client: SchedulerClient) -> int:
    ctx.stdout.write(completion_script(ctx.parser, ctx.args.shell))
    return EXIT_OK
