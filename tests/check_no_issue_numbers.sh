#!/usr/bin/env bash
# Docs and code comments speak to a reader of the project, who has no issue
# tracker beside them: no "issue" or "issues" followed by a number (with or
# without "#"), in any case. Checked: the whole text of every Markdown file,
# and the comments of every source file (C++ and JavaScript // and /* */,
# HTML <!-- -->, # in shell, Python, CMake, Makefile, TOML, YAML and the
# packaging's files, and Python's triple-quoted strings, its docstrings).
# String literals elsewhere are not looked at: what a program prints is its
# own business. Skipped: build*/ at the top, web/dist/, .git/, .cache/,
# node_modules/, __pycache__/ and Python virtual environments. Prints
# file:line for each mention and fails if there is one.
set -u
root=${1:?usage: check_no_issue_numbers.sh SOURCE_DIR}
exec python3 - "$root" <<'PY'
import os
import re
import sys

root = os.path.abspath(sys.argv[1])
MENTION = re.compile(r"\bissues?\s*(?:#\s*)?\d", re.IGNORECASE)

C_LIKE = {".c", ".cc", ".cpp", ".cxx", ".h", ".hh", ".hpp", ".js", ".mjs", ".cjs",
          ".ts", ".tsx", ".jsx"}
HASH = {".sh", ".bash", ".cmake", ".toml", ".yaml", ".yml", ".service", ".in", ".conf"}
HASH_NAMES = {"CMakeLists.txt", "Makefile", "Dockerfile", "Containerfile"}


def skip_dir(rel):
    name = os.path.basename(rel)
    if name in (".git", ".cache", "node_modules", "__pycache__", ".venv", "venv"):
        return True
    if os.path.exists(os.path.join(root, rel, "pyvenv.cfg")):
        return True  # a Python virtual environment: other projects' code
    if "/" not in rel and name.startswith("build"):
        return True
    return rel == "web/dist"


def kind_of(path, name):
    ext = os.path.splitext(name)[1]
    if ext in (".md", ".markdown"):
        return "md"
    if ext in (".html", ".htm"):
        return "html"
    if ext == ".css":
        return "css"
    if ext in C_LIKE:
        return "c"
    if ext == ".py":
        return "py"
    if ext in HASH or name in HASH_NAMES:
        return "hash"
    if ext == "":
        try:
            with open(path, "rb") as f:
                first = f.readline(200)
        except OSError:
            return None
        if first.startswith(b"#!"):
            return "py" if b"python" in first else "hash"
    return None


def c_comments(text, cpp, js):
    """(line, text) of each comment line of C, C++ or JavaScript source."""
    out, i, n, line = [], 0, len(text), 1
    while i < n:
        ch = text[i]
        if ch == "\n":
            line += 1
            i += 1
        elif text.startswith("//", i):
            end = text.find("\n", i)
            end = n if end < 0 else end
            out.append((line, text[i + 2:end]))
            i = end
        elif text.startswith("/*", i):
            end = text.find("*/", i + 2)
            end = n if end < 0 else end
            for k, part in enumerate(text[i + 2:end].split("\n")):
                out.append((line + k, part))
            line += text.count("\n", i, end)
            i = end + 2
        elif cpp and ch == "R" and text.startswith('"', i + 1) and (
                i == 0 or not (text[i - 1].isalnum() or text[i - 1] == "_")
                or text[i - 1] in "uUL8"):
            open_paren = text.find("(", i + 2)
            if open_paren < 0:
                i += 1
                continue
            closer = ")" + text[i + 2:open_paren] + '"'
            end = text.find(closer, open_paren)
            end = n if end < 0 else end + len(closer)
            line += text.count("\n", i, end)
            i = end
        elif ch == "'" and cpp and i > 0 and text[i - 1].isalnum():
            i += 1  # a digit separator (1'000)
        elif ch in "\"'" or (js and ch == "`"):
            j = i + 1
            while j < n and text[j] != ch:
                if text[j] == "\\":
                    j += 1
                elif text[j] == "\n":
                    if ch != "`":
                        break
                    line += 1
                j += 1
            i = j + 1 if j < n and text[j] == ch else j
        else:
            i += 1
    return out


def block_comments(text, opener, closer):
    out, i = [], 0
    while True:
        start = text.find(opener, i)
        if start < 0:
            return out
        end = text.find(closer, start + len(opener))
        end = len(text) if end < 0 else end
        line = text.count("\n", 0, start) + 1
        for k, part in enumerate(text[start + len(opener):end].split("\n")):
            out.append((line + k, part))
        i = end + len(closer)


def hash_comments(text):
    """# to the end of the line, outside quotes, at the start or after a
    blank; quotes end with their line."""
    out = []
    for number, row in enumerate(text.split("\n"), 1):
        quote, j = None, 0
        while j < len(row):
            ch = row[j]
            if quote:
                if ch == "\\" and quote == '"':
                    j += 1
                elif ch == quote:
                    quote = None
            elif ch == "\\":
                j += 1
            elif ch in "\"'":
                quote = ch
            elif ch == "#" and (j == 0 or row[j - 1] in " \t;("):
                out.append((number, row[j + 1:]))
                break
            j += 1
    return out


def python_comments(text):
    """# comments and the text of triple-quoted strings."""
    out, i, n, line = [], 0, len(text), 1
    while i < n:
        ch = text[i]
        if ch == "\n":
            line += 1
            i += 1
        elif ch == "#":
            end = text.find("\n", i)
            end = n if end < 0 else end
            out.append((line, text[i + 1:end]))
            i = end
        elif text.startswith('"""', i) or text.startswith("'''", i):
            quote = text[i:i + 3]
            end = text.find(quote, i + 3)
            end = n if end < 0 else end
            for k, part in enumerate(text[i + 3:end].split("\n")):
                out.append((line + k, part))
            line += text.count("\n", i, end)
            i = end + 3
        elif ch in "\"'":
            j = i + 1
            while j < n and text[j] not in (ch, "\n"):
                j += 2 if text[j] == "\\" else 1
            i = j + 1 if j < n and text[j] == ch else j
        else:
            i += 1
    return out


def mentions(pieces):
    """Line numbers of the mentions in comment pieces; a mention may run on
    from one comment line to the next ("issue" ending one, its number
    starting the next)."""
    found, text, starts, last = [], "", [], None
    for number, piece in pieces:
        piece = re.sub(r"^[\s/*#!-]*", "", piece)
        sep = " " if last is not None and number == last + 1 else "\x00"
        starts.append((len(text) + len(sep), number))
        text += sep + piece
        last = number
    for m in MENTION.finditer(text):
        at = m.start()
        number = next(nr for pos, nr in reversed(starts) if pos <= at)
        found.append(number)
    return sorted(set(found))


bad, checked = [], 0
for dirpath, dirnames, filenames in os.walk(root):
    rel_dir = os.path.relpath(dirpath, root)
    rel_dir = "" if rel_dir == "." else rel_dir
    dirnames[:] = sorted(d for d in dirnames
                         if not skip_dir(os.path.join(rel_dir, d) if rel_dir else d))
    for name in sorted(filenames):
        path = os.path.join(dirpath, name)
        if os.path.islink(path):
            continue
        kind = kind_of(path, name)
        if kind is None:
            continue
        try:
            with open(path, encoding="utf-8", errors="replace") as f:
                text = f.read()
        except OSError as e:
            print(f"no_issue_numbers: cannot read {path}: {e}", file=sys.stderr)
            sys.exit(1)
        checked += 1
        ext = os.path.splitext(name)[1]
        if kind == "md":
            pieces = list(enumerate(text.split("\n"), 1))
        elif kind == "html":
            pieces = block_comments(text, "<!--", "-->")
        elif kind == "css":
            pieces = block_comments(text, "/*", "*/")
        elif kind == "c":
            pieces = c_comments(text, cpp=ext not in (".js", ".mjs", ".cjs", ".ts", ".tsx", ".jsx"),
                                js=ext in (".js", ".mjs", ".cjs", ".ts", ".tsx", ".jsx"))
        elif kind == "py":
            pieces = python_comments(text)
        else:
            pieces = hash_comments(text)
        rows = text.split("\n")
        for number in mentions(pieces):
            rel = os.path.relpath(path, root)
            bad.append(f"{rel}:{number}: {rows[number - 1].strip()}")

if bad:
    print("no_issue_numbers: docs and comments speak to a reader of the project, "
          "who has no issue tracker: say what the text means instead of its issue "
          "number:", file=sys.stderr)
    for row in bad:
        print("  " + row, file=sys.stderr)
    sys.exit(1)
print(f"no_issue_numbers: {checked} files clean")
PY
