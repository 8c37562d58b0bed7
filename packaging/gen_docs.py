#!/usr/bin/env python3
"""The man page and shell completions of `drover`, made from its own --help
(so they list exactly the commands and flags the binary has).

Usage: gen_docs.py DROVER OUT_DIR
Writes OUT_DIR/drover.1 (roff), OUT_DIR/drover.bash (bash completion) and
OUT_DIR/_drover (zsh completion).
"""
import os
import re
import subprocess
import sys

drover, out = sys.argv[1], sys.argv[2]
ENTRY = re.compile(r"^  (\S.*?)\s{2,}(.*)$")


def help_of(*words):
    return subprocess.run([drover, *words, "--help"], capture_output=True, text=True,
                          check=True).stdout


def parse(text):
    """(description, usage, [(names, arg, text)], [(subcommand, text)])."""
    lines = text.splitlines()
    desc = lines[0] if lines else ""
    usage = next((l[len("Usage: "):] for l in lines if l.startswith("Usage: ")), "")
    options, subs, part = [], [], None
    for line in lines:
        if line in ("Options:", "Positionals:", "Subcommands:"):
            part = line
            continue
        m = ENTRY.match(line)
        if not m:
            continue
        left, text = m.group(1), m.group(2)
        if part == "Subcommands:":
            subs.append((left, text))
        elif part == "Options:":
            names, _, arg = left.partition(" ")
            options.append((names.split(","), arg.strip(), text))
    return desc, usage, options, subs


def commands():
    """[(path words, parsed help)], the root first, depth first."""
    found = []

    def walk(words):
        parsed = parse(help_of(*words))
        found.append((words, parsed))
        for sub, _ in parsed[3]:
            walk(words + [sub])

    walk([])
    return found


def roff(text):
    text = text.replace("\\", "\\\\").replace("-", "\\-")
    return ("\\&" + text) if text[:1] in (".", "'") else text


def man(all_commands):
    version = subprocess.run([drover, "--version"], capture_output=True, text=True).stdout.strip()
    root = all_commands[0][1]
    lines = [f'.TH DROVER 1 "" "drover {roff(version)}" "User Commands"', ".SH NAME",
             "drover \\- " + roff(root[0].split(": ", 1)[-1]), ".SH SYNOPSIS",
             ".B drover", "\\fICOMMAND\\fR [\\fIOPTIONS\\fR]", ".SH DESCRIPTION",
             "One binary is the server, the worker and the client. "
             "docs/guide.md (in the source) tells the whole story; each command's "
             "\\fB\\-\\-help\\fR lists its flags, as below.", ".SH COMMANDS"]
    for words, (desc, usage, options, _) in all_commands[1:]:
        lines += [".SS " + roff("drover " + " ".join(words)), roff(desc), ".PP",
                  roff("Usage: " + usage)]
        for names, arg, text in options:
            if "--help" in names:
                continue
            lines += [".TP", "\\fB" + roff(", ".join(names)) + "\\fR" +
                      (" \\fI" + roff(arg) + "\\fR" if arg else ""), roff(text)]
    lines += [".SH FILES", ".TP", "/etc/drover/drover.toml",
              "The [server] and [worker] tables of flags (\\fBdrover config check\\fR).",
              ".TP", "/var/lib/drover", "The server's state: journal, token, TLS key.",
              ".SH SEE ALSO", "\\fBsystemctl\\fR(1): drover\\-server.service, "
              "drover\\-worker.service"]
    return "\n".join(lines) + "\n"


def flags_of(options):
    return [n for names, _, _ in options for n in names if n.startswith("-")]


def bash(all_commands):
    cases = []
    for words, (_, _, options, subs) in all_commands:
        key = " ".join(words)
        words_list = " ".join([s for s, _ in subs] + flags_of(options))
        cases.append(f'    "{key}") opts="{words_list}" ;;')
    return """# bash completion for drover (made from its --help by packaging/gen_docs.py)
_drover() {
  local cur path="" w i
  cur="${COMP_WORDS[COMP_CWORD]}"
  # The command path so far: the words that name commands.
  for ((i = 1; i < COMP_CWORD; i++)); do
    w="${COMP_WORDS[i]}"
    [[ "$w" == -* ]] && continue
    case "${path:+$path }$w" in
%s
    esac
  done
  local opts=""
  case "$path" in
%s
  esac
  COMPREPLY=($(compgen -W "$opts" -- "$cur"))
}
complete -o default -F _drover drover
""" % ("\n".join(f'      "{" ".join(words)}") path="{" ".join(words)}" ;;'
                 for words, _ in all_commands[1:]), "\n".join(cases))


def zsh(all_commands):
    cases = []
    for words, (_, _, options, subs) in all_commands:
        items = [f"'{s}:{t.replace(chr(39), '')}'" for s, t in subs]
        items += [f"'{n}'" for n in flags_of(options)]
        cases.append(f'    "{" ".join(words)}") words_here=({" ".join(items)}) ;;')
    return """#compdef drover
# zsh completion for drover (made from its --help by packaging/gen_docs.py)
_drover() {
  local path="" w
  local -a words_here
  for w in ${words[2,CURRENT-1]}; do
    [[ "$w" == -* ]] && continue
    case "${path:+$path }$w" in
%s
    esac
  done
  case "$path" in
%s
  esac
  _describe 'drover' words_here
}
_drover "$@"
""" % ("\n".join(f'      "{" ".join(words)}") path="{" ".join(words)}" ;;'
                 for words, _ in all_commands[1:]), "\n".join(cases))


all_commands = commands()
os.makedirs(out, exist_ok=True)
for name, text in (("drover.1", man(all_commands)), ("drover.bash", bash(all_commands)),
                   ("_drover", zsh(all_commands))):
    with open(os.path.join(out, name), "w") as f:
        f.write(text)
