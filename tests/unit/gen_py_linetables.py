"""Writes a C header of line-table fixtures for tests/unit/test_pycode.c: every code object of
tests/workloads/pyalloc.py as this interpreter compiles it (its co_lnotab before 3.10, its
co_linetable from 3.10), its co_firstlineno and, per 2-byte instruction, the line CPython itself
gives (3.10+: co_lines(); 3.9: dis.findlinestarts()); -1: none.

    pythonX.Y tests/unit/gen_py_linetables.py PREFIX > tests/unit/pyXY_linetables.h
"""
import dis
import sys
import types

SCRIPT = "tests/workloads/pyalloc.py"


def codes(code):
    yield code
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            yield from codes(const)


def lines_of(code):
    n = len(code.co_code) // 2
    if hasattr(code, "co_lines"):
        lines = [-1] * n
        for start, end, line in code.co_lines():
            for k in range(start // 2, min(end // 2, n)):
                lines[k] = -1 if line is None else line
        return lines
    starts = sorted(dis.findlinestarts(code))
    lines, at, line = [], 0, code.co_firstlineno
    for k in range(n):
        while at < len(starts) and starts[at][0] <= 2 * k:
            line = starts[at][1]
            at += 1
        lines.append(line)
    return lines


def main():
    prefix = sys.argv[1]
    table_of = (lambda c: c.co_linetable) if sys.version_info >= (3, 10) else \
        (lambda c: c.co_lnotab)
    top = compile(open(SCRIPT).read(), SCRIPT, "exec")
    version = "%d.%d" % sys.version_info[:2]
    print("/* Generated with CPython %s by tests/unit/gen_py_linetables.py from %s. */"
          % (version, SCRIPT))
    rows = []
    for i, code in enumerate(codes(top)):
        table = ", ".join(str(b) for b in table_of(code)) or "0"
        lines = ", ".join(str(x) for x in lines_of(code))
        print("static const unsigned char %s_table_%d[] = { %s };" % (prefix, i, table))
        print("static const int %s_lines_%d[] = { %s };" % (prefix, i, lines))
        rows.append('\t{ "%s", %d, %s_table_%d, %d, %s_lines_%d, %d },'
                    % (code.co_name, code.co_firstlineno, prefix, i, len(table_of(code)),
                       prefix, i, len(code.co_code) // 2))
    print("static const struct py_fixture %s_fixtures[] = {" % prefix)
    print("\n".join(rows))
    print("};")


if __name__ == "__main__":
    main()
