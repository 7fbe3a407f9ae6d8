"""Row 1: read /etc/shadow, /root/.ssh/*, /home/* -> ENOENT (not in the sandbox's tree)."""
import os

from conftest import run, run_py


def test_host_secrets_are_not_in_the_tree():
    assert os.path.exists("/etc/shadow"), "host precondition: /etc/shadow exists"
    res = run_py(r'''
        for path in ["/etc/shadow", "/etc/gshadow", "/etc/shadow-", "/root/.ssh/id_rsa",
                     "/root/.ssh/authorized_keys", "/root/.bash_history", "/home/cloudsdk",
                     "/etc/sudoers", "/etc/ssh/ssh_host_ed25519_key"]:
            R["open " + path] = attempt(lambda: open(path, "rb").read())
        for d in ["/root", "/root/.ssh", "/home"]:
            R["listdir " + d] = attempt(os.listdir, d)
            R["stat " + d] = attempt(os.lstat, d)
    ''')
    for key, value in res.R.items():
        assert value == "ENOENT", f"{key}: {value} (expected ENOENT: not in the tree)"


def test_host_secrets_from_bash():
    res = run(r'''
for p in /etc/shadow /root/.ssh/id_rsa /home; do
  if ls -d "$p" >/dev/null 2>&1; then echo "VISIBLE $p"; else echo "ABSENT $p"; fi
done
cat /etc/shadow
echo "cat-status=$?"
''', language="bash")
    assert res.status == "ok", res.describe()
    out = res.out
    assert "VISIBLE" not in out, out
    for p in ("/etc/shadow", "/root/.ssh/id_rsa", "/home"):
        assert f"ABSENT {p}" in out, out
    assert "cat-status=1" in out, out
    assert "No such file or directory" in res.err, res.describe()
    assert "root:" not in out
