"""Extra: writing 15 MB into /tmp with a 10 MB cap -> ENOSPC inside; host disk untouched."""
import os

from conftest import custom_profile, run_py


def test_15mb_into_10mb_tmp():
    prof = custom_profile("hostile-tmp10", limits={"tmp": "10MiB"})
    st = os.statvfs("/")
    free_before = st.f_bavail * st.f_frsize
    res = run_py(r'''
        data = b"z" * (15 * 1000 * 1000)
        try:
            with open("/tmp/big", "wb") as f:
                f.write(data)
            R["write"] = "OK"
        except OSError as e:
            R["write"] = ename(e.errno)
        R["size"] = os.stat("/tmp/big").st_size if os.path.exists("/tmp/big") else 0
    ''', profile=prof)
    assert res.R["write"] == "ENOSPC", res.R
    assert res.R["size"] <= 10 * 1024 * 1024, res.R
    st = os.statvfs("/")
    assert st.f_bavail * st.f_frsize > free_before - (256 << 20)
