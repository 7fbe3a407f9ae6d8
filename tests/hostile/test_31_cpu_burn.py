"""Row 31: CPU burn in N threads/processes -> throttled at the cpu cap (default 1 CPU), the wall
timeout fires, and another sandbox started meanwhile stays within its latency budget."""
import concurrent.futures
import time

import pytest

from conftest import EXIT_TIMEOUT, run

BURN = r'''
import os, threading
def spin():
    while True:
        pass
for _ in range(4):
    if os.fork() == 0:
        spin()
for _ in range(3):
    threading.Thread(target=spin, daemon=True).start()
spin()
'''


@pytest.mark.slow
def test_cpu_burn_is_throttled_and_timed_out():
    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        burn = pool.submit(run, BURN, timeout=4, hard_timeout=40)
        time.sleep(1.5)
        t0 = time.monotonic()
        other = run("print(sum(range(1000)))", timeout=20)
        other_wall = time.monotonic() - t0
        res = burn.result()
    assert other.status == "ok" and other.out.strip() == "499500", other.describe()
    assert other_wall < 10, f"a second sandbox took {other_wall:.1f}s while the burn ran"
    assert res.status == "timeout" and res.json["timed_out"] is True, res.describe()
    assert res.rc == EXIT_TIMEOUT and res.exit_code == EXIT_TIMEOUT, res.describe()
    assert res.wall < 4 + 10, f"timeout of 4s took {res.wall:.1f}s to fire"
    usage = res.json.get("usage") or {}
    cpu_ms, wall_ms = usage.get("cpu_ms"), usage.get("wall_ms")
    assert cpu_ms is not None and wall_ms, f"no CPU usage reported: {usage}"
    # 8 spinning threads on a 2-core host: unthrottled that is ~2x wall; the cap is 1 CPU
    assert cpu_ms <= wall_ms * 1.25 + 300, f"not throttled to 1 CPU: cpu {cpu_ms} ms in {wall_ms} ms"
