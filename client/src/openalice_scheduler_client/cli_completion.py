"""`leasectl completion bash|zsh|fish`: shell completion scripts, generated from the argument parser itself,
so every subcommand, option and choice the parser knows is completed and none it does not.

A command is a path: `list`, or a group's action, `callers add`. Each script first finds the path of the words
typed so far (skipping the global options and their values), then offers that command's options, choices and
actions."""

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
    name: str  # its path: `list`, `callers add`
    help: str
    options: list[_Option] = field(default_factory=list)
    positional_choices: list[str] = field(default_factory=list)  # a group's are its actions
    is_group: bool = False


def _subparsers(parser: argparse.ArgumentParser) -> argparse._SubParsersAction[argparse.ArgumentParser] | None:
    found = [action for action in parser._actions if isinstance(action, argparse._SubParsersAction)]
    return found[0] if found else None


def _options(parser: argparse.ArgumentParser) -> tuple[list[_Option], list[str]]:
    options: list[_Option] = []
    positional: list[str] = []
    for action in parser._actions:  # argparse has no public walk of its actions
        choices = [str(choice) for choice in action.choices or ()]
        if action.option_strings:
            takes_value = action.nargs != 0
            options.append(_Option(list(action.option_strings), takes_value, choices, action.help or ""))
        else:
            positional += choices
    return options, positional


def _commands(parser: argparse.ArgumentParser, prefix: str = "") -> list[_Command]:
    """Every command of the parser, each group followed by its actions."""
    subparsers = _subparsers(parser)
    if subparsers is None:
        return []
    helps = {choice.dest: choice.help or "" for choice in subparsers._choices_actions}
    commands = []
    for name, sub in subparsers.choices.items():
        options, positional = _options(sub)
        group = _subparsers(sub) is not None
        commands.append(_Command(prefix + name, helps.get(name, ""), options, positional, group))
        commands += _commands(sub, prefix + name + " ")
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
    command_names = [command.name for command in commands if " " not in command.name]
    groups = [command.name for command in commands if command.is_group]
    # The first word that is no option is the command; a group's takes the next such word too (`callers add`).
    found = '            *) command="${command:+$command }${COMP_WORDS[i]}"'
    found += f'; case "$command" in {"|".join(groups)}) ;; *) break ;; esac ;;' if groups else "; break ;;"
    global_names = [name for option in global_options for name in option.names]
    lines = [
        f"# bash completion for {prog}: source <({prog} completion bash)",
        f"{function}() {{",
        '    local cur="${COMP_WORDS[COMP_CWORD]}" prev="${COMP_WORDS[COMP_CWORD-1]}" command="" i',
        "    for ((i = 1; i < COMP_CWORD; i++)); do",
        '        case "${COMP_WORDS[i]}" in',
        f"            {'|'.join(valued_globals) or '--'}) ((i++)) ;;",
        "            -*) ;;",
        found,
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
            f'        "{command.name}") options="{_shell_words(names)}"; '
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
    """A fish completion script: a function telling which command is being typed (`__<prog>_is PATH`), then the
    commands, and each one's options, choices and actions under that condition."""
    prog = parser.prog
    function = f"__{prog.replace('-', '_')}_is"
    commands = _commands(parser)
    global_options, _ = _options(parser)
    valued_globals = [name for option in global_options if option.takes_value for name in option.names]
    groups = [command.name for command in commands if command.is_group]
    lines = [
        f"# fish completion for {prog}: {prog} completion fish | source",
        f"function {function} --argument-names expected --description 'is the {prog} command typed so far this one'",
        "    set -l words (commandline -opc)",
        "    set -e words[1]",
        "    set -l path",
        "    set -l skip 0",
        "    for word in $words",
        "        if test $skip = 1",
        "            set skip 0",
        "            continue",
        "        end",
        "        switch $word",
        f"            case {' '.join(valued_globals) or '--'}",
        "                set skip 1",
        "            case '-*'",
        "            case '*'",
        "                set -a path $word",
        f"                if not contains -- $path[1] {' '.join(groups) or '--'}; or test (count $path) -ge 2",
        "                    break",
        "                end",
        "        end",
        "    end",
        "    set -l typed (string join ' ' -- $path)",
        '    test "$typed" = "$expected"',
        "end",
        f"complete -c {prog} -f",
    ]
    top = f"{function} ''"
    for option in global_options:
        lines.append(_fish_option(prog, top, option))
    for command in commands:
        parent, _, name = command.name.rpartition(" ")
        condition = f"{function} {_fish_quote(parent)}"
        lines.append(f'complete -c {prog} -n "{condition}" -a {name} -d {_fish_quote(command.help)}')
    for command in commands:
        condition = f"{function} {_fish_quote(command.name)}"
        for option in command.options:
            lines.append(_fish_option(prog, condition, option))
        if command.positional_choices and not command.is_group:  # a group's actions are commands (above)
            choices = " ".join(command.positional_choices)
            lines.append(f'complete -c {prog} -n "{condition}" -a {_fish_quote(choices)}')
    lines.append(f"# commands: {', '.join(command.name for command in commands)}")
    return "\n".join(lines) + "\n"


def _fish_option(prog: str, condition: str, option: _Option) -> str:
    parts = [f'complete -c {prog} -n "{condition}"']
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
