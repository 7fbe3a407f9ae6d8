"""Row 29: allocate 10 GiB (bytearray, numpy) under --memory 256MiB -> MemoryError, or an OOM
kill of the sandbox only, reported as status "oom" (exit 137)."""
import pytest

from conftest import EXIT_OOM, run

MEM = "256MiB"
LIMIT = 256 << 20


def _assert_oom_or_memoryerror(res):
    if res.status == "oom":
        assert res.rc == EXIT_OOM and res.exit_code == EXIT_OOM, res.describe()
    else:
        assert res.status == "error", f"expected oom or MemoryError\n{res.describe()}"
        assert res.error and res.error["name"] == "MemoryError", res.describe()
        assert res.rc == 1, res.describe()
    assert "ALLOCATED" not in res.out, res.describe()
    peak = (res.json.get("usage") or {}).get("peak_memory_bytes")
    if peak:
        assert peak <= LIMIT * 1.1, f"peak {peak} above the {MEM} cap"


@pytest.mark.slow
def test_bytearray_10g():
    res = run("x = bytearray(10 << 30)\nprint('ALLOCATED')", memory=MEM, timeout=30)
    _assert_oom_or_memoryerror(res)


@pytest.mark.slow
def test_numpy_10g():
    res = run("import numpy as np\nx = np.ones((10 << 30) // 8)\nprint('ALLOCATED')",
              memory=MEM, timeout=30)
    _assert_oom_or_memoryerror(res)


@pytest.mark.slow
def test_gradual_growth_is_oom_killed():
    """Touching memory 16 MiB at a time cannot be refused up front: the cgroup must OOM-kill the
    sandbox and the CLI must report it as oom."""
    res = run(r'''
chunks = []
while True:
    chunks.append(bytearray(16 << 20))
''', memory=MEM, timeout=60)
    assert res.status == "oom" or (res.error or {}).get("name") == "MemoryError", res.describe()
    if res.status == "oom":
        assert res.rc == EXIT_OOM and res.exit_code == EXIT_OOM, res.describe()
    # airlock itself survived and still works
    res = run("print('after')", memory=MEM)
    assert res.status == "ok" and res.out.strip() == "after", res.describe()
