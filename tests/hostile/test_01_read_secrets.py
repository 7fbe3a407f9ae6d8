"""Row 1: read /etc/shadow, /root/.ssh/*, /home/* -> ENOENT (not in the sandbox's tree). /home
is airlock's own: it holds only user, /work bound there (E2B's home), never the host's."""
import os

from conftest import run, run_py


def test_host_secrets_are_not_in_the_tree():
    assert os.path.exists("/etc/shadow"), "host precondition: /etc/shadow exists"
    res = run_py(r'''
        for path in ["/etc/shadow", "/etc/gshadow", "/etc/shadow-", "/root/.ssh/id_rsa",
                     "/root/.ssh/authorized_keys", "/root/.bash_history", "/home/cloudsdk",
                     "/etc/sudoers", "/etc/ssh/ssh_host_ed25519_key"]:
            R["open " + path] = attempt(lambda: open(path, "rb").read())
        for d in ["/root", "/root/.ssh"]:
            R["listdir " + d] = attempt(os.listdir, d)
            R["stat " + d] = attempt(os.lstat, d)
        a, b = os.stat("/work"), os.stat("/home/user")
        R["home"] = {"listdir /home": os.listdir("/home"),
                     "link": os.path.islink("/home/user"),
                     "realpath": os.path.realpath("/home/user"),
                     "same as /work": (a.st_dev, a.st_ino) == (b.st_dev, b.st_ino)}
    ''')
    home = res.R.pop("home")
    for key, value in res.R.items():
        assert value == "ENOENT", f"{key}: {value} (expected ENOENT: not in the tree)"
    # /home is the sandbox's own: nothing but user, which is /work itself.
    assert home == {"listdir /home": ["user"], "link": False, "realpath": "/home/user",
                    "same as /work": True}, home


def test_host_secrets_from_bash():
    res = run(r'''
for p in /etc/shadow /root/.ssh/id_rsa /home/cloudsdk; do
  if ls -d "$p" >/dev/null 2>&1; then echo "VISIBLE $p"; else echo "ABSENT $p"; fi
done
echo "home=$(ls -A /home | tr '\n' ' ')"
echo "user=$(readlink -f /home/user) $(stat -c %d:%i /home/user) $(stat -c %d:%i /work)"
cat /etc/shadow
echo "cat-status=$?"
''', language="bash")
    assert res.status == "ok", res.describe()
    out = res.out
    assert "VISIBLE" not in out, out
    for p in ("/etc/shadow", "/root/.ssh/id_rsa", "/home/cloudsdk"):
        assert f"ABSENT {p}" in out, out
    assert "home=user \n" in out and "user=/home/user " in out, out
    user = out.split("user=/home/user ", 1)[1].split("\n", 1)[0].split()
    assert len(user) == 2 and user[0] == user[1], f"/home/user is not /work: {out}"
    assert "cat-status=1" in out, out
    assert "No such file or directory" in res.err, res.describe()
    assert "root:" not in out
