"""Extra: read /proc/self/environ and the environment -> no daemon (here: CLI) secrets or tokens."""
from conftest import SECRET_ENV, run


def test_no_secrets_in_environment():
    res = run(r'''
import os
blob = open("/proc/self/environ", "rb").read().decode("utf-8", "replace")
for pid in os.listdir("/proc"):
    if pid.isdigit():
        try:
            blob += open("/proc/%s/environ" % pid, "rb").read().decode("utf-8", "replace")
            blob += open("/proc/%s/cmdline" % pid, "rb").read().decode("utf-8", "replace")
        except OSError:
            pass
print(blob.replace("\0", "\n"))
print(repr(dict(os.environ)))
''')
    assert res.status == "ok", res.describe()
    for name, value in SECRET_ENV.items():
        assert value not in res.out, f"{name} reached the sandbox"
    for word in ("TOKEN", "SECRET", "API_KEY", "PASSWORD"):
        assert word not in res.out.upper().replace("SECRETS", ""), res.out[:2000]
