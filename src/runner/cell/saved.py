"""Saved Python state for stop, resume and fork: snapshot() and restore()."""

import os
import sys

from . import context as ctx
from . import ipython
from .context import _HIDDEN_VALUE, _clean
from .execute import _user_namespace
from .pip import _refresh_sites
from .rich import _patch_pyplot
from .setup import reseed


#
# snapshot() writes the user's variables as ONE pickle (protocol 5, the C pickler) to a pipe to
# the daemon, which stores the stream as python.state; restore() loads it in a new sandbox (a
# resumed session, or each child of a fork). Values are pickled as usual, with a reducer_override
# for what plain pickle cannot save or would save by a name that does not exist yet on restore:
#
#   - functions, lambdas and classes defined in cells (__module__ "__main__") by value: code via
#     marshal, globals = the live __main__ namespace on load, so identity between names holds and
#     a restored function sees the restored variables;
#   - module objects nested in values as an import by name (top-level ones are not pickled at
#     all: they are returned in "modules" and imported again, subject to the allow-list);
#   - staticmethod, classmethod, property, cached_property, lru_cache wrappers, mappingproxy,
#     TypeVar, the dataclasses sentinels and the types that only the types module names.
#
# Loading runs user code (a __reduce__'s rebuild function, __setstate__, a metaclass) that may
# look up globals of __main__: the pickle binds each name in __main__ as soon as its value is
# built (_Bind), classes and functions first, so such code finds what it needs; a load that fails
# takes those names out again. Hooks that ran when the session defined a class
# (__init_subclass__ of a cell's class) do not run again when it is rebuilt: what they did is in
# the saved state already.
#
# While pickling, sys.modules["__main__"] is an empty stand-in: anything that would still be
# saved as a reference to a name of __main__ (which does not exist yet while the pickle loads)
# fails then, in snapshot(), and its name is reported lost, instead of failing the whole restore.
# The rebuild helpers are named in the pickle as globals of a pseudo-module, _STATE_MODULE
# (registered only while pickling; restore() resolves it itself), so the stream does not depend
# on the name under which the runner imported this module.

_STATE_MODULE = "_airlock_state"

# Names never saved: the interpreter and _user_namespace() set them up in every sandbox.
_UNSAVED = frozenset({"__builtins__", "__name__", "__doc__", "__loader__", "__spec__",
                      "__package__", "__file__", "__cached__", "__warningregistry__",
                      _HIDDEN_VALUE})

# Objects that cannot be pickled, by the module that defines their type (looked up only in
# modules already loaded): such a name is reported lost without costing a failed pickling pass.
_UNPICKLABLE = (
    ("types", ("GeneratorType", "CoroutineType", "AsyncGeneratorType", "FrameType",
               "TracebackType", "CodeType")),
    ("builtins", ("memoryview",)),
    ("_thread", ("LockType", "RLock")),
    ("_io", ("FileIO", "BufferedReader", "BufferedWriter", "BufferedRandom", "BufferedRWPair",
             "TextIOWrapper")),
    ("weakref", ("ref", "ProxyType", "CallableProxyType")),
    ("socket", ("socket",)),
    ("threading", ("Thread", "Condition", "Event", "Semaphore", "Barrier")),
    ("queue", ("Queue",)),
    ("subprocess", ("Popen",)),
    ("select", ("epoll",)),
    ("selectors", ("BaseSelector",)),
    ("mmap", ("mmap",)),
    ("sqlite3", ("Connection", "Cursor")),
    ("asyncio", ("AbstractEventLoop", "Future")),
    ("concurrent.futures", ("Executor", "Future")),
)

# A snapshot gives up after this many failed passes and saves {}, all names lost: every failed
# pass drops at least one culprit, unless pickling failed for no reason that can be found again
# (a __reduce__ that fails at random), so only such a state gets there.
_STATE_ATTEMPTS = 4

# Metaclasses whose classes are rebuilt by value from cells: plain classes, ABCs (also typing's
# Protocol) and enums are; other library metaclasses (ORMs, model frameworks) register or check
# classes as they are created, which a rebuilt skeleton would not survive: their classes are
# reported lost in snapshot() rather than failing in restore().
_METACLASS_MODULES = frozenset({"builtins", "abc", "typing", "enum", "__main__"})

# Class attributes that are not copied onto a rebuilt class: type() makes them itself.
_CLASS_SKIP = frozenset({"__dict__", "__weakref__", "__module__", "__qualname__", "__slots__",
                         "__orig_bases__", "__doc__", "_abc_impl"})
_ENUM_SKIP = frozenset({"__new__", "__init__", "_generate_next_value_", "_member_map_",
                        "_member_names_", "_member_type_", "_new_member_", "_unhashable_values_",
                        "_use_args_", "_value2member_map_", "_value_repr_", "_all_bits_",
                        "_boundary_", "_flag_mask_", "_inverted_", "_singles_mask_"})

_state_classes = None  # (Pickler, Unpickler, writer, null sink), built on first use


def snapshot(fd, bash_state, room=None):
    """Write the variables of __main__ as one pickle to fd (a pipe: written in order, never
    sought) and close fd, also on error. Returns {"offset", "size", "lost_names", "modules",
    "count", "bash"}: the valid pickle is the size bytes from offset (0 unless a first pass failed
    part way, see _write_state), modules maps names bound to modules to the module to import
    again, lost_names lists the names that could not be saved, bash is bash_state as given.
    Prints nothing and leaves the namespace as it was. Raises OSError when fd cannot be written
    (the daemon gone, a full disk behind the pipe).

    room (a fork's shared state): fd is a new memfd of the daemon's, written from offset 0 by
    this process, so that its pages are charged to this session's memory cgroup; at most room
    bytes go into it, and the buffers start on page boundaries so that the children can map them
    (layout 2, see _write_buffers). A state that would pass room is not written further: the
    answer is then {"no_room": True, "error": ...}, and the daemon saves the classic way."""
    if room is not None and (type(room) is not int or room < 0):
        _close(fd)
        raise ValueError("room must be a number of bytes")
    try:
        main = sys.modules.get("__main__")
        ns = getattr(main, "__dict__", None)
        if not isinstance(ns, dict):
            ns = {}
        state, modules, lost = _split_namespace(ns)
        had_registry = "__warningregistry__" in ns
        try:
            offset, size = _write_state(fd, ns, state, lost, room)
        except _NoRoom as e:
            return {"no_room": True, "error": str(e)}
        finally:
            # A warning from user code run by pickling (a __reduce__) leaves a registry behind.
            if not had_registry:
                ns.pop("__warningregistry__", None)
    finally:
        _close(fd)
    lost.discard("_")  # the last value is a convenience: no one asked to keep it
    return {"offset": offset, "size": size, "lost_names": sorted(lost), "modules": modules,
            "count": ctx._count, "bash": bash_state}


def restore(fd, offset, size, modules, lost_names, count, reseed):
    """Load what snapshot() saved into __main__, in a new sandbox: import modules ({name:
    module}) again, except those the allow-list refuses or that fail to import, then (size > 0)
    the pickle of size bytes at offset in fd, and set the execution count. reseed (a child of a
    fork) gives the random generators of the namespace and of random/numpy fresh seeds. Closes
    fd. Never raises: returns {"lost_names": the given ones plus the names not restored, "error":
    None, or one line saying why the variables could not be loaded (the imported modules stay)}.
    """
    lost = set()
    error = None
    try:
        lost.update(str(n) for n in lost_names or ())
        ns = _user_namespace()
        _refresh_sites()  # the session's pip installs are back in /work: import from there
        lost.update(_import_modules(ns, modules or {}))
        if size and size > 0:
            try:
                ns.update(_load_state(ns, fd, offset, size))
            except BaseException as e:  # corrupt or truncated state, or a __setstate__ that raised
                error = _clean("the saved Python variables could not be loaded: "
                               f"{type(e).__name__}: {_one_line(e)}")
        if type(count) is int:
            ctx._count = count
        if reseed:
            _reseed_namespace(ns)
            _reseed_process()
    except BaseException as e:
        error = error or _clean(f"the saved Python variables could not be restored: "
                                f"{type(e).__name__}: {_one_line(e)}")
    finally:
        _close(fd)
    return {"lost_names": sorted(lost), "error": error}


def warm():
    """In the zygote, before it forks (execute.zygote_warmup): one save and load of a small state
    with a numpy array and a DataFrame, in memory, so that what a first load builds lazily (the
    pickler classes, the rebuild paths of arrays and DataFrames and the modules they import)
    exists before the fork and is shared by every session, instead of being built again in each
    child of a fork while the fork waits. Leaves nothing behind; never raises."""
    import io

    global _bound
    np, pd = sys.modules.get("numpy"), sys.modules.get("pandas")
    state = {}
    if np is not None:
        state["_airlock_warm_array"] = np.arange(16.0)
        if pd is not None:
            state["_airlock_warm_frame"] = pd.DataFrame({"x": np.arange(4.0), "y": np.arange(4)})
    main = sys.modules.get("__main__")
    ns = getattr(main, "__dict__", None)
    if not isinstance(ns, dict):
        return
    try:
        pickler, unpickler, _writer, _sink = _classes()
        out, buffers = io.BytesIO(), []
        saved = _enter_pickling()
        try:
            pickler(out, ns, buffers.append).dump(_bindings(state))
        finally:
            _leave_pickling(saved)
        views = [memoryview(bytearray(b.raw())) for b in buffers]
        _bound = []
        try:
            unpickler(io.BytesIO(out.getvalue()), buffers=views).load()
        finally:
            for name, had, old in reversed(_bound):
                if had:
                    ns[name] = old
                else:
                    ns.pop(name, None)
            _bound = None
    except Exception:
        pass


# restore() has a parameter named reseed.
_reseed_process = reseed

def _close(fd):
    try:
        os.close(fd)
    except (OSError, TypeError):
        pass


def _one_line(e):
    try:
        text = str(e)
    except Exception:
        text = ""
    return " ".join(text.split()) or "(no message)"


# --- saving

def _split_namespace(ns):
    """(state to pickle, {name: module name}, lost names) for the namespace ns."""
    unpicklable = _unpicklable_types()
    module_type = type(sys)
    state, modules, lost = {}, {}, set()
    for name, value in list(ns.items()):  # a thread of the session may change ns meanwhile
        if type(name) is not str or name in _UNSAVED or ipython.is_unsaved(name):
            continue
        if name == "__annotations__" and type(value) is dict and not value:
            continue
        if name == "display" and _is_our_display(value):
            continue
        if _isinstance(value, module_type):
            modname = getattr(value, "__name__", None)
            # A module made at run time cannot be imported again.
            if type(modname) is str and sys.modules.get(modname) is value:
                modules[name] = modname
            else:
                lost.add(name)
        elif _isinstance(value, unpicklable):
            lost.add(name)
        else:
            state[name] = value
    return state, modules, lost


def _isinstance(value, types):
    try:
        return isinstance(value, types)
    except Exception:  # a __class__ property that raises: let pickling decide
        return False


def _is_our_display(value):
    try:
        return getattr(value, "_airlock_display", False) is True
    except Exception:
        return False


def _unpicklable_types():
    found = []
    for modname, names in _UNPICKLABLE:
        mod = sys.modules.get(modname)
        for name in names if mod is not None else ():
            t = getattr(mod, name, None)
            if isinstance(t, type):
                found.append(t)
    return tuple(found)


def _write_state(fd, ns, state, lost, room=None):
    """Pickle state to fd; returns (offset, size) of the valid pickle. The first pass pickles the
    whole state straight to fd (big arrays go from their memory to the pipe without a copy). If
    it fails, its partial bytes are already in the stream: each value is then pickled alone into
    a sink that only counts to find the culprits, which go to lost, and the state is written
    again after those bytes. room: see snapshot() (raises _NoRoom past it)."""
    pickler, _unpickler, writer, null_sink = _classes()
    out = writer(fd, room)
    aligned = room is not None
    saved = _enter_pickling()
    try:
        for _attempt in range(_STATE_ATTEMPTS):
            start = out.count
            buffers = []
            try:
                pickler(out, ns, buffers.append).dump(_bindings(state))
                _write_buffers(out, buffers, out.count - start, start, aligned)
                return start, out.count - start
            except Exception:
                if out.error is not None:
                    raise out.error from None
            bad = _culprits(pickler, null_sink, ns, state) or _joint_culprit(pickler, null_sink,
                                                                             ns, state)
            for name in bad:
                del state[name]
                lost.add(name)
        lost.update(state)
        start = out.count
        pickler(out, ns).dump({})
        _write_buffers(out, [], out.count - start, start, aligned)
        return start, out.count - start
    finally:
        _leave_pickling(saved)


# The state is the pickle, then the raw bytes of its out-of-band buffers (protocol 5: the data of
# numpy arrays, so of DataFrames, goes there without being copied into the pickle), then a
# trailer. Layout 1 (a stop's state, streamed down a pipe): the buffers follow each other, and the
# trailer is each buffer's length, the pickle's length and the buffer count (8 bytes each, little
# endian) and the magic ALSTATE1. Loading reads each buffer straight into memory of its own
# (numpy's, which asks for huge pages for big arrays), and the arrays are built on it without
# another copy. Layout 2 (a fork's shared state, written into a memfd from offset 0): each buffer
# starts at a multiple of _ALIGN_BIG (4 KiB, a page: a child maps the file and builds its arrays
# on the mapping) if it is at least _ALIGN_BIG_MIN bytes long, else of 64 (numpy's alignment),
# zeros between; the trailer is each buffer's (offset from the pickle's start, length), then the
# pickle's length and the count, and the magic ALSTATE2.
_TRAILER_MAGIC = b"ALSTATE1"
_TRAILER_MAGIC_SHARED = b"ALSTATE2"
_ALIGN_BIG = 4096
_ALIGN_BIG_MIN = 65536
_ALIGN_SMALL = 64


class _NoRoom(Exception):
    """The shared state would pass the room the daemon gave (see snapshot())."""


def _write_buffers(out, buffers, pickle_len, start=0, aligned=False):
    table = []
    for b in buffers:
        raw = b.raw()
        if aligned:
            step = _ALIGN_BIG if raw.nbytes >= _ALIGN_BIG_MIN else _ALIGN_SMALL
            pad = -out.count % step
            if pad:
                out.write(bytes(pad))
            table.append((out.count - start).to_bytes(8, "little"))
        table.append(raw.nbytes.to_bytes(8, "little"))
        out.write(raw)
    out.write(b"".join(table) + pickle_len.to_bytes(8, "little")
              + len(buffers).to_bytes(8, "little")
              + (_TRAILER_MAGIC_SHARED if aligned else _TRAILER_MAGIC))


def _read_exact(fd, view, pos):
    """Fills view from fd at pos (pread, so the fd's offset does not matter)."""
    done = 0
    while done < len(view):
        n = os.preadv(fd, [view[done:]], pos + done)
        if n <= 0:
            raise EOFError("the saved state ends early")
        done += n


def _read_state_parts(fd, offset, size):
    """(pickle bytes, [writable buffers]) of the state at offset in fd."""
    if size < 24:
        raise EOFError("the saved state is too short")
    trailer = bytearray(24)
    _read_exact(fd, memoryview(trailer), offset + size - 24)
    magic = bytes(trailer[16:])
    if magic not in (_TRAILER_MAGIC, _TRAILER_MAGIC_SHARED):
        raise ValueError("the saved state has no valid trailer")
    shared = magic == _TRAILER_MAGIC_SHARED
    pickle_len = int.from_bytes(trailer[0:8], "little")
    count = int.from_bytes(trailer[8:16], "little")
    entry = 16 if shared else 8
    table_len = entry * count
    if count > size or pickle_len + table_len + 24 > size:
        raise ValueError("the saved state's trailer does not match its size")
    table = bytearray(table_len)
    _read_exact(fd, memoryview(table), offset + size - 24 - table_len)
    numbers = [int.from_bytes(table[i:i + 8], "little") for i in range(0, table_len, 8)]
    if shared:
        places = list(zip(numbers[0::2], numbers[1::2]))
        end = pickle_len
        for at, n in places:  # in order, apart, between the pickle and the table
            if at < end or at + n > size - 24 - table_len:
                raise ValueError("the saved state's buffers do not fit in it")
            end = at + n
    else:
        places, at = [], pickle_len
        for n in numbers:
            places.append((at, n))
            at += n
        if pickle_len + sum(numbers) + table_len + 24 != size:
            raise ValueError("the saved state's buffers do not add up to its size")
    data = bytearray(pickle_len)
    _read_exact(fd, memoryview(data), offset)
    mapped = _map_shared(fd, offset + size) if shared and places else None
    if mapped is not None:
        # Copy-on-write views of the parent's pages: nothing is read or copied now, a write
        # gives this sandbox its own copy of that page (charged to it), and no one else sees it.
        return data, [mapped[offset + at:offset + at + n] for at, n in places]
    np = sys.modules.get("numpy")
    buffers = []
    for at, n in places:
        # numpy's allocator madvises big blocks for huge pages: one fault per 2 MiB instead of
        # one per 4 KiB, which is most of the cost of bringing a big array back.
        buf = np.empty(n, dtype=np.uint8) if np is not None and n >= (1 << 20) else bytearray(n)
        view = memoryview(buf).cast("B") if np is not None and n >= (1 << 20) else memoryview(buf)
        _read_exact(fd, view, offset + at)
        buffers.append(buf)
    return data, buffers


def _map_shared(fd, length):
    """A writable view of the first length bytes of fd mapped MAP_PRIVATE, or None when fd is
    not a sealed file (a memfd nobody can write, shrink or grow any more: what the daemon hands
    a fork's children): only then is mapping it safe, since a file that shrank under the mapping
    would kill this process (SIGBUS) and one that is written would change the arrays."""
    import fcntl
    import mmap

    need = fcntl.F_SEAL_WRITE | fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW | fcntl.F_SEAL_SEAL
    try:
        if fcntl.fcntl(fd, fcntl.F_GET_SEALS) & need != need or os.fstat(fd).st_size < length:
            return None
        m = mmap.mmap(fd, length, flags=mmap.MAP_PRIVATE, prot=mmap.PROT_READ | mmap.PROT_WRITE)
    except (OSError, ValueError, AttributeError):
        return None
    return memoryview(m)


def _bindings(state):
    """The state as the pickle carries it: classes and functions first (code run while loading
    the data may need them), each value wrapped so that loading binds its name in __main__."""
    function = type(_bindings)

    def data_last(item):
        value = item[1]
        return not (type(value) is function or _isinstance(value, type))

    return {name: _Bind(name, value) for name, value in sorted(state.items(), key=data_last)}


def _culprits(pickler, null_sink, ns, state):
    """The names whose value fails to pickle on its own."""
    bad = []
    for name, value in state.items():
        try:
            pickler(null_sink(), ns).dump(value)
        except Exception:
            bad.append(name)
    return bad


def _joint_culprit(pickler, null_sink, ns, state):
    """For a state that fails only as a whole: the name whose addition makes the shortest failing
    prefix of the state (bisected), or [] if the whole state pickles now."""
    names = list(state)

    def fails(k):
        try:
            pickler(null_sink(), ns).dump({n: state[n] for n in names[:k]})
            return False
        except Exception:
            return True

    if not fails(len(names)):
        return []
    lo, hi = 1, len(names)  # fails(hi) holds
    while lo < hi:
        mid = (lo + hi) // 2
        if fails(mid):
            hi = mid
        else:
            lo = mid + 1
    return [names[hi - 1]]


def _enter_pickling():
    """Make the rebuild helpers importable by their pseudo-module, hide __main__ (see the section
    comment) and silence warnings while pickling. Returns what _leave_pickling() puts back."""
    import warnings

    helpers = type(sys)(_STATE_MODULE)
    for name, helper in _helpers().items():
        setattr(helpers, name, helper)
    saved = (sys.modules.get(_STATE_MODULE), sys.modules.get("__main__"),
             warnings.catch_warnings())
    saved[2].__enter__()
    warnings.simplefilter("ignore")
    sys.modules[_STATE_MODULE] = helpers
    sys.modules["__main__"] = type(sys)("__main__")
    return saved


def _leave_pickling(saved):
    old_helpers, main, warn = saved
    for name, mod in ((_STATE_MODULE, old_helpers), ("__main__", main)):
        if mod is None:
            sys.modules.pop(name, None)
        else:
            sys.modules[name] = mod
    warn.__exit__(None, None, None)


def _classes():
    """The Pickler and Unpickler subclasses and the two writers, built once (pickle is imported
    only when a state is saved or restored)."""
    global _state_classes
    if _state_classes is None:
        _state_classes = _build_classes()
    return _state_classes


def _build_classes():
    import pickle

    picklebuffer = pickle.PickleBuffer

    class StatePickler(pickle.Pickler):
        def __init__(self, file, ns, buffer_callback=None):
            super().__init__(file, protocol=5, buffer_callback=buffer_callback)
            self.ns = ns
            self.table = _reducers()

        def reducer_override(self, obj):
            # Called for every object but atoms and plain containers: keep it cheap.
            reduce = self.table.get(type(obj))
            if reduce is not None:
                return reduce(self, obj)
            if isinstance(obj, type):
                return _reduce_class(self, obj)
            return NotImplemented

    helpers = _helpers()

    class StateUnpickler(pickle.Unpickler):
        def find_class(self, module, name):
            if module == _STATE_MODULE:
                if name not in helpers:
                    raise pickle.UnpicklingError(f"unknown rebuild helper {name!r}")
                return helpers[name]
            return super().find_class(module, name)

    class FdWriter:
        """The pickler's file: every write goes to fd in full (pipes take partial writes)."""

        __slots__ = ("fd", "count", "error", "room")

        def __init__(self, fd, room=None):
            self.fd = fd
            self.count = 0
            self.error = None
            self.room = room

        def write(self, data):
            view = memoryview(data)
            if view.ndim != 1 or view.itemsize != 1:
                view = picklebuffer(data).raw()  # an array's buffer, passed through as is
            total = view.nbytes
            if self.room is not None and self.count + total > self.room:
                self.error = _NoRoom(f"the saved state passes the {self.room} bytes it may take "
                                     "in the session's memory")
                raise self.error
            done = 0
            try:
                while done < total:
                    try:
                        done += os.write(self.fd, view[done:])
                    except BlockingIOError:
                        _wait_writable(self.fd)
            except OSError as e:
                self.error = e
                raise
            self.count += total
            return total

    class NullSink:
        """A file that only counts: where values are pickled to find the ones that fail."""

        __slots__ = ("count",)

        def __init__(self):
            self.count = 0

        def write(self, data):
            n = memoryview(data).nbytes
            self.count += n
            return n

    return StatePickler, StateUnpickler, FdWriter, NullSink


def _wait_writable(fd):
    import select

    select.select((), (fd,), ())


def _reducers():
    """{type: reduce(pickler, obj)} for StatePickler.reducer_override, for the modules loaded."""
    import types

    table = {
        types.FunctionType: _reduce_function,
        types.CellType: _reduce_cell,
        types.ModuleType: _reduce_module,
        types.MappingProxyType: _reduce_mappingproxy,
        _Marshalled: _reduce_marshalled,
        _Bind: _reduce_bind,
        staticmethod: _reduce_wrapper,
        classmethod: _reduce_wrapper,
        property: _reduce_property,
    }
    functools = sys.modules.get("functools")
    if functools is not None:
        table[functools.cached_property] = _reduce_cached_property
        table[functools._lru_cache_wrapper] = _reduce_lru_cache
    typing = sys.modules.get("typing")
    if typing is not None:
        table[typing.TypeVar] = _reduce_typevar
    dataclasses = sys.modules.get("dataclasses")
    if dataclasses is not None:
        for name in ("MISSING", "KW_ONLY", "_HAS_DEFAULT_FACTORY", "_FIELD", "_FIELD_CLASSVAR",
                     "_FIELD_INITVAR"):
            table[type(getattr(dataclasses, name))] = _reduce_dataclass_sentinel
    return table


class _Marshalled:
    """A code object in a function's pickle, as its marshal bytes."""

    __slots__ = ("data",)

    def __init__(self, data):
        self.data = data


class _Bind:
    """A top-level value of the state, bound to its name in __main__ as soon as it is loaded."""

    __slots__ = ("name", "value")

    def __init__(self, name, value):
        self.name = name
        self.value = value


def _reduce_bind(pickler, obj):
    return _bind, (obj.name, obj.value)


def _reduce_marshalled(pickler, obj):
    import marshal

    return marshal.loads, (obj.data,)


def _reduce_module(pickler, obj):
    import importlib

    # Like any class a pickle names: imported when loaded, not checked against the allow-list.
    name = getattr(obj, "__name__", None)
    if type(name) is not str or sys.modules.get(name) is not obj:
        return NotImplemented  # made at run time: pickle says it cannot
    return importlib.import_module, (name,)


def _reduce_mappingproxy(pickler, obj):
    # A read-only view, as a dataclass field's metadata: a view of a copy is as good.
    return type(obj), (dict(obj),)


def _reduce_wrapper(pickler, obj):
    return type(obj), (obj.__func__,)


def _reduce_property(pickler, obj):
    return property, (obj.fget, obj.fset, obj.fdel, obj.__doc__)


def _reduce_cached_property(pickler, obj):
    return type(obj), (obj.func,), {"attrname": obj.attrname, "__doc__": obj.__doc__}


def _reduce_lru_cache(pickler, obj):
    params = obj.cache_parameters()
    return _make_lru_cache, (obj.__wrapped__, params["maxsize"], params["typed"])


def _reduce_typevar(pickler, obj):
    if obj.__module__ != "__main__":
        return NotImplemented
    import functools

    make = functools.partial(type(obj), obj.__name__, *obj.__constraints__, bound=obj.__bound__,
                             covariant=obj.__covariant__, contravariant=obj.__contravariant__)
    return make, ()


def _reduce_dataclass_sentinel(pickler, obj):
    # dataclasses tells fields apart by the identity of these objects: a copy would not do.
    dataclasses = sys.modules["dataclasses"]
    for name in ("MISSING", "KW_ONLY", "_HAS_DEFAULT_FACTORY", "_FIELD", "_FIELD_CLASSVAR",
                 "_FIELD_INITVAR"):
        if getattr(dataclasses, name) is obj:
            return getattr, (dataclasses, name)
    return NotImplemented


def _found_by_name(obj):
    """Whether pickle finds obj again under its module and qualified name."""
    try:
        found = sys.modules.get(obj.__module__)
        for part in obj.__qualname__.split("."):
            found = getattr(found, part)
        return found is obj
    except Exception:
        return False


def _reduce_function(pickler, f):
    """A function of a cell by value; also one that pickle could not find by name (a closure, a
    method that namedtuple or functools.wraps renamed). Its globals: the live namespace for a
    cell's function, the module for a module's, a copy otherwise (exec in a dict of its own)."""
    if f.__module__ != "__main__" and _found_by_name(f):
        return NotImplemented
    import marshal

    g = f.__globals__
    where = g
    if g is pickler.ns:
        where = None
    else:
        name = g.get("__name__")
        mod = sys.modules.get(name) if type(name) is str else None
        if mod is not None and getattr(mod, "__dict__", None) is g:
            where = name
    args = (_Marshalled(marshal.dumps(f.__code__)), where, f.__name__, f.__closure__)
    state = (f.__defaults__, f.__kwdefaults__, f.__dict__ or None, f.__annotations__ or None,
             f.__doc__, f.__qualname__, f.__module__)
    return _make_function, args, state, None, None, _fill_function


def _reduce_cell(pickler, cell):
    """A closure cell as an object of its own (two closures of one call share it), filled after
    it is memoised: a recursive inner function finds itself through its cell."""
    import types

    try:
        value = cell.cell_contents
    except ValueError:  # empty: the variable was not assigned yet
        return types.CellType, ()
    return types.CellType, (), (None, {"cell_contents": value})


def _reduce_class(pickler, cls):
    """A class of a cell by value: a skeleton made by its metaclass from name, bases and what
    must be there at creation (slots, __orig_bases__, enum members), memoised before the rest of
    its __dict__ is set on it, so that methods, instances and subclasses that refer back to it
    get the same class object."""
    if cls.__module__ != "__main__":
        return _reduce_type_by_name(cls)
    meta = type(cls)
    if getattr(meta, "__module__", None) not in _METACLASS_MODULES:
        import pickle

        raise pickle.PicklingError(f"cannot save class {cls.__qualname__}: its metaclass "
                                   f"{meta.__module__}.{meta.__qualname__} is not supported")
    d = cls.__dict__
    skeleton = {"__module__": "__main__", "__qualname__": cls.__qualname__,
                "__doc__": d.get("__doc__")}
    for key in ("__slots__", "__orig_bases__"):
        if key in d:
            skeleton[key] = d[key]
    member = type(type.__dict__["__dict__"]), type(_Marshalled.data)  # getset, member slots
    state = {k: v for k, v in d.items()
             if k not in _CLASS_SKIP and not (type(v) in member and v.__objclass__ is cls)}
    enum = sys.modules.get("enum")
    if enum is not None and isinstance(cls, enum.EnumMeta):
        return _reduce_enum(cls, meta, skeleton, state)
    return _make_class, (meta, cls.__name__, cls.__bases__, skeleton), state, None, None, \
        _fill_class


def _reduce_enum(cls, meta, skeleton, state):
    """An enum of a cell: its members (aliases included) by value, and the __init__ or __new__
    that makes them, are in the skeleton (the enum machinery builds members at creation)."""
    d = cls.__dict__
    members = [(name, m._value_) for name, m in cls._member_map_.items()]
    if "__init__" in d:
        skeleton["__init__"] = d["__init__"]
    if getattr(d.get("_new_member_"), "__module__", None) == "__main__":
        skeleton["__new__"] = d["_new_member_"]
    state = {k: v for k, v in state.items() if k not in _ENUM_SKIP and k not in cls._member_map_}
    return _make_enum, (meta, cls.__name__, cls.__bases__, skeleton, members), state, None, \
        None, _fill_class


_types_by_name = None  # {type: name in the types module} for types builtins does not name


def _reduce_type_by_name(cls):
    """types.CellType, MappingProxyType...: classes that pickle would look for in builtins."""
    global _types_by_name
    if cls.__module__ != "builtins":
        return NotImplemented
    import types

    if _types_by_name is None:
        _types_by_name = {t: n for n, t in vars(types).items()
                          if isinstance(t, type) and not n.startswith("_")}
    name = _types_by_name.get(cls)
    return NotImplemented if name is None else (getattr, (types, name))


# --- rebuilding (the helpers a pickle names as _STATE_MODULE.<name>)

def _make_function(code, where, name, closure):
    import types

    if where is None:
        g = sys.modules["__main__"].__dict__
    elif type(where) is str:
        import importlib

        g = importlib.import_module(where).__dict__
    else:
        g = where
    return types.FunctionType(code, g, name, None, closure)


def _fill_function(f, state):
    defaults, kwdefaults, fdict, annotations, doc, qualname, module = state
    f.__defaults__ = defaults
    f.__kwdefaults__ = kwdefaults
    if fdict:
        f.__dict__.update(fdict)
    if annotations:
        f.__annotations__ = annotations
    f.__doc__ = doc
    f.__qualname__ = qualname
    f.__module__ = module


_bound = None  # while restore() loads: [(name, had a value, previous value)], undone on failure


def _bind(name, value):
    ns = sys.modules["__main__"].__dict__
    if _bound is not None:
        _bound.append((name, name in ns, ns.get(name)))
    ns[name] = value
    return value


def _make_class(meta, name, bases, skeleton):
    # The __init_subclass__ of a cell's base class ran when the session defined this class: what
    # it did (a registry...) is in the saved state, it must not run again.
    hidden = {}
    for base in bases:
        for klass in getattr(base, "__mro__", ()):
            if (getattr(klass, "__module__", None) == "__main__"
                    and "__init_subclass__" in klass.__dict__):
                hidden[klass] = klass.__dict__["__init_subclass__"]
    for klass in hidden:
        type.__delattr__(klass, "__init_subclass__")
    try:
        return meta(name, bases, dict(skeleton))
    finally:
        for klass, hook in hidden.items():
            type.__setattr__(klass, "__init_subclass__", hook)


def _make_enum(meta, name, bases, skeleton, members):
    ns = meta.__prepare__(name, bases)
    for key, value in skeleton.items():
        ns[key] = value
    for key, value in members:
        ns[key] = value
    return meta(name, bases, ns)


def _fill_class(cls, state):
    for key, value in state.items():
        type.__setattr__(cls, key, value)


def _make_lru_cache(func, maxsize, typed):
    import functools

    return functools.lru_cache(maxsize=maxsize, typed=typed)(func)


def _helpers():
    return {f.__name__: f for f in (_bind, _make_function, _fill_function, _make_class,
                                     _make_enum, _fill_class, _make_lru_cache)}


for _helper in _helpers().values():
    _helper.__module__ = _STATE_MODULE
del _helper


# --- restoring

def _import_modules(ns, modules):
    """Bind each name to its module again; returns the names that were not (refused by the
    allow-list, or failing to import)."""
    import importlib

    lost = []
    for name, modname in modules.items():
        top = str(modname).partition(".")[0]
        if ctx._allowed is not None and top not in ctx._allowed:
            lost.append(str(name))
            continue
        try:
            ns[str(name)] = importlib.import_module(str(modname))
        except BaseException:  # a module may raise anything, SystemExit included
            lost.append(str(name))
    _patch_pyplot()
    return lost


def _load_state(ns, fd, offset, size):
    """The dict pickled at offset in fd (its names already bound in ns, see _Bind); on failure
    ns is as it was before. The garbage collector is held off while loading: it would otherwise
    rescan the new objects again and again."""
    global _bound
    _bound = []
    try:
        return _unpickle_state(fd, offset, size)
    except BaseException:
        for name, had, old in reversed(_bound):
            if had:
                ns[name] = old
            else:
                ns.pop(name, None)
        raise
    finally:
        _bound = None


def _unpickle_state(fd, offset, size):
    import gc
    import stat

    _pickler, unpickler, _writer, _sink = _classes()
    st = os.fstat(fd)
    if stat.S_ISREG(st.st_mode) and st.st_size < offset + size:
        raise EOFError(f"the saved state is truncated ({max(st.st_size - offset, 0)} of "
                       f"{size} bytes)")
    data, buffers = _read_state_parts(fd, offset, size)
    enabled = gc.isenabled()
    gc.disable()
    try:
        import io
        state = unpickler(io.BytesIO(data), buffers=buffers).load()
    finally:
        if enabled:
            gc.enable()
    if type(state) is not dict or not all(type(k) is str for k in state):
        raise TypeError(f"the saved state is a {type(state).__name__}, not a dict of names")
    for name in _UNSAVED:
        state.pop(name, None)
    return state


def _reseed_namespace(ns):
    """Fresh seeds for the random generators bound to names of the namespace (a forked child
    must not replay its parent's, or its siblings', random sequence)."""
    rnd = sys.modules.get("random")
    nprandom = sys.modules.get("numpy.random")
    done = set()
    for value in list(ns.values()):
        if id(value) in done:
            continue
        done.add(id(value))
        try:
            if rnd is not None and isinstance(value, rnd.Random):
                value.seed(os.urandom(32))
            elif nprandom is not None and isinstance(value, nprandom.Generator):
                _fresh_bits(nprandom, value.bit_generator)
            elif nprandom is not None and isinstance(value, nprandom.RandomState):
                _reseed_random_state(nprandom, value)
        except Exception:
            pass


def _fresh_bits(nprandom, bits):
    """Give a numpy bit generator, in place, the state of a new one of its type."""
    seed = nprandom.SeedSequence(int.from_bytes(os.urandom(16), "little"))
    bits.state = type(bits)(seed).state


def _reseed_random_state(nprandom, rs):
    raw = os.urandom(32)
    try:
        rs.seed([int.from_bytes(raw[i:i + 4], "little") for i in range(0, 32, 4)])
    except TypeError:  # only an MT19937 RandomState can be seeded: the others get new bits
        _fresh_bits(nprandom, rs._bit_generator)
