"""Row 34: flood 10 GB of stdout without newlines; ANSI/OSC escapes -> output capped at the
profile's cap (1 MiB) with status output_limit (exit 125); the CLI's memory stays flat;
escapes are neutralised in the JSON."""
import pytest

from conftest import EXIT_OUTPUT_LIMIT, run

CAP = 1 << 20


def _check_capped(res, stream):
    assert res.status == "output_limit", res.describe()
    assert res.rc == EXIT_OUTPUT_LIMIT and res.exit_code == EXIT_OUTPUT_LIMIT, res.describe()
    text = res.json[stream]
    assert CAP * 0.9 <= len(text) <= CAP + 4096, f"{stream} length {len(text)} for a 1 MiB cap"
    assert res.stdout_total <= 6 * CAP + 65536, f"the CLI printed {res.stdout_total} bytes"
    assert 0 < res.cli_hwm_kib < 64 * 1024, (
        f"the CLI's peak RSS was {res.cli_hwm_kib} KiB for a 1 MiB cap")


@pytest.mark.slow
def test_stdout_flood_without_newlines():
    res = run(r'''
import sys
block = "A" * 65536
for _ in range((10 << 30) // 65536):
    sys.stdout.write(block)
''', timeout=60)
    _check_capped(res, "stdout")
    assert set(res.out[:CAP // 2]) == {"A"}


@pytest.mark.slow
def test_stderr_flood_from_a_child():
    res = run("head -c 10000000000 /dev/zero | tr '\\0' 'B' >&2", language="bash", timeout=60)
    _check_capped(res, "stderr")


def test_escape_sequences_are_neutralised():
    res = run(r'''
import sys
esc = chr(27)
bel = chr(7)
sys.stdout.write(esc + "]0;pwned-title" + bel)           # OSC set title
sys.stdout.write(esc + "]52;c;cHduZWQ=" + bel)           # OSC 52 clipboard write
sys.stdout.write(esc + "[2J" + esc + "[H")               # clear screen
sys.stdout.write(esc + "P+q544e" + esc + "\\")           # DCS request
sys.stderr.write(esc + "[31mred" + esc + "[0m\n")
print("visible")
''')
    assert res.status == "ok", res.describe()
    raw = res.raw_stdout
    assert b"\x1b" not in raw and b"\x07" not in raw, "raw escape bytes in the CLI's JSON output"
    assert "visible" in res.out
    assert "\x1b]0;pwned-title" in res.out, "the escape should survive as data inside the JSON"


def test_c1_control_characters_are_neutralised():
    """U+009B is the 8-bit CSI: UTF-8 terminals honour it like ESC [."""
    res = run(r'''
import sys
sys.stdout.write(chr(0x9b) + "2J" + chr(0x9d) + "0;pwned" + chr(0x9c))
print("visible")
''')
    assert res.status == "ok", res.describe()
    raw = res.raw_stdout
    for c1 in (b"\xc2\x9b", b"\xc2\x9d", b"\xc2\x9c"):
        assert c1 not in raw, f"raw C1 control {c1!r} in the CLI's JSON output"


def test_huge_result_repr_is_capped():
    """The value of the last expression is output too: a 40 MiB repr must not pass the 1 MiB
    cap into the CLI's output (nor balloon the CLI's memory)."""
    res = run('"A" * (40 << 20)', timeout=60)
    assert res.json is not None, res.describe()
    assert res.stdout_total <= CAP + (256 << 10), (
        f"the CLI printed {res.stdout_total} bytes for a {CAP}-byte output cap "
        f"(status {res.status}, result of {len(res.json.get('result') or '')} chars)")
    assert res.cli_hwm_kib < 64 * 1024, f"the CLI's peak RSS was {res.cli_hwm_kib} KiB"


ESCAPES = r'''
import sys
esc, bel = chr(27), chr(7)
sys.stdout.write(esc + "]0;pwned-title" + bel + esc + "[2J" + esc + "]52;c;cHduZWQ=" + bel)
sys.stderr.write(esc + "[31mred" + esc + "[0m\n")
print("visible")
'''

C1_ESCAPES = r'''
import sys
sys.stdout.write(chr(0x9b) + "2J" + chr(0x9d) + "0;pwned-title" + chr(0x9c))
sys.stderr.write(chr(0x9b) + "31mred\n")
print("visible")
'''


def test_terminal_output_neutralises_escapes():
    """Without --json the CLI streams output to the user's terminal: escape sequences from the
    sandbox must not reach it as control bytes."""
    from conftest import run_on_pty
    rc, out, _ = run_on_pty(ESCAPES)
    assert rc == 0 and b"visible" in out, out[-2000:]
    assert b"\x1b" not in out and b"\x07" not in out, f"raw escape bytes on the terminal: {out!r}"


def test_terminal_output_neutralises_c1_controls():
    """U+009B (CSI), U+009D (OSC) and U+009C (ST), UTF-8 encoded, are controls to UTF-8
    terminals just like ESC [ and ESC ]."""
    from conftest import run_on_pty
    rc, out, _ = run_on_pty(C1_ESCAPES)
    assert rc == 0 and b"visible" in out, out[-2000:]
    for c1 in (b"\xc2\x9b", b"\xc2\x9d", b"\xc2\x9c"):
        assert c1 not in out, f"raw C1 control {c1!r} reached the terminal: {out!r}"
