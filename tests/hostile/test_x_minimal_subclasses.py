"""Extra: `"".__class__.__bases__[0].__subclasses__()` under minimal -> refused by the static
check before it runs (a policy layer, not the boundary: the boundary is tested elsewhere)."""
from conftest import run


def test_subclasses_walk_refused():
    res = run('print("BEFORE")\n"".__class__.__bases__[0].__subclasses__()', profile="minimal")
    assert res.rc != 2, res.describe()
    assert res.status == "error", res.describe()
    assert res.json.get("result") is None, res.describe()
    assert "<class" not in res.out, res.describe()
    assert "BEFORE" not in res.out, "the static check should refuse before anything runs"
    err = res.error or {}
    message = " ".join(str(err.get(k) or "") for k in ("name", "value", "traceback")) + res.err
    assert any(w in message for w in ("__subclasses__", "__class__", "__bases__", "dunder")), \
        f"refusal does not say what was refused: {message!r}"


def test_same_code_runs_under_default():
    res = run('len("".__class__.__bases__[0].__subclasses__()) > 10')
    assert res.status == "ok" and res.json.get("result") == "True", res.describe()
