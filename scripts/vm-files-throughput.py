#!/usr/bin/python3
"""Moves files of 1, 16 and 64 MiB in and out of one microVM session through the files API and
prints the time and rate of each, and of a listing (docs/PERFORMANCE.md, "microVM tier").
Starts its own daemon from $AIRLOCK_BIN with the image of tests/e2e/test_microvm.py (build it
by running that test once); under QEMU's software emulation when there is no /dev/kvm.
Usage: AIRLOCK_BIN=build-test/src/cli/airlock scripts/vm-files-throughput.py"""
import os
import pathlib
import sys
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent / "tests" / "e2e"))
import pytest  # noqa: E402  (the helpers take it for their failures)

from airlock_daemon import start_daemon_or_fail  # noqa: E402
from test_microvm import base_env, kvm_usable  # noqa: E402


def main():
    env = base_env()
    if not kvm_usable():
        env["AIRLOCK_VM_ACCEL"] = "tcg"
    d = start_daemon_or_fail(pytest, args=("--pool-size", "1"), env=env)
    try:
        t = time.monotonic()
        r = d.post("/v1/sessions", json={"profile": "microvm"}, timeout=600)
        assert r.status_code == 201, d.why(r)
        sid = r.json()["id"]
        print(f"create (cold boot, {env.get('AIRLOCK_VM_ACCEL', 'kvm')}): "
              f"{time.monotonic() - t:.1f} s")
        for mib in (1, 16, 64):
            data = os.urandom(mib << 20)
            t = time.monotonic()
            r = d.put(f"/v1/sessions/{sid}/files/f{mib}.bin", data=data, timeout=600)
            up = time.monotonic() - t
            assert r.status_code in (200, 201), d.why(r)
            t = time.monotonic()
            r = d.get(f"/v1/sessions/{sid}/files/f{mib}.bin", timeout=600)
            down = time.monotonic() - t
            assert r.content == data, "the download differs from the upload"
            print(f"{mib} MiB: upload {up * 1000:.0f} ms ({mib / up:.1f} MiB/s), "
                  f"download {down * 1000:.0f} ms ({mib / down:.1f} MiB/s)")
        t = time.monotonic()
        d.get(f"/v1/sessions/{sid}/files?dir=")
        print(f"listing of /work: {(time.monotonic() - t) * 1000:.1f} ms")
        d.delete(f"/v1/sessions/{sid}")
    finally:
        d.stop()


if __name__ == "__main__":
    main()
