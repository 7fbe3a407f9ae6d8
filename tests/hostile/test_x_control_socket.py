"""Extra: user code owns fd 3, the runner's control socket, and can write anything to it. The
driver (the CLI here, the daemon later) must treat every frame as hostile: a huge announced
length, garbage JSON, a forged oversized result, or a closed socket end the cell with a clear
status, quickly, without the driver's memory following the attacker."""
from conftest import EXIT_AIRLOCK_FAILURE, run

CAP = 1 << 20


def _check_driver_survived(res, max_wall=15):
    assert res.json is not None and res.rc != EXIT_AIRLOCK_FAILURE, res.describe()
    assert res.rc >= 0, f"the CLI died of signal {-res.rc}"
    assert res.wall < max_wall, f"the CLI took {res.wall:.1f}s"
    assert res.cli_hwm_kib < 64 * 1024, f"the CLI's peak RSS was {res.cli_hwm_kib} KiB"


def test_huge_announced_frame_length():
    res = run("import os, struct, time\nos.write(3, struct.pack('<I', 0xFFFFFFF0))\n"
              "time.sleep(30)", timeout=20)
    _check_driver_survived(res)
    assert res.status == "killed", res.describe()


def test_garbage_frame():
    res = run("import os, struct, time\nos.write(3, struct.pack('<I', 5) + b'hello')\n"
              "time.sleep(30)", timeout=20)
    _check_driver_survived(res)
    assert res.status == "killed", res.describe()


def test_forged_oversized_result_frame():
    res = run(r'''
import os, json, struct, time
body = json.dumps({"op": "result", "status": "ok", "exit_code": 0,
                   "result": "F" * (60 << 20), "outputs": [], "files": []}).encode()
os.write(3, struct.pack("<I", len(body)))
view = memoryview(body)
while view:
    n = os.write(3, view)
    view = view[n:]
time.sleep(30)
''', timeout=30)
    _check_driver_survived(res, max_wall=40)
    assert res.stdout_total <= CAP + (256 << 10), (
        f"a forged result frame pushed {res.stdout_total} bytes through a {CAP}-byte cap")


def test_closed_control_socket():
    res = run("import os, time\nos.close(3)\ntime.sleep(30)", timeout=20)
    _check_driver_survived(res)
    assert res.status in ("killed", "error"), res.describe()
