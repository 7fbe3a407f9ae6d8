#!/usr/bin/env python3
"""Turn a Python source file (or another text file, as its text only) into a C header holding its source and its compiled, marshalled
code object, so the runner carries its cell logic inside its own binary (nothing for user code
to swap on disk) and does not compile it at every start. Run with the same Python the runner
embeds; the runner checks the version and falls back to the source if they differ."""
import marshal
import sys


def c_bytes(name: str, data: bytes) -> list[str]:
    lines = [f"static const unsigned char {name}[] = {{"]
    for i in range(0, len(data), 16):
        lines.append("        " + ", ".join(f"0x{b:02x}" for b in data[i:i + 16]) + ",")
    lines.append("};")
    return lines


def main() -> None:
    src, out, name = sys.argv[1], sys.argv[2], sys.argv[3]
    with open(src, "rb") as f:
        data = f.read()
    if not src.endswith(".py"):
        # Another language's source (the JavaScript REPL): carried as text only.
        lines = [f"/* generated from {src.rsplit('/', 1)[-1]} by embed.py: do not edit */"]
        lines += c_bytes(name, data + b"\0")
        with open(out, "w") as f:
            f.write("\n".join(lines) + "\n")
        return
    code = compile(data, "airlock_cell.py", "exec", dont_inherit=True, optimize=0)
    lines = [f"/* generated from {src.rsplit('/', 1)[-1]} by embed.py: do not edit */"]
    lines += c_bytes(name, data + b"\0")
    lines += c_bytes(name + "_marshal", marshal.dumps(code))
    lines.append(f"#define {name.upper()}_PY_VERSION 0x{sys.hexversion & 0xffff0000:08x}")
    with open(out, "w") as f:
        f.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
