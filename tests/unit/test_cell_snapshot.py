"""Unit tests for snapshot() and restore() of src/runner/cell/saved.py (the package airlock_cell): saving a session's
Python variables when it stops (or forks) and loading them in a new sandbox.

Run with Debian's interpreter (the one the runner embeds):
    /usr/bin/python3 -m pytest tests/unit/test_cell_snapshot.py -q

Like test_cell.py, each test gets a fresh module instance and a fresh __main__. snapshot() writes
to a pipe, read by a thread into a file (a big state fills the pipe); restore() loads that file
into ANOTHER fresh module instance with ANOTHER fresh __main__, as a new sandbox would.
"""

import builtins
import importlib.util
import itertools
import json
import os
import pathlib
import random
import sys
import threading
import types

import pytest

SRC = pathlib.Path(__file__).resolve().parents[2] / "src" / "runner" / "cell"
MINIMAL = ["math", "statistics", "itertools", "functools", "re", "datetime", "collections",
           "json", "csv", "string", "textwrap", "decimal", "fractions", "random", "operator",
           "typing"]
RESULT_KEYS = {"offset", "size", "lost_names", "modules", "count", "bash"}
_instances = itertools.count()


def load_module():
    """A fresh instance of the package under a name of its own (its modules with it)."""
    name = f"airlock_cell_snap_{next(_instances)}"
    spec = importlib.util.spec_from_file_location(name, SRC / "__init__.py",
                                                  submodule_search_locations=[str(SRC)])
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod  # the relative imports of its modules find it there
    spec.loader.exec_module(mod)
    return mod


class Sandboxes:
    """Makes "sandboxes": a fresh module instance, configured, with a fresh __main__."""

    def __init__(self, monkeypatch, tmp_path):
        self.monkeypatch = monkeypatch
        self.tmp_path = tmp_path
        self.saves = itertools.count()

    def new(self, imports=None):
        self.monkeypatch.setitem(sys.modules, "__main__", types.ModuleType("__main__"))
        mod = load_module()
        mod.configure("minimal" if imports is not None else "default", imports, "none")
        return mod

    def save(self, mod, bash=None):
        """snapshot() into a file through a pipe; returns (result, path)."""
        path = self.tmp_path / f"python.state.{next(self.saves)}"
        r, w = os.pipe()

        def drain():
            with open(path, "wb") as out:
                while True:
                    chunk = os.read(r, 1 << 20)
                    if not chunk:
                        break
                    out.write(chunk)

        reader = threading.Thread(target=drain)
        reader.start()
        try:
            info = mod.snapshot(w, bash)
        finally:
            reader.join()
            os.close(r)
        assert set(info) == RESULT_KEYS
        json.dumps(info)  # the C side turns it into JSON/metadata: plain data only
        assert_closed(w)
        return info, path

    def load(self, info, path, imports=None, reseed=False):
        """restore() from the file into a new sandbox; returns (module, result)."""
        mod = self.new(imports)
        fd = os.open(path, os.O_RDONLY)
        got = mod.restore(fd, info["offset"], info["size"], info["modules"], info["lost_names"],
                          info["count"], reseed)
        assert_closed(fd)
        assert set(got) == {"lost_names", "error"}
        json.dumps(got)
        return mod, got

    def roundtrip(self, code, imports=None, reseed=False, restore_imports=None):
        """Run code in one sandbox, save, restore in another: (saved info, restored module,
        restore result, restored namespace)."""
        mod = self.new(imports)
        ok(mod, code)
        info, path = self.save(mod)
        new, got = self.load(info, path, restore_imports, reseed)
        return info, new, got, sys.modules["__main__"].__dict__


def assert_closed(fd):
    with pytest.raises(OSError):
        os.fstat(fd)


def ok(mod, code):
    reply = mod.run_cell(code)
    assert reply["status"] == "ok", reply["error"]
    return reply


@pytest.fixture
def boxes(monkeypatch, tmp_path):
    monkeypatch.setattr(builtins, "__import__", builtins.__import__)
    monkeypatch.setattr(sys, "dont_write_bytecode", True)  # no __pycache__ in src/
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    return Sandboxes(monkeypatch, tmp_path)


# --- plain values ---------------------------------------------------------------------------------

def test_plain_values_round_trip(boxes):
    info, new, got, ns = boxes.roundtrip(
        "i = 42\nbig = 10 ** 40\nf = 2.5\nc = 1 + 2j\ns = 'héllo'\nb = b'\\x00\\xff'\n"
        "ba = bytearray(b'xy')\nn = None\nt = True\nl = [1, [2, (3, 'x')]]\n"
        "d = {'k': {1: 2}, (1, 2): frozenset({3})}\nst = {1, 2}\nr = range(3)\n")
    assert got == {"lost_names": [], "error": None}
    assert info["offset"] == 0 and info["size"] > 0 and info["lost_names"] == []
    assert (ns["i"], ns["big"], ns["f"], ns["c"], ns["s"]) == (42, 10 ** 40, 2.5, 1 + 2j, "héllo")
    assert ns["b"] == b"\x00\xff" and ns["ba"] == bytearray(b"xy")
    assert ns["n"] is None and ns["t"] is True
    assert ns["l"] == [1, [2, (3, "x")]]
    assert ns["d"] == {"k": {1: 2}, (1, 2): frozenset({3})}
    assert ns["st"] == {1, 2} and ns["r"] == range(3)


def test_shared_references_survive(boxes):
    _, _, got, ns = boxes.roundtrip("a = [1]\nb = a\nc = {'x': a}\nself_ref = []\n"
                                    "self_ref.append(self_ref)\n")
    assert got["error"] is None
    assert ns["a"] is ns["b"] is ns["c"]["x"]
    ns["a"].append(2)
    assert ns["b"] == [1, 2]
    assert ns["self_ref"][0] is ns["self_ref"]


def test_module_dunders_builtins_and_display_are_not_saved(boxes):
    mod = boxes.new()
    ok(mod, "x = 1")
    ns = sys.modules["__main__"].__dict__
    assert ns["display"] is mod.display
    info, path = boxes.save(mod)
    new, got = boxes.load(info, path)
    ns = sys.modules["__main__"].__dict__
    assert got == {"lost_names": [], "error": None}
    assert ns["x"] == 1
    assert ns["__name__"] == "__main__"
    assert ns["__builtins__"] is builtins
    assert ns["display"] is new.display  # the new sandbox's own display()
    assert "display" not in info["lost_names"] and "display" not in info["modules"]


def test_user_display_is_saved(boxes):
    _, _, got, ns = boxes.roundtrip("def display(*a):\n    return 'mine'\n")
    assert ns["display"]() == "mine"


def test_underscore_saved_or_silently_dropped(boxes):
    _, _, _, ns = boxes.roundtrip("21 * 2")
    assert ns["_"] == 42
    info, _, got, ns = boxes.roundtrip("x = 1\n(i for i in range(3))")
    assert info["lost_names"] == [] and got["lost_names"] == []
    assert "_" not in ns and ns["x"] == 1


def test_top_level_annotations(boxes):
    _, _, _, ns = boxes.roundtrip("x: int = 3\n")
    assert ns["x"] == 3 and ns["__annotations__"] == {"x": int}


# --- numpy, pandas ------------------------------------------------------------------------------

def test_numpy_arrays(boxes):
    np = pytest.importorskip("numpy")
    _, _, got, ns = boxes.roundtrip(
        "import numpy as np\nsmall = np.arange(5)\nbig = np.arange(1_000_000, dtype=np.float64)\n"
        "fortran = np.asfortranarray(np.arange(60000.0).reshape(300, 200))\n"
        "view = big[::7]\nrec = np.zeros(3, dtype=[('a', 'i4'), ('b', 'f8')])\n"
        "objs = np.array([1, 'x', None], dtype=object)\n")
    assert got == {"lost_names": [], "error": None}
    assert ns["np"] is np
    assert np.array_equal(ns["small"], np.arange(5))
    assert np.array_equal(ns["big"], np.arange(1_000_000, dtype=np.float64))
    assert ns["fortran"].flags.f_contiguous
    assert np.array_equal(ns["fortran"], np.arange(60000.0).reshape(300, 200))
    assert np.array_equal(ns["view"], np.arange(1_000_000, dtype=np.float64)[::7])
    assert ns["rec"].dtype.names == ("a", "b")
    assert ns["objs"].tolist() == [1, "x", None]


def test_pandas_dataframe(boxes):
    pd = pytest.importorskip("pandas")
    _, _, got, ns = boxes.roundtrip(
        "import pandas as pd\nimport numpy as np\n"
        "df = pd.DataFrame({'a': np.arange(100_000), 'b': np.random.rand(100_000),\n"
        "                   'c': ['x', 'y'] * 50_000,\n"
        "                   't': pd.date_range('2024-01-01', periods=100_000, freq='s')})\n"
        "df = df.set_index('t')\ncat = df['c'].astype('category')\n"
        "expected = df.copy()\n")
    assert got == {"lost_names": [], "error": None}
    assert ns["pd"] is pd
    assert isinstance(ns["df"], pd.DataFrame)
    assert ns["df"].equals(ns["expected"]) and ns["df"] is not ns["expected"]
    assert list(ns["cat"].cat.categories) == ["x", "y"]


# --- functions and classes defined in cells -------------------------------------------------------

def test_function_sees_restored_globals(boxes):
    _, _, got, ns = boxes.roundtrip(
        "scale = 3\ndef f(x, *, k=1):\n    '''doc'''\n    return x * scale * k\n"
        "f.tag = 'mine'\ng = f\nsq = lambda v: v * v\n")
    assert got["error"] is None
    f = ns["f"]
    assert f(2) == 6 and f(2, k=2) == 12
    assert f.__doc__ == "doc" and f.tag == "mine" and f.__module__ == "__main__"
    assert f.__globals__ is ns
    assert ns["g"] is f
    ns["scale"] = 10
    assert f(1) == 10
    assert ns["sq"](7) == 49 and ns["sq"].__name__ == "<lambda>"


def test_function_running_in_new_cells(boxes):
    info, new, got, ns = boxes.roundtrip("data = [1, 2, 3]\ndef total():\n    return sum(data)\n")
    assert ok(new, "data.append(4)\ntotal()")["result"] == "10"


def test_closure_and_shared_cells(boxes):
    _, _, _, ns = boxes.roundtrip(
        "def counter():\n    n = 0\n    def inc():\n        nonlocal n\n        n += 1\n"
        "        return n\n    def get():\n        return n\n    return inc, get\n"
        "inc, get = counter()\ninc(); inc()\n"
        "def adder(k):\n    return lambda v: v + k\nadd5 = adder(5)\n")
    assert ns["get"]() == 2
    assert ns["inc"]() == 3 and ns["get"]() == 3  # one cell, shared by both closures
    assert ns["add5"](1) == 6


def test_recursive_functions(boxes):
    _, _, _, ns = boxes.roundtrip(
        "def fact(n):\n    return 1 if n < 2 else n * fact(n - 1)\n"
        "def outer():\n    def fib(n):\n        return n if n < 2 else fib(n - 1) + fib(n - 2)\n"
        "    return fib\nfib = outer()\n"
        "def defaults(x=[1, 2]):\n    return x\n")
    assert ns["fact"](6) == 720
    assert ns["fib"](15) == 610
    assert ns["defaults"]() == [1, 2]


def test_classes_instances_and_descriptors(boxes):
    _, new, got, ns = boxes.roundtrip(
        "class Shape:\n    count = 0\n    def __init__(self, w):\n        self.w = w\n"
        "        Shape.count += 1\n    @property\n    def area(self):\n        return self.w ** 2\n"
        "    @area.setter\n    def area(self, v):\n        self.w = v ** 0.5\n"
        "    @staticmethod\n    def unit():\n        return Shape(1)\n"
        "    @classmethod\n    def make(cls, w):\n        return cls(w)\n"
        "    def __repr__(self):\n        return f'{type(self).__name__}({self.w})'\n"
        "class Square(Shape):\n    def __init__(self, w):\n        super().__init__(w)\n"
        "        self.square = True\n"
        "a = Shape(2)\nb = Square.make(3)\nc = Square(4)\nkind = Square\n")
    assert got["error"] is None
    Shape, Square = ns["Shape"], ns["Square"]
    a, b, c = ns["a"], ns["b"], ns["c"]
    assert type(a) is Shape and type(b) is Square and type(c) is Square and ns["kind"] is Square
    assert Square.__bases__ == (Shape,) and isinstance(b, Shape)
    assert a.area == 4 and b.area == 9 and repr(b) == "Square(3)"
    a.area = 25
    assert a.w == 5
    assert Shape.count == 3
    assert repr(Shape.unit()) == "Shape(1)" and Shape.count == 4
    assert repr(Square.make(6)) == "Square(6)" and Square(7).square  # super() still works
    assert Shape.__module__ == "__main__" and Shape.__qualname__ == "Shape"
    assert ok(new, "Square(2).area")["result"] == "4"


def test_slots_abc_and_class_features(boxes):
    _, _, got, ns = boxes.roundtrip(
        "import abc\nclass P:\n    __slots__ = ('x', '__y')\n    def __init__(self):\n"
        "        self.x = 1\n        self.__y = 2\n    def y(self):\n        return self.__y\n"
        "p = P()\n"
        "class Base(abc.ABC):\n    @abc.abstractmethod\n    def run(self): ...\n"
        "class Impl(Base):\n    def run(self):\n        return 'ran'\n"
        "impl = Impl()\n"
        "class Meta(type):\n    def hello(cls):\n        return 'hi ' + cls.__name__\n"
        "class WithMeta(metaclass=Meta):\n    pass\n")
    assert got["error"] is None
    assert ns["p"].x == 1 and ns["p"].y() == 2 and not hasattr(ns["p"], "__dict__")
    assert ns["impl"].run() == "ran" and isinstance(ns["impl"], ns["Base"])
    with pytest.raises(TypeError):
        ns["Base"]()  # still abstract
    assert ns["WithMeta"].hello() == "hi WithMeta" and type(ns["WithMeta"]) is ns["Meta"]


def test_dataclass(boxes):
    _, new, got, ns = boxes.roundtrip(
        "import dataclasses\nfrom dataclasses import dataclass, field\n"
        "@dataclass(order=True)\nclass Point:\n    x: int\n    y: int = 0\n"
        "    tags: list = field(default_factory=list)\n"
        "p = Point(1, 2)\nq = Point(3)\n"
        "@dataclass(frozen=True)\nclass Frozen:\n    v: float\nfz = Frozen(1.5)\n")
    assert got["error"] is None
    Point = ns["Point"]
    assert ns["p"] == Point(1, 2) and ns["p"] < ns["q"]
    assert repr(ns["q"]) == "Point(x=3, y=0, tags=[])"
    assert Point(5).tags == [] and Point(5).tags is not Point(5).tags
    assert [f.name for f in ns["dataclasses"].fields(Point)] == ["x", "y", "tags"]
    assert ns["dataclasses"].asdict(ns["p"]) == {"x": 1, "y": 2, "tags": []}
    assert ns["dataclasses"].replace(ns["p"], y=9) == Point(1, 9)
    with pytest.raises(ns["dataclasses"].FrozenInstanceError):
        ns["fz"].v = 2.0
    assert ok(new, "Point(0, 1)")["result"] == "Point(x=0, y=1, tags=[])"


def test_enum_namedtuple_lru_cache_and_generics(boxes):
    _, _, got, ns = boxes.roundtrip(
        "import enum, functools, typing, collections\n"
        "class Color(enum.Enum):\n    RED = 1\n    GREEN = 2\n    CRIMSON = 1\n"
        "    def shout(self):\n        return self.name.upper() + '!'\n"
        "fav = Color.GREEN\n"
        "Pair = collections.namedtuple('Pair', 'a b')\npair = Pair(1, 2)\n"
        "class NT(typing.NamedTuple):\n    x: int\n    y: str = 'y'\nnt = NT(1)\n"
        "@functools.lru_cache(maxsize=None)\ndef sq(v):\n    return v * v\n"
        "T = typing.TypeVar('T')\nclass Box(typing.Generic[T]):\n"
        "    def __init__(self, v: T):\n        self.v = v\nbox = Box[int](3)\n")
    assert got == {"lost_names": [], "error": None}
    Color = ns["Color"]
    assert ns["fav"] is Color.GREEN and Color(1) is Color.RED and Color.CRIMSON is Color.RED
    assert Color.GREEN.shout() == "GREEN!" and list(Color) == [Color.RED, Color.GREEN]
    assert ns["pair"] == (1, 2) and ns["pair"].b == 2 and type(ns["pair"]) is ns["Pair"]
    assert ns["Pair"](3, 4)._replace(a=0) == (0, 4)
    assert ns["nt"] == (1, "y") and ns["NT"](2).y == "y"
    assert ns["sq"](9) == 81 and ns["sq"].cache_info().misses == 1
    assert ns["box"].v == 3 and type(ns["box"]) is ns["Box"]


def test_code_run_while_loading_finds_the_globals_it_needs(boxes):
    # pt is bound before Point and make_point exist; unpickling pt calls make_point, which
    # looks Point up in the globals: definitions are loaded (and bound) first.
    _, _, got, ns = boxes.roundtrip(
        "pt = None\nclass Point:\n    def __init__(self, x):\n        self.x = x\n"
        "    def __reduce__(self):\n        return (make_point, (self.x,))\n"
        "def make_point(x):\n    return Point(x)\npt = Point(4)\n"
        "import enum\nclass Planet(enum.Enum):\n    EARTH = (5.9e24, 6.3e6)\n"
        "    def __init__(self, mass, radius):\n        self.mass = mass\n")
    assert got == {"lost_names": [], "error": None}
    assert type(ns["pt"]) is ns["Point"] and ns["pt"].x == 4
    assert ns["Planet"].EARTH.mass == 5.9e24


def test_init_subclass_does_not_run_again(boxes):
    _, _, got, ns = boxes.roundtrip(
        "class Registry:\n    names = []\n    def __init_subclass__(cls, **kw):\n"
        "        super().__init_subclass__(**kw)\n        Registry.names.append(cls.__name__)\n"
        "class Child(Registry):\n    pass\nclass Grand(Child):\n    pass\n")
    assert got["error"] is None
    assert ns["Registry"].names == ["Child", "Grand"]
    assert "__init_subclass__" in ns["Registry"].__dict__

    class_def = "class Later(Registry):\n    pass\n"
    exec(class_def, ns)  # the hook is back for classes defined after the restore
    assert ns["Registry"].names == ["Child", "Grand", "Later"]


def test_failed_load_leaves_no_partial_state(boxes):
    _, _, got, ns = boxes.roundtrip(
        "class Fragile:\n    def __setstate__(self, state):\n        raise ValueError('nope')\n"
        "a = [1, 2]\nf = Fragile()\nf.x = 1\nz = 3\nimport math\n")
    assert got["error"] == ("the saved Python variables could not be loaded: ValueError: nope")
    assert ns["math"] is sys.modules["math"]
    assert not {"Fragile", "a", "f", "z"} & set(ns)


def test_cached_property_and_cached_method(boxes):
    _, _, got, ns = boxes.roundtrip(
        "import functools\nclass Data:\n    def __init__(self, v):\n        self.v = v\n"
        "    @functools.cached_property\n    def double(self):\n        return self.v * 2\n"
        "    @functools.lru_cache(maxsize=8)\n    def plus(self, k):\n        return self.v + k\n"
        "d = Data(4)\nd.double\n")
    assert got == {"lost_names": [], "error": None}
    d = ns["d"]
    assert d.__dict__["double"] == 8 and ns["Data"](5).double == 10
    assert d.plus(1) == 5 and ns["Data"].plus.cache_parameters()["maxsize"] == 8


# --- modules ----------------------------------------------------------------------------------

def test_modules_are_imported_again(boxes):
    np = pytest.importorskip("numpy")
    info, _, got, ns = boxes.roundtrip(
        "import numpy as np\nimport os.path\nimport json as j\nfrom math import sqrt\n"
        "from os import path as p\nholder = {'m': j, 'np': np}\n")
    assert info["modules"] == {"np": "numpy", "os": "os", "j": "json", "p": "posixpath"}
    assert got == {"lost_names": [], "error": None}
    assert ns["np"] is np and ns["j"] is sys.modules["json"] and ns["os"].path is ns["p"]
    assert ns["sqrt"](16) == 4.0
    assert ns["holder"]["m"] is ns["j"] and ns["holder"]["np"] is np


def test_module_made_at_run_time_is_lost(boxes):
    info, _, got, ns = boxes.roundtrip("import types\nfake = types.ModuleType('fake')\n")
    assert info["lost_names"] == ["fake"] and got["lost_names"] == ["fake"]
    assert "fake" not in ns


def test_allow_list_refuses_a_module_on_restore(boxes):
    pytest.importorskip("numpy")
    info, _, got, ns = boxes.roundtrip("import numpy as np\nimport math\nx = 1\n",
                                       restore_imports=MINIMAL)
    assert info["modules"] == {"np": "numpy", "math": "math"}
    assert got == {"lost_names": ["np"], "error": None}
    assert "np" not in ns and ns["math"] is sys.modules["math"] and ns["x"] == 1


def test_module_that_fails_to_import_is_lost(boxes):
    mod = boxes.new()
    ok(mod, "x = 1")
    info, path = boxes.save(mod)
    info["modules"] = {"gone": "no_such_module_airlock", "m": "math"}
    _, got = boxes.load(info, path)
    ns = sys.modules["__main__"].__dict__
    assert got == {"lost_names": ["gone"], "error": None}
    assert ns["m"] is sys.modules["math"] and ns["x"] == 1


# --- what cannot be saved -----------------------------------------------------------------------

LOSERS = ("import socket, threading\n"
          "gen = (i for i in range(3))\n"
          "sock = socket.socket()\n"
          "thread = threading.Thread(target=lambda: None)\n"
          "lock = threading.Lock()\nrlock = threading.RLock()\n"
          "fh = open('f.txt', 'w')\n"
          "async def co():\n    pass\n")


def test_unpicklable_names_are_lost_and_the_rest_kept(boxes):
    mod = boxes.new()
    ok(mod, LOSERS + "keep = [1, 2]\nalias = keep\ndef f():\n    return keep\n")
    main = sys.modules["__main__"].__dict__
    try:
        info, path = boxes.save(mod)
    finally:
        main["sock"].close()
        main["fh"].close()
    assert info["lost_names"] == ["fh", "gen", "lock", "rlock", "sock", "thread"]
    assert info["offset"] == 0  # refused by type up front: no failed pass
    _, got = boxes.load(info, path)
    ns = sys.modules["__main__"].__dict__
    assert got == {"lost_names": info["lost_names"], "error": None}
    assert ns["keep"] is ns["alias"] and ns["f"]() == [1, 2]
    assert ns["socket"] is sys.modules["socket"] and callable(ns["co"])
    assert not set(info["lost_names"]) & set(ns)


def test_nested_unpicklables_take_the_fallback(boxes):
    mod = boxes.new()
    ok(mod, "import threading\n"
            "big = bytes(1 << 20)\n"
            "locks = [threading.Lock()]\n"
            "class Bad:\n    def __reduce__(self):\n        raise TypeError('no')\n"
            "bad = {'v': Bad()}\n"
            "keep = [1, 2]\nalias = keep\nholder = {'k': keep}\n")
    info, path = boxes.save(mod)
    assert info["lost_names"] == ["bad", "locks"]
    assert info["offset"] > 0  # the failed first pass is in the stream, before the valid one
    assert info["offset"] + info["size"] == path.stat().st_size
    _, got = boxes.load(info, path)
    ns = sys.modules["__main__"].__dict__
    assert got == {"lost_names": ["bad", "locks"], "error": None}
    assert ns["keep"] is ns["alias"] is ns["holder"]["k"]
    assert ns["big"] == bytes(1 << 20) and isinstance(ns["Bad"], type)
    assert "locks" not in ns and "bad" not in ns


def test_too_deep_a_value_is_lost(boxes):
    info, _, got, ns = boxes.roundtrip("deep = []\ncur = deep\nfor _i in range(100_000):\n"
                                       "    cur.append([])\n    cur = cur[0]\nx = 1\n")
    assert info["lost_names"] == ["deep"]
    assert got["error"] is None and ns["x"] == 1 and ns["cur"] == [] and ns["_i"] == 99_999


def test_value_that_fails_only_once_is_saved_on_the_next_pass(boxes):
    info, _, got, ns = boxes.roundtrip(
        "class Flaky:\n    calls = 0\n    def __reduce__(self):\n        Flaky.calls += 1\n"
        "        if Flaky.calls == 1:\n            raise TypeError('first time')\n"
        "        return (Flaky, ())\nflaky = Flaky()\nx = 1\n")
    assert info["lost_names"] == []  # (offset 0: the failed pass wrote nothing out yet)
    assert type(ns["flaky"]) is ns["Flaky"] and ns["x"] == 1


def test_joint_culprit_is_bisected(boxes):
    mod = boxes.new()

    class Pickler:  # fails when "a" and "c" are pickled together, as only a whole state can
        def __init__(self, file, ns):
            pass

        def dump(self, obj):
            if isinstance(obj, dict) and {"a", "c"} <= obj.keys():
                raise TypeError("together")

    state = dict.fromkeys("abcde")
    assert mod.saved._joint_culprit(Pickler, object, {}, state) == ["c"]
    assert mod.saved._joint_culprit(Pickler, object, {}, dict.fromkeys("bcd")) == []


def test_reference_to_a_main_name_is_lost_not_fatal(boxes):
    # An object that pickles as "__main__.<name>" could not be found while the pickle loads.
    info, _, got, ns = boxes.roundtrip(
        "class Single:\n    def __reduce__(self):\n        return 'ONE'\n"
        "ONE = Single()\nholder = [ONE]\nx = 5\n")
    assert info["lost_names"] == ["ONE", "holder"]
    assert got["error"] is None and ns["x"] == 5


def test_snapshot_prints_nothing_and_leaves_the_namespace(boxes, capfd):
    mod = boxes.new()
    ok(mod, "import warnings\nclass Noisy:\n    def __reduce__(self):\n"
            "        warnings.warn('careful')\n        return (Noisy, ())\n"
            "n = Noisy()\nimport threading\nbad = [threading.Lock()]\ngen = (i for i in [])\n"
            "x = [1]\ndef f():\n    return x\n")
    capfd.readouterr()
    main = sys.modules["__main__"]
    before = dict(main.__dict__)
    modules_before = dict(sys.modules)
    info, _ = boxes.save(mod)
    out, err = capfd.readouterr()
    assert out == "" and err == ""
    assert sys.modules["__main__"] is main
    assert main.__dict__.keys() == before.keys()
    assert all(main.__dict__[k] is v for k, v in before.items())
    assert sys.modules.keys() == modules_before.keys()
    assert info["lost_names"] == ["bad", "gen"]


def test_snapshot_result_fields(boxes):
    mod = boxes.new()
    ok(mod, "x = 1")
    ok(mod, "y = 2")
    bash = {"cwd": "/work/sub", "env": {"A": "1"}}
    info, path = boxes.save(mod, bash)
    assert info["count"] == 2 and info["bash"] == bash
    assert info["offset"] == 0 and info["size"] == path.stat().st_size


def test_snapshot_of_an_empty_namespace(boxes):
    mod = boxes.new()
    info, path = boxes.save(mod)
    assert info["lost_names"] == [] and info["modules"] == {} and info["size"] > 0
    _, got = boxes.load(info, path)
    assert got == {"lost_names": [], "error": None}


def test_snapshot_raises_when_the_pipe_is_gone(boxes):
    mod = boxes.new()
    ok(mod, "x = bytes(1 << 20)")
    r, w = os.pipe()
    os.close(r)
    with pytest.raises(BrokenPipeError):
        mod.snapshot(w, None)
    assert_closed(w)
    assert sys.modules.get("_airlock_state") is None


# --- restore --------------------------------------------------------------------------------------

def test_execution_count_restored(boxes):
    mod = boxes.new()
    for code in ("a = 1", "b = 2", "c = 3"):
        ok(mod, code)
    info, path = boxes.save(mod)
    assert info["count"] == 3
    new, _ = boxes.load(info, path)
    assert new.run_cell("a + b + c")["execution_count"] == 4


def test_truncated_state_keeps_the_modules(boxes):
    pytest.importorskip("numpy")
    mod = boxes.new()
    ok(mod, "import numpy as np\nimport math\ndata = np.arange(100_000)\n")
    info, path = boxes.save(mod)
    raw = path.read_bytes()
    for cut in (len(raw) // 2, len(raw) - 1):
        path.write_bytes(raw[:cut])
        _, got = boxes.load(info, path)
        ns = sys.modules["__main__"].__dict__
        assert got["error"].startswith("the saved Python variables could not be loaded: ")
        assert "\n" not in got["error"]
        assert got["lost_names"] == []
        assert ns["np"] is sys.modules["numpy"] and ns["math"] is sys.modules["math"]
        assert "data" not in ns


def test_truncated_pickle_with_a_wrong_size(boxes):
    mod = boxes.new()
    ok(mod, "data = list(range(10000))")
    info, path = boxes.save(mod)
    path.write_bytes(path.read_bytes()[:100])
    info["size"] = 100  # sizes agree, the pickle itself is cut
    _, got = boxes.load(info, path)
    assert got["error"].startswith("the saved Python variables could not be loaded: ")


def test_garbage_state(boxes):
    mod = boxes.new()
    ok(mod, "import math\nx = 1")
    info, path = boxes.save(mod)
    path.write_bytes(os.urandom(info["size"]))
    _, got = boxes.load(info, path)
    assert got["error"].startswith("the saved Python variables could not be loaded: ")
    assert sys.modules["__main__"].__dict__["math"] is sys.modules["math"]


def test_state_that_is_not_a_dict(boxes):
    import pickle

    path = boxes.tmp_path / "not-a-dict"
    data = pickle.dumps([1, 2], protocol=5)
    # The state's layout (see _write_buffers): the pickle, no buffers, then the trailer.
    data += len(data).to_bytes(8, "little") + (0).to_bytes(8, "little") + b"ALSTATE1"
    path.write_bytes(data)
    info = {"offset": 0, "size": len(data), "modules": {}, "lost_names": ["old"], "count": 7}
    new, got = boxes.load(info, path)
    assert got["lost_names"] == ["old"]
    assert got["error"] == ("the saved Python variables could not be loaded: TypeError: the "
                            "saved state is a list, not a dict of names")
    assert new.run_cell("1")["execution_count"] == 8


def test_restore_with_no_pickle(boxes):
    path = boxes.tmp_path / "empty"
    path.write_bytes(b"")
    info = {"offset": 0, "size": 0, "modules": {"m": "math"}, "lost_names": [], "count": None}
    _, got = boxes.load(info, path)
    assert got == {"lost_names": [], "error": None}
    assert sys.modules["__main__"].__dict__["m"] is sys.modules["math"]


def test_restore_never_raises_on_bad_arguments(boxes):
    mod = boxes.new()
    got = mod.restore(-1, 0, 10, {"m": "math"}, [], 1, False)
    assert got["error"].startswith("the saved Python variables could not be loaded: OSError")
    assert sys.modules["__main__"].__dict__["m"] is sys.modules["math"]


def test_reseed(boxes):
    np = pytest.importorskip("numpy")
    code = ("import random\nimport numpy as np\nr = random.Random(1234)\n"
            "g = np.random.default_rng(1234)\nrs = np.random.RandomState(1234)\n"
            "rs_pcg = np.random.RandomState(np.random.PCG64(1))\nsame = r\n")
    mod = boxes.new()
    ok(mod, code)
    info, path = boxes.save(mod)
    main = sys.modules["__main__"].__dict__
    expected = {"r": [main["r"].random() for _ in range(3)], "g": main["g"].random(3).tolist(),
                "rs": main["rs"].rand(3).tolist(), "rs_pcg": main["rs_pcg"].rand(3).tolist()}

    def draws(ns):
        return {"r": [ns["r"].random() for _ in range(3)], "g": ns["g"].random(3).tolist(),
                "rs": ns["rs"].rand(3).tolist(), "rs_pcg": ns["rs_pcg"].rand(3).tolist()}

    boxes.load(info, path, reseed=False)
    ns = sys.modules["__main__"].__dict__
    assert ns["same"] is ns["r"]
    assert draws(ns) == expected

    boxes.load(info, path, reseed=True)
    ns = sys.modules["__main__"].__dict__
    fresh = draws(ns)
    for key in expected:
        assert fresh[key] != expected[key], key
    assert type(ns["g"].bit_generator) is np.random.PCG64

    random.seed(99)
    module_level = [random.random() for _ in range(2)]
    random.seed(99)
    boxes.load(info, path, reseed=True)
    assert [random.random() for _ in range(2)] != module_level  # reseed() ran as well


def test_fork_children_are_independent(boxes):
    mod = boxes.new()
    ok(mod, "shared = [1]\n")
    info, path = boxes.save(mod)
    boxes.load(info, path)
    first = sys.modules["__main__"].__dict__
    first["shared"].append(2)
    boxes.load(info, path)
    second = sys.modules["__main__"].__dict__
    assert second["shared"] == [1]


def test_pickle_is_not_imported_at_start():
    import subprocess

    code = (f"import importlib.util, sys\n"
            f"spec = importlib.util.spec_from_file_location('airlock_cell', "
            f"{str(SRC / '__init__.py')!r}, submodule_search_locations=[{str(SRC)!r}])\n"
            f"mod = importlib.util.module_from_spec(spec)\n"
            f"sys.modules['airlock_cell'] = mod\n"
            f"spec.loader.exec_module(mod)\n"
            f"print([m for m in ('pickle', '_pickle', 'select') if m in sys.modules])\n")
    out = subprocess.run([sys.executable, "-B", "-c", code], capture_output=True, text=True,
                         check=True)
    assert out.stdout.strip() == "[]"
