#!/usr/bin/env python3
"""Keeps the examples in README.md and docs/ true: every fenced block that begins

    ```console
    $ gpumem ...

is run (as root, against the mock CUDA libraries of build/tests/lib, no GPU) and its output set
beside the block's. They must have the same shape: the same lines, with every number, size,
rate, age, time and address free to differ, but not the words, columns, verdicts, function
names or the file:line of a call site. A block line "..." stands for any number of lines.

  tests/docs_check.py [--update] [FILE.md...]    (default: README.md docs/*.md)

--update writes each block's fresh output into the file instead (then read the diff)."""
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
GPUMEM = ROOT / "build" / "gpumem"
PYTHON = "/usr/bin/python3"
TIMEOUT = 120

BLOCK = re.compile(r"^```console\n\$ (gpumem [^\n]*)\n(.*?)^```$", re.S | re.M)
# A call site's file:line is part of the shape; every other number is not.
FILE_LINE = re.compile(r"\b([\w.-]+\.(?:py|c|cc|cu|cpp|h)):(\d+)")
NUMBER = re.compile(r"(?<![\w])[+-]?(?:0x[0-9a-f]+|\d+(?:[.,]\d+)*)(?:\s?(?:[KMGT]iB|B|ms|us|ns|"
                    r"s|m|h|d|%))?(?:/s)?", re.I)
CLOCK = re.compile(r"\b\d\d:\d\d:\d\d(?:\.\d+)?\b")


def normalize(line):
    keep = {}

    def hold(m):   # a placeholder with no digit in it, for NUMBER to leave alone
        key = chr(0xE000 + len(keep))
        keep[key] = m.group(0)
        return key
    line = FILE_LINE.sub(hold, line)
    line = CLOCK.sub("T", line)
    line = NUMBER.sub("N", line)
    for k, v in keep.items():
        line = line.replace(k, v)
    return " ".join(line.split())


def run(command):
    argv = shlex.split(command)
    argv[0] = str(GPUMEM)
    argv = [PYTHON if a == "python3" else a for a in argv]
    env = dict(os.environ, GPUMEM_DEMO_LIB=str(ROOT / "build" / "tests" / "lib"))
    done = subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=TIMEOUT)
    return done.stdout


def matches(doc, got):
    """Whether the normalized doc lines match got's, "..." matching any run of lines; rows
    whose order is a tie (two sites that hold the same) may come in either order."""
    if "..." not in doc and sorted(doc) == sorted(got):
        return True
    def walk(i, j):
        while i < len(doc):
            if doc[i] == "...":
                rest = doc[i + 1:]
                return any(walk(i + 1, k) or (rest and "..." not in rest and
                                              sorted(rest) == sorted(got[k:]))
                           for k in range(j, len(got) + 1))
            if j >= len(got) or doc[i] != got[j]:
                return False
            i, j = i + 1, j + 1
        return j == len(got)
    return walk(0, 0)


def check_file(path, update):
    text = path.read_text()
    failures = []
    out = []
    last = 0
    for m in BLOCK.finditer(text):
        command, body = m.group(1), m.group(2)
        got = run(command)
        if update:
            out.append(text[last:m.start(2)] + got.strip("\n") + "\n")
            last = m.end(2)
            continue
        doc = [normalize(l) if l.strip() != "..." else "..." for l in body.strip("\n").splitlines()]
        have = [normalize(l) for l in got.strip("\n").splitlines()]
        if not matches(doc, have):
            failures.append((command, body, got))
    if update and out:
        path.write_text("".join(out) + text[last:])
    return failures


def main():
    args = sys.argv[1:]
    update = "--update" in args
    files = [Path(a).resolve() for a in args if a != "--update"] or \
        [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    if os.geteuid() != 0:
        print("docs-check: skipped: not root (the examples load BPF programs)")
        return 0
    if not GPUMEM.exists():
        print(f"docs-check: FAIL: {GPUMEM} is not built")
        return 1
    failures = blocks = 0
    for f in files:
        n = len(BLOCK.findall(f.read_text()))
        blocks += n
        for command, body, got in check_file(f, update):
            failures += 1
            print(f"docs-check: FAIL: {f.relative_to(ROOT)}: `{command}` no longer prints what "
                  f"the page shows.\n--- the page:\n{body}--- gpumem now:\n{got}")
    verb = "updated" if update else "match what gpumem prints"
    print(f"docs-check: {blocks - failures} of {blocks} examples {verb}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
