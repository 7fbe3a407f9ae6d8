"""Extra: `x = [0] * (10**9)` -> status oom or a MemoryError, reported politely."""
import pytest

from conftest import EXIT_OOM, run


@pytest.mark.slow
def test_huge_list():
    res = run("x = [0] * (10**9)\nprint('ALLOCATED')", memory="256MiB", timeout=30)
    assert "ALLOCATED" not in res.out
    if res.status == "oom":
        assert res.rc == EXIT_OOM and res.exit_code == EXIT_OOM, res.describe()
    else:
        assert res.status == "error" and res.error["name"] == "MemoryError", res.describe()
        assert res.rc == 1
    res = run("print('fine')")
    assert res.status == "ok" and res.out == "fine\n"
