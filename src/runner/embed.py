#!/usr/bin/env python3
"""Turn source files into a C header the runner carries, so that user code has nothing on disk to
swap and the runner compiles nothing at start:

    embed.py FILE OUT NAME                  another language's source (the JavaScript REPL), as
                                            text only: NAME[], NUL-terminated
    embed.py --package PKG OUT NAME F.py... a Python package: NAME[] lists each module (name,
                                            file name, source, compiled and marshalled code) in
                                            the order given, which is the order the runner
                                            executes them in; __init__.py goes last

Run with the same Python the runner embeds; the runner checks the version and compiles the
source instead if they differ."""
import marshal
import os
import sys


def c_bytes(name: str, data: bytes) -> list[str]:
    lines = [f"static const unsigned char {name}[] = {{"]
    for i in range(0, len(data), 16):
        lines.append("        " + ", ".join(f"0x{b:02x}" for b in data[i:i + 16]) + ",")
    lines.append("};")
    return lines


def text(src: str, out: str, name: str) -> None:
    with open(src, "rb") as f:
        data = f.read()
    lines = [f"/* generated from {os.path.basename(src)} by embed.py: do not edit */"]
    lines += c_bytes(name, data + b"\0")
    with open(out, "w") as f:
        f.write("\n".join(lines) + "\n")


def package(pkg: str, out: str, name: str, sources: list[str]) -> None:
    lines = [f"/* generated from the package {pkg} by embed.py: do not edit */",
             "#include <stddef.h>"]
    entries = []
    for i, src in enumerate(sources):
        with open(src, "rb") as f:
            data = f.read()
        base = os.path.basename(src)
        module = base[:-3]
        filename = f"{pkg}/{base}"
        code = compile(data, filename, "exec", dont_inherit=True, optimize=0)
        lines += c_bytes(f"{name}_{i}_source", data + b"\0")
        lines += c_bytes(f"{name}_{i}_marshal", marshal.dumps(code))
        qualified = pkg if module == "__init__" else f"{pkg}.{module}"
        entries.append(f'        {{ "{qualified}", "{filename}", {name}_{i}_source, '
                       f"{name}_{i}_marshal, sizeof({name}_{i}_marshal) }},")
    if not sources or os.path.basename(sources[-1]) != "__init__.py":
        sys.exit("embed.py: a package's __init__.py goes last")
    lines.append(f"static const struct embedded_module {name}[] = {{")
    lines += entries
    lines.append("};")
    lines.append(f"#define {name.upper()}_PY_VERSION 0x{sys.hexversion & 0xffff0000:08x}")
    with open(out, "w") as f:
        f.write("\n".join(lines) + "\n")


def main() -> None:
    if sys.argv[1] == "--package":
        package(sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5:])
    else:
        text(sys.argv[1], sys.argv[2], sys.argv[3])


if __name__ == "__main__":
    main()
