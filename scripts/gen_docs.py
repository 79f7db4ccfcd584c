#!/usr/bin/env python3
"""Makes the option reference from the one option table (userspace/cmd/options.c), through
the help the binary prints: docs/options.md whole, and the SYNOPSIS and OPTIONS sections of
docs/gpumem.8 (between its `.\\" generated` markers). Nothing about an option is written by
hand twice.

  scripts/gen_docs.py [--check] [GPUMEM]     (default build/gpumem)

--check writes nothing and fails (exit 1) where a file differs from what it would write:
make docs-check, in make test."""
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MAN = ROOT / "docs" / "gpumem.8"
OPTIONS_MD = ROOT / "docs" / "options.md"
OPTION = re.compile(r"^  (?:-(\w), )?--([\w-]+)(?: (\S+))?(?:\s{2,}(.*))?$")
COMMAND = re.compile(r"^  (\w+)\s{2,}(.*)$")


def help_of(gpumem, *args):
    done = subprocess.run([gpumem, *args, "--help"], capture_output=True, text=True)
    if done.returncode != 0:
        sys.exit(f"gen_docs: {gpumem} {' '.join(args)} --help failed: {done.stderr}")
    return done.stdout


def parse(text):
    """The usage line, the description, and the option groups: [(title, [option])], an
    option being {letter, name, arg, help}; and the commands of the general help."""
    lines = text.splitlines()
    usage = lines[0].removeprefix("usage: ")
    desc, groups, commands, i = [], [], [], 2
    while i < len(lines) and not lines[i].endswith(":"):
        desc.append(lines[i])
        i += 1
    current = None
    for line in lines[i:]:
        if not line.strip():
            continue
        if not line.startswith(" "):
            if line.endswith(":"):
                current = (line[:-1], [])
                groups.append(current)
            continue
        if line.startswith(" " * 22) and current and current[1]:
            current[1][-1]["help"] = (current[1][-1]["help"] + " " + line.strip()).strip()
        elif current and current[0] == "commands" and (m := COMMAND.match(line)):
            commands.append({"name": m.group(1), "help": m.group(2).strip()})
        elif current and (m := OPTION.match(line)):
            current[1].append({"letter": m.group(1), "name": m.group(2), "arg": m.group(3),
                               "help": (m.group(4) or "").strip()})
        elif current and current[0] == "commands" and commands:
            commands[-1]["help"] += " " + line.strip()
    for g in groups:
        if g[0] == "commands":
            g[1].extend(commands)
    return usage, " ".join(l.strip() for l in desc if l.strip()), groups


def spell(o):
    s = f"--{o['name']}" + (f" {o['arg']}" if o["arg"] else "")
    return (f"-{o['letter']}" + (f" {o['arg']}" if o["arg"] else "") + ", " if o["letter"]
            else "") + s


def gather(gpumem):
    general = parse(help_of(gpumem))
    commands = [c["name"] for g in general[2] if g[0] == "commands" for c in g[1]]
    shared = {o["name"]: o["help"] for g in general[2] if g[0] != "commands" for o in g[1]}
    per = []
    for c in commands:
        usage, desc, groups = parse(help_of(gpumem, c))
        opts = [o for g in groups for o in g[1]]
        # What this command takes beyond the shared options, or means otherwise by one.
        own = [o for o in opts if o["name"] not in shared or shared[o["name"]] != o["help"]]
        per.append({"name": c, "usage": usage, "desc": desc, "own": own})
    return general, per


# ---- docs/options.md -------------------------------------------------------------------------

def markdown(general, per):
    out = ["# Options", "",
           "Made by `scripts/gen_docs.py` from the option table the binary's help prints "
           "(`gpumem --help`, `gpumem COMMAND --help`); `make docs-check` fails when it is "
           "out of date. Do not edit by hand.", ""]
    for title, opts in general[2]:
        if title == "commands":
            out += ["## Commands", "", "| command | what it does |", "|---|---|"]
            out += [f"| `{o['name']}` | {o['help']} |" for o in opts]
            out.append("")
            continue
        out += [f"## {title[0].upper()}{title[1:]}", ""]
        out += [f"- `{spell(o)}`: {o['help']}" for o in opts]
        out.append("")
    for c in per:
        out += [f"## gpumem {c['name']}", "", f"    gpumem {c['usage'].removeprefix('gpumem ')}",
                "", c["desc"], ""]
        if c["own"]:
            out += ["Its own options, or what a shared one means to it:", ""]
            out += [f"- `{spell(o)}`: {o['help']}" for o in c["own"]]
            out.append("")
    return "\n".join(out)


# ---- docs/gpumem.8 ---------------------------------------------------------------------------

def roff(text):
    text = text.replace("\\", "\\e").replace("-", "\\-")
    # A line may not begin with a dot or an apostrophe.
    return re.sub(r"(?m)^([.'])", r"\\&\1", text)


def sentences(text):
    """One sentence a line, as mdoc wants."""
    return "\n".join(roff(s) for s in re.split(r"(?<=[.;:]) (?=[A-Za-z(])", text))


def it_line(o):
    arg = " Ar " + roff(o["arg"]) if o["arg"] else ""
    long = "Fl \\-" + o["name"].replace("-", "\\-") + arg
    return ".It " + ("Fl " + o["letter"] + arg + " , " if o["letter"] else "") + long


def man_options(general, per):
    out = []
    for title, opts in general[2]:
        if title == "commands":
            continue
        out += [f".Ss {roff(title[0].upper() + title[1:])}", ".Bl -tag -width Ds"]
        for o in opts:
            out += [it_line(o), sentences(o["help"])]
        out.append(".El")
    for c in per:
        if not c["own"]:
            continue
        out += [f".Ss Options of Cm {c['name']}", ".Bl -tag -width Ds"]
        for o in c["own"]:
            out += [it_line(o), sentences(o["help"])]
        out.append(".El")
    return "\n".join(out)


def man_synopsis(per):
    out = []
    for c in per:
        tail = c["usage"].split(" ", 2)[2] if c["usage"].count(" ") >= 2 else ""
        words = []
        for w in re.findall(r"\[[^\[\]]*(?:\[[^\[\]]*\][^\[\]]*)*\]|\S+", tail):
            words.append(f".Op {roff(w[1:-1])}" if w.startswith("[") else f".Ar {roff(w)}")
        out += [".Nm", f".Cm {c['name']}", *words]
    return "\n".join(out)


def replace_between(text, name, body):
    start, end = f'.\\" generated {name} {{', f'.\\" }} generated {name}'
    if start not in text or end not in text:
        sys.exit(f"gen_docs: {MAN} has no {start!r} ... {end!r} markers")
    head, rest = text.split(start, 1)
    _, tail = rest.split(end, 1)
    return f"{head}{start}\n{body}\n{end}{tail}"


def main():
    args = sys.argv[1:]
    check = "--check" in args
    paths = [a for a in args if a != "--check"]
    gpumem = paths[0] if paths else str(ROOT / "build" / "gpumem")
    general, per = gather(gpumem)
    want = {OPTIONS_MD: markdown(general, per) + "\n"}
    man = MAN.read_text()
    man = replace_between(man, "synopsis", man_synopsis(per))
    want[MAN] = replace_between(man, "options", man_options(general, per))
    stale = [p for p, text in want.items() if not p.exists() or p.read_text() != text]
    if check:
        for p in stale:
            print(f"docs-check: FAIL: {p.relative_to(ROOT)} is not what the option table "
                  f"makes: run scripts/gen_docs.py and commit it")
        if not stale:
            print("docs-check: docs/options.md and docs/gpumem.8 are made from the option table")
        return 1 if stale else 0
    for p in stale:
        p.write_text(want[p])
        print(f"gen_docs: wrote {p.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
