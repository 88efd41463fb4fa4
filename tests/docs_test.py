#!/usr/bin/env python3
"""The documentation cannot drift from the programs.

1. Every command line in a ```sh block of README.md and docs/*.md that runs `parity`,
   `parity-agent` or `parityd` names a real command and only flags that command's --help lists.
2. Every ```text block of docs/cli.md that starts with a `$ parity... --help` line holds exactly
   what that command prints.
3. Nothing in the product speaks of sessions or issue numbers (history lives in git).

usage: docs_test.py SOURCE_DIR BUILD_DIR [--fix]
  --fix rewrites docs/cli.md's help blocks from the programs' output instead of checking them.
"""
import os
import re
import shlex
import subprocess
import sys

SRC, BUILD = sys.argv[1], sys.argv[2]
FIX = "--fix" in sys.argv[3:]
PROGRAMS = {
    "parity": os.path.join(BUILD, "client", "parity"),
    "parity-agent": os.path.join(BUILD, "client", "parity-agent"),
    "parityd": os.path.join(BUILD, "server", "parityd"),
}

failures = []
checked = 0
_help_cache = {}


def help_text(argv):
    key = tuple(argv)
    if key not in _help_cache:
        p = subprocess.run([PROGRAMS[argv[0]]] + argv[1:], capture_output=True, text=True,
                           env=dict(os.environ, NO_COLOR="1", COLUMNS="100"))
        _help_cache[key] = p.stdout + p.stderr
    return _help_cache[key]


def commands_of(program):
    """The sub-commands a program's --help lists: indented words under 'commands:', and the
    word after the program's name on its usage lines."""
    text = help_text([program, "--help"])
    cmds = set(re.findall(r"^(?:usage:)?\s+" + re.escape(program) + r" ([a-z][a-z-]*)", text, re.M))
    inside = False
    for line in text.splitlines():
        if line.strip().lower().startswith("commands:"):
            inside = True
            continue
        if inside:
            if not line.startswith("  "):
                if line.strip():
                    inside = False
                continue
            m = re.match(r"\s+([a-z][a-z-]*)", line)
            if m:
                cmds.add(m.group(1))
    return cmds


def flags_in(text):
    return set(re.findall(r"(?<![\w-])(--[a-zA-Z][a-zA-Z0-9_-]*)", text))


def code_blocks(path, lang):
    text = open(path, encoding="utf-8").read()
    for m in re.finditer(r"^```" + lang + r"\n(.*?)^```", text, re.S | re.M):
        yield text[: m.start()].count("\n") + 2, m.group(1)


def logical_lines(block, first_line):
    buf, start = "", first_line
    for i, line in enumerate(block.splitlines()):
        if not buf:
            start = first_line + i
        if line.rstrip().endswith("\\"):
            buf += line.rstrip()[:-1] + " "
            continue
        yield start, buf + line
        buf = ""


def split_commands(line):
    """The shell words of every simple command on a line (split at ;, &&, ||, |, $( and ))."""
    try:
        lex = shlex.shlex(line, posix=True, punctuation_chars=";&|()<>")
        lex.whitespace_split = True
        lex.commenters = "#"
        words = list(lex)
    except ValueError:
        return []
    out, cur = [], []
    for w in words:
        if w and set(w) <= set(";&|()<>"):
            out.append(cur)
            cur = []
        else:
            cur.append(w)
    out.append(cur)
    return out


def check_command(where, words):
    global checked
    # Leading environment assignments and a leading path (build/client/parity).
    while words and re.match(r"^[A-Z_][A-Z0-9_]*=", words[0]):
        words = words[1:]
    if not words:
        return
    prog = os.path.basename(words[0])
    if prog not in PROGRAMS:
        return
    if not os.access(PROGRAMS[prog], os.X_OK):
        failures.append(f"{where}: {PROGRAMS[prog]} is not built")
        return
    args = words[1:]
    checked += 1
    sub = None
    if prog != "parityd":
        subs = commands_of(prog)
        if args and not args[0].startswith("-"):
            sub = args[0]
            if sub not in subs:
                failures.append(f"{where}: '{prog} {sub}' is not a command ({sorted(subs)})")
                return
            args = args[1:]
            if prog == "parity" and sub == "token" and args and not args[0].startswith("-"):
                sub = f"token {args[0]}"
                args = args[1:]
    if sub:
        argv = [prog] + sub.split() + ["--help"]
    else:
        argv = [prog, "--help"]
    known = flags_in(help_text(argv)) | {"--help", "--version"}
    for a in args:
        if not a.startswith("--"):
            continue
        flag = a.split("=", 1)[0]
        if flag not in known:
            failures.append(f"{where}: {prog}{' ' + sub if sub else ''} has no flag {flag}")


def check_command_lines(path):
    for first, block in code_blocks(path, "sh"):
        for lineno, line in logical_lines(block, first):
            for words in split_commands(line):
                check_command(f"{os.path.relpath(path, SRC)}:{lineno}", words)


def fix_help_blocks(path):
    text = open(path, encoding="utf-8").read()

    def refresh(m):
        lines = m.group(1).splitlines()
        if not lines or not lines[0].startswith("$ "):
            return m.group(0)
        argv = shlex.split(lines[0][2:])
        if os.path.basename(argv[0]) not in PROGRAMS:
            return m.group(0)
        out = help_text([os.path.basename(argv[0])] + argv[1:]).rstrip("\n")
        return "```text\n" + lines[0] + "\n" + out + "\n```"

    open(path, "w", encoding="utf-8").write(
        re.sub(r"^```text\n(.*?)^```", refresh, text, flags=re.S | re.M))


def check_help_blocks(path):
    global checked
    if FIX:
        fix_help_blocks(path)
    for first, block in code_blocks(path, "text"):
        lines = block.splitlines()
        if not lines or not lines[0].startswith("$ "):
            continue
        argv = shlex.split(lines[0][2:])
        if os.path.basename(argv[0]) not in PROGRAMS:
            continue
        checked += 1
        want = help_text([os.path.basename(argv[0])] + argv[1:]).rstrip("\n").splitlines()
        got = lines[1:]
        if got != want:
            diff = next((i for i, (a, b) in enumerate(zip(got, want)) if a != b),
                        min(len(got), len(want)))
            failures.append(
                f"{os.path.relpath(path, SRC)}:{first + 1 + diff}: the block for '{lines[0][2:]}' "
                f"differs from the program's output at its line {diff + 1}: "
                f"{got[diff] if diff < len(got) else '<end>'!r} vs "
                f"{want[diff] if diff < len(want) else '<end>'!r}")


def check_no_history():
    out = subprocess.run(["git", "-C", SRC, "ls-files"], capture_output=True, text=True)
    files = out.stdout.split() if out.returncode == 0 else []
    pattern = re.compile(r"session [0-9]|issue #?[0-9]", re.I)
    for f in files:
        if f.startswith("tests/conformance/") or f.startswith("tests/data/") or "corpus" in f:
            continue
        if f == "tests/docs_test.py":
            continue
        try:
            text = open(os.path.join(SRC, f), encoding="utf-8").read()
        except (UnicodeDecodeError, FileNotFoundError, IsADirectoryError):
            continue
        for i, line in enumerate(text.splitlines(), 1):
            if pattern.search(line):
                failures.append(f"{f}:{i}: history in the product: {line.strip()[:100]}")


docs = [os.path.join(SRC, "README.md")]
docs += sorted(os.path.join(SRC, "docs", f) for f in os.listdir(os.path.join(SRC, "docs"))
               if f.endswith(".md"))
for d in docs:
    check_command_lines(d)
check_help_blocks(os.path.join(SRC, "docs", "cli.md"))
check_no_history()
readme_lines = open(docs[0], encoding="utf-8").read().count("\n")
if readme_lines >= 250:
    failures.append(f"README.md: {readme_lines} lines (at most 249)")

for f in failures:
    print("FAIL:", f)
print(f"docs: {checked} command lines and help blocks checked")
sys.exit(1 if failures else 0)
