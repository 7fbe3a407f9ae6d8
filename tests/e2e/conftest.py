"""End-to-end tests of `airlock run`: real sandboxes, real CPython, checked through the CLI's
--json object and exit status, the way a user meets them."""
import json
import os
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
AIRLOCK = os.environ.get("AIRLOCK_BIN", str(ROOT / "build" / "src" / "cli" / "airlock"))


class Run:
    def __init__(self, proc: subprocess.CompletedProcess, as_json: bool):
        self.returncode = proc.returncode
        self.stdout = proc.stdout
        self.stderr = proc.stderr
        self.obj = json.loads(proc.stdout) if as_json and proc.stdout.strip() else None

    def __getitem__(self, key):
        return self.obj[key]


def run_airlock(code, *args, as_json=True, stdin=None, timeout=120, input_bytes=None):
    if os.geteuid() != 0:
        pytest.skip("airlock's namespaces isolation needs root")
    argv = [AIRLOCK, "run", *args]
    if as_json:
        argv.append("--json")
    argv.append("-")
    data = input_bytes if input_bytes is not None else code.encode()
    proc = subprocess.run(argv, input=data, capture_output=True, timeout=timeout)
    proc.stdout = proc.stdout.decode("utf-8", "replace")
    proc.stderr = proc.stderr.decode("utf-8", "replace")
    return Run(proc, as_json)


@pytest.fixture
def run():
    return run_airlock


@pytest.fixture(scope="module")
def fake():
    """A scripted fake Chat Completions endpoint (fake_llm.py) shared by a module's tests,
    which clear and check its script themselves."""
    from fake_llm import FakeLLM

    f = FakeLLM()
    yield f
    f.close()
