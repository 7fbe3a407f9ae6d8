/* The in-sandbox runner: an embedded CPython (Debian's libpython3.11) serving the wire protocol
 * of base/wire.h on fd 3. It is the only code with <Python.h>; the cell semantics themselves
 * (last-expression value, tracebacks, import policy, rich outputs, files manifest) live in
 * the package airlock_cell (src/runner/cell), compiled into this binary. It trusts nothing it did
 * not start: the driver bounds and validates everything the runner sends back. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <marshal.h>

#include "runner.h"
#include "watch.h"

#include "base/cleanup.h"
#include "base/wire.h"

#include <errno.h>
#include <malloc.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

/* One module of the embedded package (embed.py --package). */
struct embedded_module {
        const char *name;     /* "airlock_cell" or "airlock_cell.NAME" */
        const char *filename; /* "airlock_cell/NAME.py": what tracebacks and co_filename say */
        const unsigned char *source;
        const unsigned char *marshal;
        size_t marshal_len;
};

#include "cell-py.h"

#define CTL_FD 3
#define REQUEST_MAX (32u * 1024u * 1024u)
#define JSON_DEPTH_MAX 64

static void pydecrefp(PyObject **p)
{
        Py_XDECREF(*p);
}
#define _cleanup_pydecref_ _cleanup_(pydecrefp)

/* jansson provides json_decrefp() for cleanup attributes. */
#define _cleanup_json_ _cleanup_(json_decrefp)

static PyObject *cell_module;

/* The profile's output cap: the repr and the rich outputs of a cell are kept within it, so a
 * cell that returns a huge value gets a cut result instead of a killed sandbox. */
static size_t output_max = 1024 * 1024;

/* The profile allows bash: else an R session may execute no program (r.c). */
static bool shell_allowed;

/* ---- Code Mode: the channel airlock_tools calls through ---------------------------------- *
 * A tool request goes up fd 3 as a frame carrying the running exec's id and a call number; the
 * daemon answers it with a "tool_reply" frame before the cell's result. Only the cell's own
 * process may call (a forked child shares fd 3 and would read its parent's replies), and only
 * while the cell runs (between cells the main loop reads fd 3). The lock keeps one exchange
 * at a time on the socket; the cell's end waits for it, so no request follows the result. */
static pthread_mutex_t channel_lock = PTHREAD_MUTEX_INITIALIZER;
static atomic_bool cell_running;
static pid_t cell_pid;
static char cell_id[64];
static long long call_seq;

static void channel_cell_begin(json_t *req)
{
        const char *id = json_string_value(json_object_get(req, "id"));

        (void) snprintf(cell_id, sizeof(cell_id), "%s", id ? id : "");
        cell_pid = getpid();
        atomic_store(&cell_running, true);
}

static void channel_cell_end(void)
{
        atomic_store(&cell_running, false);
        /* A call of another thread that is under way finishes before the result goes up. */
        Py_BEGIN_ALLOW_THREADS(void) pthread_mutex_lock(&channel_lock);
        (void) pthread_mutex_unlock(&channel_lock);
        Py_END_ALLOW_THREADS
}

/* _channel(request_json: str) -> reply_json: str */
static PyObject *channel_request(PyObject *self, PyObject *arg)
{
        _cleanup_json_ json_t *req = NULL, *reply = NULL;
        _cleanup_free_ char *out = NULL;
        const char *text, *op;
        json_error_t jerr;
        Py_ssize_t len;
        long long seq;
        int r = 0;

        (void) self;
        text = PyUnicode_AsUTF8AndSize(arg, &len);
        if (!text)
                return NULL;
        req = json_loadb(text, (size_t) len, 0, &jerr);
        if (!req && json_error_code(&jerr) == json_error_null_character) {
                /* The daemon reads no string with a NUL in it (a frame with one would end the
                 * sandbox as a corrupted channel): refused here, with the reason. */
                PyErr_SetString(PyExc_ValueError,
                                "a tool request cannot carry a NUL character (\\u0000)");
                return NULL;
        }
        if (!json_is_object(req)) {
                PyErr_SetString(PyExc_ValueError, "a tool request is a JSON object");
                return NULL;
        }
        /* The frame goes up with the live exec's id, which the daemon takes as its answer when
         * the op is not a tool request: a "result" or "fatal" sent this way would end the cell
         * in the daemon while the runner still waits here for a tool reply, and then swallow
         * the next cell's request. */
        op = json_string_value(json_object_get(req, "op"));
        if (!op || (strcmp(op, "tool_call") != 0 && strcmp(op, "tool_list") != 0)) {
                PyErr_SetString(PyExc_ValueError,
                                "a tool request's \"op\" is \"tool_call\" or \"tool_list\"");
                return NULL;
        }
        if (atomic_load(&cell_running) && getpid() != cell_pid) {
                PyErr_SetString(PyExc_RuntimeError,
                                "airlock_tools can only be called from the cell's own process, "
                                "not from a subprocess");
                return NULL;
        }
        /* A request past the limit is not sent (one past the daemon's result budget would end
         * the sandbox): the too_large reply the daemon would give is made here. len counts
         * Python's JSON, which jansson's compact text never exceeds but for the id and the
         * call number; the daemon's own check covers those few bytes. */
        if ((size_t) len > WIRE_TOOL_REQUEST_MAX) {
                char msg[160];
                (void) snprintf(msg, sizeof(msg),
                                "the tool call is %zd bytes, over the limit of %u bytes per call",
                                len, WIRE_TOOL_REQUEST_MAX);
                reply = json_pack("{s:s, s:s}", "error", msg, "kind", "too_large");
                out = reply ? json_dumps(reply, JSON_COMPACT) : NULL;
                return out ? PyUnicode_FromString(out) : PyErr_NoMemory();
        }
        seq = ++call_seq;
        if (json_object_set_new(req, "call", json_integer(seq)) < 0)
                return PyErr_NoMemory();
        Py_BEGIN_ALLOW_THREADS(void) pthread_mutex_lock(&channel_lock);
        /* The id is read under the lock, with cell_running: one read before it could be the
         * previous cell's, if the next one began while this thread waited for the lock, and
         * the daemon drops such a frame, leaving this thread (holding the lock) and every
         * later call and the cell's end waiting for a reply that never comes. */
        if (!atomic_load(&cell_running))
                r = -ESRCH;
        else if (json_object_set_new(req, "id", json_string(cell_id)) < 0)
                r = -ENOMEM;
        else
                r = wire_send(CTL_FD, req);
        while (r == 0) {
                json_t *m = NULL;
                r = wire_recv(CTL_FD, WIRE_FRAME_MAX, &m);
                if (r < 0)
                        break;
                if (strcmp(json_string_value(json_object_get(m, "op")) ?: "", "tool_reply") == 0 &&
                    json_integer_value(json_object_get(m, "call")) == seq) {
                        reply = m;
                        break;
                }
                json_decref(m); /* the late reply of a call that gave up */
        }
        (void) pthread_mutex_unlock(&channel_lock);
        Py_END_ALLOW_THREADS if (r == -ESRCH)
        {
                PyErr_SetString(PyExc_RuntimeError,
                                "airlock_tools can only be called while a cell runs (not from a "
                                "thread that outlived its cell)");
                return NULL;
        }
        if (r < 0) {
                PyErr_Format(PyExc_OSError, "the channel to airlock failed: %s", strerror(-r));
                return NULL;
        }
        out = json_dumps(reply, JSON_COMPACT);
        if (!out)
                return PyErr_NoMemory();
        return PyUnicode_FromString(out);
}

static PyMethodDef channel_def = {
        "_channel", channel_request, METH_O,
        "Sends one Code Mode request to airlock and returns its reply."
};

/* _display(output_json: str) -> bool: sends one display of the running cell to the daemon as it
 * is made (a "display" frame, answered by nothing), so a streaming client gets it in order with
 * the cell's stdout; the result still carries every output. Not sent (False) from another
 * process, between cells, or past the profile's output limit, which a frame of the daemon's
 * budget must never pass: the result's own cut reports what is dropped. */
/* Sends the frame and waits for the daemon's acknowledgement: until then nothing more of the
 * cell's output is written, so the daemon shows the display in its place among it. */
static int display_send(json_t *frame)
{
        int r = -ESRCH;

        (void) pthread_mutex_lock(&channel_lock);
        if (atomic_load(&cell_running) &&
            json_object_set_new(frame, "id", json_string(cell_id)) == 0)
                r = wire_send(CTL_FD, frame);
        while (r == 0) {
                json_t *m = NULL;
                bool ack;

                r = wire_recv(CTL_FD, WIRE_FRAME_MAX, &m);
                if (r < 0)
                        break;
                ack = strcmp(json_string_value(json_object_get(m, "op")) ?: "", "display_ack") == 0;
                json_decref(m); /* else the late reply of a tool call that gave up */
                if (ack)
                        break;
        }
        (void) pthread_mutex_unlock(&channel_lock);
        return r;
}

static PyObject *display_frame(PyObject *self, PyObject *arg)
{
        _cleanup_json_ json_t *frame = NULL;
        PyThreadState *ts;
        const char *text;
        Py_ssize_t len;
        int r;

        (void) self;
        text = PyUnicode_AsUTF8AndSize(arg, &len);
        if (!text)
                return NULL;
        if ((size_t) len > output_max || getpid() != cell_pid || !atomic_load(&cell_running))
                Py_RETURN_FALSE;
        frame = json_loadb(text, (size_t) len, 0, NULL);
        if (!json_is_object(frame) || json_object_set_new(frame, "op", json_string("display")) < 0)
                Py_RETURN_FALSE;
        ts = PyEval_SaveThread();
        r = display_send(frame);
        PyEval_RestoreThread(ts);
        return PyBool_FromLong(r >= 0);
}

static PyMethodDef display_def = {
        "_display", display_frame, METH_O,
        "Sends one display of the running cell to airlock as it is made."
};

static int send_fatal(const char *what, const char *detail)
{
        char msg[1024];
        json_t *o;
        int r;

        (void) snprintf(msg, sizeof(msg), "%s%s", what, detail ? detail : "");
        o = json_pack("{s:s, s:s}", "op", "fatal", "message", msg);
        r = o ? wire_send(CTL_FD, o) : -ENOMEM;
        json_decref(o);
        return r;
}

/* Describes the pending Python exception in one line and clears it. */
static void python_error_string(char *buf, size_t size)
{
        PyObject *type, *value, *tb;
        _cleanup_pydecref_ PyObject *s = NULL;
        const char *text = NULL;

        PyErr_Fetch(&type, &value, &tb);
        if (value)
                s = PyObject_Str(value);
        if (s)
                text = PyUnicode_AsUTF8(s);
        (void) snprintf(buf, size, "%s: %s", type ? ((PyTypeObject *) type)->tp_name : "error",
                        text ? text : "?");
        Py_XDECREF(type);
        Py_XDECREF(value);
        Py_XDECREF(tb);
        PyErr_Clear();
}

static json_t *py_to_json(PyObject *o, int depth);

static json_t *py_str_to_json(PyObject *o)
{
        _cleanup_pydecref_ PyObject *bytes = NULL;

        /* Lone surrogates cannot be UTF-8: replace them rather than fail the whole result. */
        bytes = PyUnicode_AsEncodedString(o, "utf-8", "replace");
        if (!bytes) {
                PyErr_Clear();
                return json_string("<unencodable>");
        }
        return json_stringn(PyBytes_AS_STRING(bytes), (size_t) PyBytes_GET_SIZE(bytes));
}

static json_t *py_to_json(PyObject *o, int depth)
{
        if (depth > JSON_DEPTH_MAX)
                return json_null();
        if (o == Py_None)
                return json_null();
        if (PyBool_Check(o))
                return json_boolean(o == Py_True);
        if (PyLong_Check(o)) {
                long long v = PyLong_AsLongLong(o);
                if (v == -1 && PyErr_Occurred()) {
                        PyErr_Clear();
                        return json_null();
                }
                return json_integer(v);
        }
        if (PyFloat_Check(o))
                return json_real(PyFloat_AS_DOUBLE(o));
        if (PyUnicode_Check(o))
                return py_str_to_json(o);
        if (PyList_Check(o) || PyTuple_Check(o)) {
                json_t *arr = json_array();
                Py_ssize_t n = PySequence_Fast_GET_SIZE(o);
                for (Py_ssize_t i = 0; arr && i < n; i++) {
                        /* Borrowed reference from the list or tuple. */
                        PyObject *item = PySequence_Fast_GET_ITEM(o, i);
                        json_array_append_new(arr, py_to_json(item, depth + 1));
                }
                return arr;
        }
        if (PyDict_Check(o)) {
                json_t *obj = json_object();
                PyObject *key, *value; /* borrowed */
                Py_ssize_t pos = 0;
                while (obj && PyDict_Next(o, &pos, &key, &value)) {
                        const char *k;
                        if (!PyUnicode_Check(key))
                                continue;
                        k = PyUnicode_AsUTF8(key);
                        if (!k) {
                                PyErr_Clear();
                                continue;
                        }
                        json_object_set_new(obj, k, py_to_json(value, depth + 1));
                }
                return obj;
        }
        return json_null();
}

static PyObject *json_strv_to_py(json_t *arr)
{
        PyObject *list;
        size_t i;
        json_t *v;

        if (!json_is_array(arr))
                Py_RETURN_NONE;
        list = PyList_New(0);
        if (!list)
                return NULL;
        json_array_foreach (arr, i, v) {
                PyObject *s;
                if (!json_is_string(v))
                        continue;
                s = PyUnicode_FromString(json_string_value(v));
                if (!s || PyList_Append(list, s) < 0) {
                        Py_XDECREF(s);
                        Py_DECREF(list);
                        return NULL;
                }
                Py_DECREF(s);
        }
        return list;
}

/* One module's code: the build compiled it with the same Python, but a different minor version
 * (a changed libpython) means the bytecode cannot be used, so then the source is compiled. */
static PyObject *embedded_code(const struct embedded_module *m)
{
        PyObject *code = NULL;

        if ((PY_VERSION_HEX & 0xffff0000) == CELL_PY_SOURCE_PY_VERSION)
                code = PyMarshal_ReadObjectFromString((const char *) m->marshal,
                                                      (Py_ssize_t) m->marshal_len);
        if (!code) {
                PyErr_Clear();
                code = Py_CompileString((const char *) m->source, m->filename, Py_file_input);
        }
        return code;
}

/* Executes the package's modules in the order embed.py wrote them (each imports only the ones
 * before it), as airlock_cell.NAME in sys.modules, then __init__ in the package itself, which has
 * an empty __path__: nothing of it is ever looked for on disk. Returns a new reference to the
 * package, or NULL with a Python error set. */
static PyObject *load_cell_package(void)
{
        const size_t n = sizeof(cell_py_source) / sizeof(cell_py_source[0]);
        const struct embedded_module *init = &cell_py_source[n - 1];
        _cleanup_pydecref_ PyObject *path = PyList_New(0);
        PyObject *pkg = PyImport_AddModule(init->name); /* borrowed */

        if (!pkg || !path || PyModule_AddObjectRef(pkg, "__path__", path) < 0 ||
            PyModule_AddStringConstant(pkg, "__package__", init->name) < 0)
                return NULL;
        for (size_t i = 0; i < n; i++) {
                const struct embedded_module *m = &cell_py_source[i];
                _cleanup_pydecref_ PyObject *code = embedded_code(m), *mod = NULL;
                PyObject *fresh;

                if (!code)
                        return NULL;
                fresh = PyImport_AddModule(m->name); /* borrowed; the package itself last */
                if (!fresh || PyModule_AddStringConstant(fresh, "__package__", init->name) < 0)
                        return NULL;
                mod = PyImport_ExecCodeModuleWithPathnames(m->name, code, m->filename, NULL);
                if (!mod)
                        return NULL;
                if (m != init && PyObject_SetAttrString(pkg, strrchr(m->name, '.') + 1, mod) < 0)
                        return NULL;
        }
        return Py_NewRef(pkg);
}

static int python_start(void)
{
        PyPreConfig preconfig;
        PyConfig config;
        PyStatus status;
        wchar_t *argv[] = { L"", NULL };

        /* The isolated configuration ignores the environment and leaves the C locale alone,
         * which would make stdio ASCII: UTF-8 mode makes every text stream UTF-8. */
        PyPreConfig_InitIsolatedConfig(&preconfig);
        preconfig.utf8_mode = 1;
        status = Py_PreInitialize(&preconfig);
        if (PyStatus_Exception(status)) {
                (void) send_fatal("python pre-initialisation failed: ", status.err_msg);
                return -EIO;
        }

        PyConfig_InitIsolatedConfig(&config);
        config.buffered_stdio = 0;          /* output reaches the pipes as it is written */
        config.write_bytecode = 0;          /* the image is read-only anyway */
        config.install_signal_handlers = 1; /* SIGINT becomes KeyboardInterrupt */
        config.site_import = 1;             /* Debian's dist-packages */
        config.user_site_directory = 0;
        config.parse_argv = 0;
        status = PyConfig_SetString(&config, &config.program_name, L"/usr/bin/python3");
        if (PyStatus_Exception(status))
                goto fail;
        status = PyConfig_SetArgv(&config, 1, argv);
        if (PyStatus_Exception(status))
                goto fail;
        status = Py_InitializeFromConfig(&config);
        if (PyStatus_Exception(status))
                goto fail;
        PyConfig_Clear(&config);

        cell_module = load_cell_package();
        if (!cell_module)
                return -EINVAL;
        {
                _cleanup_pydecref_ PyObject *fn = PyCFunction_New(&channel_def, NULL);
                _cleanup_pydecref_ PyObject *disp = PyCFunction_New(&display_def, NULL);
                if (!fn || PyObject_SetAttrString(cell_module, "_channel", fn) < 0 || !disp ||
                    PyObject_SetAttrString(cell_module, "_display", disp) < 0)
                        return -EINVAL;
        }
        {
                /* The files manifest's change watch (watch.h), for airlock_cell.files. */
                PyMethodDef *defs[] = { &watch_reset_def, &watch_add_def, &watch_quiet_def,
                                        &watch_forget_def };
                _cleanup_pydecref_ PyObject *files = PyImport_ImportModule("airlock_cell.files");
                if (!files)
                        return -EINVAL;
                for (size_t i = 0; i < sizeof(defs) / sizeof(defs[0]); i++) {
                        _cleanup_pydecref_ PyObject *f = PyCFunction_New(defs[i], NULL);
                        if (!f || PyObject_SetAttrString(files, defs[i]->ml_name, f) < 0)
                                return -EINVAL;
                }
        }
        return 0;
fail:
        PyConfig_Clear(&config);
        (void) send_fatal("python initialisation failed: ", status.err_msg);
        return -EIO;
}

static json_t *handle_init(json_t *req)
{
        _cleanup_pydecref_ PyObject *imports = NULL, *preload = NULL, *res = NULL, *errors = NULL;
        const char *profile = json_string_value(json_object_get(req, "profile"));
        const char *policy = json_string_value(json_object_get(req, "policy"));
        char msg[1024];

        if (json_is_integer(json_object_get(req, "output_max")) &&
            json_integer_value(json_object_get(req, "output_max")) > 1024)
                output_max = (size_t) json_integer_value(json_object_get(req, "output_max"));
        node_configure(output_max,
                       json_is_integer(json_object_get(req, "memory_bytes")) &&
                                       json_integer_value(json_object_get(req, "memory_bytes")) > 0
                               ? (uint64_t) json_integer_value(json_object_get(req, "memory_bytes"))
                               : 0);
        shell_allowed = json_is_true(json_object_get(req, "shell"));
        imports = json_strv_to_py(json_object_get(req, "imports"));
        preload = json_strv_to_py(json_object_get(req, "preload"));
        if (!imports || !preload)
                goto py_fail;
        /* shell: the profile allows bash, and so IPython's dialect (shell escapes, magics). */
        res = PyObject_CallMethod(cell_module, "configure", "sOsO", profile ? profile : "default",
                                  imports, policy ? policy : "none",
                                  json_is_true(json_object_get(req, "shell")) ? Py_True : Py_False);
        if (!res)
                goto py_fail;
        if (preload != Py_None) {
                errors = PyObject_CallMethod(cell_module, "preload", "O", preload);
                if (!errors)
                        goto py_fail;
        }
        return json_pack("{s:s, s:o, s:s}", "op", "ready", "preload_errors",
                         errors ? py_to_json(errors, 0) : json_array(), "python", Py_GetVersion());
py_fail:
        python_error_string(msg, sizeof(msg));
        return json_pack("{s:s, s:s}", "op", "fatal", "message", msg);
}

/* Cuts the repr at output_max (at a character boundary) and drops rich outputs from the end
 * until the rest fits, saying so in place of what was dropped. */
static void bound_string(json_t *obj, const char *key)
{
        json_t *v = json_object_get(obj, key);
        const char *s;
        size_t cut = output_max;
        char *text;

        if (!json_is_string(v) || json_string_length(v) <= output_max)
                return;
        s = json_string_value(v);
        while (cut > 0 && ((unsigned char) s[cut] & 0xc0) == 0x80)
                cut--;
        if (asprintf(&text, "%.*s... [airlock: truncated at %zu bytes]", (int) cut, s,
                     output_max) >= 0) {
                json_object_set_new(obj, key, json_string(text));
                free(text);
        }
}

static void bound_result(json_t *out)
{
        json_t *outputs = json_object_get(out, "outputs");
        json_t *error = json_object_get(out, "error");
        size_t used = 0, dropped = 0;

        bound_string(out, "result");
        if (json_is_object(error)) {
                bound_string(error, "value");
                bound_string(error, "traceback");
        }
        if (!json_is_array(outputs))
                return;
        for (size_t i = 0; i < json_array_size(outputs);) {
                json_t *data = json_object_get(json_array_get(outputs, i), "data");
                size_t n = json_dumpb(json_array_get(outputs, i), NULL, 0, JSON_COMPACT);
                if (used + n > output_max) {
                        /* A figure's chart or a frame's data goes first (charts.py): the PNG or
                         * HTML beside it is what the output is for. Measured again after. */
                        if ((json_object_del(data, "application/vnd.airlock.chart+json") == 0) |
                            (json_object_del(data, "application/vnd.airlock.data+json") == 0))
                                continue;
                        json_array_remove(outputs, i);
                        dropped++;
                        continue;
                }
                used += n;
                i++;
        }
        if (dropped > 0) {
                char note[160];
                (void) snprintf(note, sizeof(note),
                                "[airlock: %zu rich output(s) dropped: together larger than the "
                                "output limit of %zu bytes]",
                                dropped, output_max);
                json_array_append_new(outputs, json_pack("{s:{s:s}, s:b}", "data", "text/plain",
                                                         note, "main", 0));
        }
}

static double cpu_ms_now(void)
{
        struct rusage self, children;

        (void) getrusage(RUSAGE_SELF, &self);
        (void) getrusage(RUSAGE_CHILDREN, &children);
        return (self.ru_utime.tv_sec + self.ru_stime.tv_sec + children.ru_utime.tv_sec +
                children.ru_stime.tv_sec) *
                       1000.0 +
               (self.ru_utime.tv_usec + self.ru_stime.tv_usec + children.ru_utime.tv_usec +
                children.ru_stime.tv_usec) /
                       1000.0;
}

/* The keyword arguments of run_cell() for what the request adds around the cell: stdin, env
 * and cwd (see struct shell_call). Sets *ret_kwargs to NULL when the request has none of them.
 * Returns 0, or -1 with a Python error set. */
static int call_kwargs(const struct shell_call *call, PyObject **ret_kwargs)
{
        _cleanup_pydecref_ PyObject *kwargs = NULL, *env = NULL;
        const char *name;
        json_t *value;

        *ret_kwargs = NULL;
        if (!call->stdin_text && !call->env && !call->cwd)
                return 0;
        kwargs = PyDict_New();
        if (!kwargs)
                return -1;
        if (call->stdin_text) {
                _cleanup_pydecref_ PyObject *v = PyUnicode_FromString(call->stdin_text);
                if (!v || PyDict_SetItemString(kwargs, "stdin", v) < 0)
                        return -1;
        }
        if (call->cwd) {
                _cleanup_pydecref_ PyObject *v = PyUnicode_FromString(call->cwd);
                if (!v || PyDict_SetItemString(kwargs, "cwd", v) < 0)
                        return -1;
        }
        if (call->env) {
                env = PyDict_New();
                if (!env)
                        return -1;
                json_object_foreach (call->env, name, value) {
                        _cleanup_pydecref_ PyObject *v = NULL;
                        if (!json_is_string(value))
                                continue;
                        v = PyUnicode_FromString(json_string_value(value));
                        if (!v || PyDict_SetItemString(env, name, v) < 0)
                                return -1;
                }
                if (PyDict_SetItemString(kwargs, "env", env) < 0)
                        return -1;
        }
        *ret_kwargs = TAKE_PTR(kwargs);
        return 0;
}

static json_t *handle_exec(json_t *req)
{
        const char *language = json_string_value(json_object_get(req, "language"));
        const char *code = json_string_value(json_object_get(req, "code"));
        json_t *env = json_object_get(req, "env");
        const struct shell_call call = {
                .stdin_text = json_string_value(json_object_get(req, "stdin")),
                .env = json_is_object(env) ? env : NULL,
                .cwd = json_string_value(json_object_get(req, "cwd")),
        };
        _cleanup_pydecref_ PyObject *res = NULL, *kwargs = NULL;
        /* The daemon reads the cell's CPU time and peak memory from the cgroup; it asks for the
         * runner's own figures only where the cgroup cannot tell (five syscalls a cell). */
        bool rusage = json_is_true(json_object_get(req, "rusage"));
        struct rusage ru;
        double cpu0 = rusage ? cpu_ms_now() : 0;
        json_t *out;
        char msg[1024];

        if (!code)
                return json_pack("{s:s, s:s}", "op", "fatal", "message", "exec without code");
        if (language && (strcmp(language, "bash") == 0 || strcmp(language, "javascript") == 0 ||
                         strcmp(language, "typescript") == 0 || strcmp(language, "r") == 0)) {
                /* The files manifest is the cell module's, also for bash, JavaScript and R. */
                _cleanup_pydecref_ PyObject *snap = NULL, *changed = NULL;
                snap = PyObject_CallMethod(cell_module, "files_snapshot", NULL);
                if (!snap)
                        PyErr_Clear();
                out = strcmp(language, "bash") == 0 ? shell_run(code, &call)
                      : strcmp(language, "r") == 0  ? r_run(code, req, shell_allowed)
                                                    : node_run(code, req);
                if (snap)
                        changed = PyObject_CallMethod(cell_module, "files_changed", "(O)", snap);
                if (!changed)
                        PyErr_Clear();
                if (out) {
                        json_object_set_new(out, "files",
                                            changed ? py_to_json(changed, 0) : json_array());
                        bound_result(out);
                }
        } else {
                if (call_kwargs(&call, &kwargs) < 0) {
                        python_error_string(msg, sizeof(msg));
                        return json_pack("{s:s, s:s}", "op", "fatal", "message", msg);
                }
                channel_cell_begin(req);
                if (kwargs) {
                        _cleanup_pydecref_ PyObject *fn = NULL, *args = NULL;
                        fn = PyObject_GetAttrString(cell_module, "run_cell");
                        args = fn ? Py_BuildValue("(s)", code) : NULL;
                        res = args ? PyObject_Call(fn, args, kwargs) : NULL;
                } else {
                        res = PyObject_CallMethod(cell_module, "run_cell", "s", code);
                }
                channel_cell_end();
                if (!res && PyErr_ExceptionMatches(PyExc_KeyboardInterrupt)) {
                        /* An interrupt that landed after the user's code, while the cell module
                         * built its answer: the cell was interrupted, the interpreter is fine. */
                        PyErr_Clear();
                        out = json_pack("{s:s, s:n, s:{s:s, s:s, s:s}, s:i, s:[], s:[]}", "status",
                                        "error", "result", "error", "name", "KeyboardInterrupt",
                                        "value", "", "traceback", "", "exit_code", 130, "outputs",
                                        "files");
                        goto done;
                }
                if (!res) {
                        python_error_string(msg, sizeof(msg));
                        return json_pack("{s:s, s:s}", "op", "fatal", "message", msg);
                }
                out = py_to_json(res, 0);
                if (out)
                        bound_result(out);
        }
done:
        if (!out)
                return NULL;
        json_object_set_new(out, "op", json_string("result"));
        if (rusage) {
                (void) getrusage(RUSAGE_SELF, &ru);
                json_object_set_new(out, "cpu_ms", json_real(cpu_ms_now() - cpu0));
                json_object_set_new(out, "max_rss_bytes",
                                    json_integer((json_int_t) ru.ru_maxrss * 1024));
        }
        return out;
}

/* Whether path is a directory the sandbox's user can enter, for an execute's cwd: checked
 * before the cell is sent, so that a wrong one is the client's error (400), not the cell's. */
static json_t *handle_check_dir(json_t *req)
{
        const char *path = json_string_value(json_object_get(req, "path"));
        struct stat st;

        if (!path)
                return json_pack("{s:s, s:b, s:s}", "op", "ok", "dir", 0, "error", "no path");
        if (stat(path, &st) < 0)
                return json_pack("{s:s, s:b, s:s}", "op", "ok", "dir", 0, "error", strerror(errno));
        if (!S_ISDIR(st.st_mode))
                return json_pack("{s:s, s:b, s:s}", "op", "ok", "dir", 0, "error",
                                 "not a directory");
        if (access(path, X_OK) < 0)
                return json_pack("{s:s, s:b, s:s}", "op", "ok", "dir", 0, "error", strerror(errno));
        return json_pack("{s:s, s:b}", "op", "ok", "dir", 1);
}

/* Adds variables to os.environ, which also sets them for the process (putenv), so bash and
 * subprocesses started later see them. The driver validated the names. "home", when given,
 * becomes the working directory, HOME and PWD (E2B's /home/user), and the cell package keeps
 * E2B's kernels' conventions (home() in cell/setup.py). */
static json_t *handle_setenv(json_t *req)
{
        _cleanup_pydecref_ PyObject *os = NULL, *environ = NULL, *res = NULL;
        json_t *env = json_object_get(req, "env"), *v;
        const char *k, *home = json_string_value(json_object_get(req, "home"));
        char msg[1024];

        os = PyImport_ImportModule("os");
        if (os)
                environ = PyObject_GetAttrString(os, "environ");
        if (!environ)
                goto py_fail;
        json_object_foreach (env, k, v) {
                _cleanup_pydecref_ PyObject *val = NULL;
                if (!json_is_string(v))
                        continue;
                val = PyUnicode_FromString(json_string_value(v));
                if (!val || PyMapping_SetItemString(environ, k, val) < 0)
                        goto py_fail;
        }
        if (home) {
                _cleanup_pydecref_ PyObject *val = NULL;
                /* PWD too: bash's pwd trusts an inherited PWD that names the same directory,
                 * and /work is the same directory as /home/user. */
                if (chdir(home) < 0)
                        return json_pack("{s:s, s:s+}", "op", "fatal", "message",
                                         "cannot enter the session's home: ", strerror(errno));
                val = PyUnicode_FromString(home);
                if (!val || PyMapping_SetItemString(environ, "HOME", val) < 0 ||
                    PyMapping_SetItemString(environ, "PWD", val) < 0)
                        goto py_fail;
                /* E2B's kernels' conventions, which code written for E2B expects. */
                res = PyObject_CallMethod(cell_module, "home", "s", home);
                if (!res)
                        goto py_fail;
        }
        return json_pack("{s:s}", "op", "ok");
py_fail:
        python_error_string(msg, sizeof(msg));
        return json_pack("{s:s, s:s}", "op", "fatal", "message", msg);
}

/* Calls cell_module.name(fd, *args_json) where args_json is a JSON array turned into Python
 * values by the json module (so dicts and lists need no converter of our own), and returns the
 * answer as JSON with op set, or a fatal frame. fd goes to Python, which closes it. */
static json_t *call_with_fd(const char *name, int fd, json_t *args, const char *op)
{
        _cleanup_pydecref_ PyObject *json_mod = NULL, *loads = NULL, *pyargs = NULL,
                                    *callargs = NULL, *func = NULL, *res = NULL, *text = NULL;
        _cleanup_free_ char *dumped = NULL;
        char msg[1024];
        json_t *out;

        dumped = json_dumps(args, JSON_COMPACT);
        json_mod = PyImport_ImportModule("json");
        if (!dumped || !json_mod)
                goto py_fail;
        text = PyUnicode_FromString(dumped);
        pyargs = text ? PyObject_CallMethod(json_mod, "loads", "O", text) : NULL;
        if (!pyargs || !PyList_Check(pyargs))
                goto py_fail;
        callargs = PyList_New(0);
        {
                _cleanup_pydecref_ PyObject *pyfd = PyLong_FromLong(fd);
                if (!callargs || !pyfd || PyList_Append(callargs, pyfd) < 0)
                        goto py_fail;
        }
        fd = -1; /* Python's now */
        for (Py_ssize_t i = 0; i < PyList_GET_SIZE(pyargs); i++)
                if (PyList_Append(callargs, PyList_GET_ITEM(pyargs, i)) < 0)
                        goto py_fail;
        func = PyObject_GetAttrString(cell_module, name);
        if (func) {
                _cleanup_pydecref_ PyObject *tuple = PyList_AsTuple(callargs);
                res = tuple ? PyObject_CallObject(func, tuple) : NULL;
        }
        if (!res)
                goto py_fail;
        out = py_to_json(res, 0);
        if (!out || !json_is_object(out)) {
                json_decref(out);
                return json_pack("{s:s, s:s}", "op", "fatal", "message", "bad snapshot answer");
        }
        json_object_set_new(out, "op", json_string(op));
        return out;
py_fail:
        if (fd >= 0)
                (void) close(fd);
        python_error_string(msg, sizeof(msg));
        return json_pack("{s:s, s:s}", "op", op, "error", msg);
}

/* The name lost_names gives a running JavaScript REPL, whose variables no snapshot saves. */
#define NODE_LOST_NAME "(javascript state)"
#define R_LOST_NAME "(r state)"

/* Saves the session: its Python variables go down the pipe fd (the daemon bounds and stores
 * them), the shell's state rides in the answer. A JavaScript REPL's variables cannot be saved:
 * the answer's lost_names says so, and the resumed or forked session starts a new REPL with its
 * first javascript cell. */
static json_t *handle_snapshot(json_t *req, int fd)
{
        _cleanup_free_ char *bash = shell_export_state();
        json_t *room = json_object_get(req, "room"); /* a fork's memfd: see saved.snapshot() */
        json_t *args = json_pack("[o, O]", bash ? json_string(bash) : json_null(),
                                 json_is_integer(room) ? room : json_null());
        json_t *out, *lost;

        if (!args) {
                (void) close(fd);
                return NULL;
        }
        out = call_with_fd("snapshot", fd, args, "snapshot_done");
        json_decref(args);
        lost = json_object_get(out, "lost_names");
        if (json_is_array(lost) && node_has_state())
                (void) json_array_append_new(lost, json_string(NODE_LOST_NAME));
        if (json_is_array(lost) && r_has_state())
                (void) json_array_append_new(lost, json_string(R_LOST_NAME));
        return out;
}

/* Loads a saved session from the file fd (its own saved state: the daemon never parses it). */
static json_t *handle_restore(json_t *req, int fd)
{
        json_t *args, *out;
        const char *bash = json_string_value(json_object_get(req, "bash"));

        shell_set_restore(bash);
        args = json_pack("[O, O, O, O, O, b]", json_object_get(req, "offset"),
                         json_object_get(req, "size"), json_object_get(req, "modules"),
                         json_object_get(req, "lost_names"), json_object_get(req, "count"),
                         json_is_true(json_object_get(req, "reseed")));
        if (!args) {
                if (fd >= 0)
                        (void) close(fd);
                return json_pack("{s:s, s:s}", "op", "restored", "error", "bad restore request");
        }
        out = call_with_fd("restore", fd, args, "restored");
        json_decref(args);
        return out;
}

/* Writes a file the daemon sends down the pipe fd into the workspace, as this process, so that
 * its pages count against the session's memory (files.c). */
static json_t *handle_put(json_t *req, int fd)
{
        const char *root = json_string_value(json_object_get(req, "root"));
        const char *path = json_string_value(json_object_get(req, "path"));
        const char *step = "read the request";
        uint64_t written = 0;
        int r = -EINVAL;

        if (root && path)
                r = runner_put_file(root, path, fd, &written, &step);
        (void) close(fd);
        if (r < 0)
                return json_pack("{s:s, s:i, s:s}", "op", "put_done", "errno", -r, "step", step);
        return json_pack("{s:s, s:I}", "op", "put_done", "bytes", (json_int_t) written);
}

/* A warm pool member runs cells through the real exec path (the reply's JSON included, but
 * not sent) until one costs no page fault, twice in a row, or WARMUP_CELLS_MAX cells: on this
 * path a session forked from the zygote first copies the pages it writes, and the allocator's
 * free lists spread that over several calls (docs/PERFORMANCE.md). Whatever goes wrong here
 * only costs the speed-up; the answer says what it took. */
#define WARMUP_CELLS_MAX 32

static long minor_faults(void)
{
        struct rusage ru;

        return getrusage(RUSAGE_SELF, &ru) == 0 ? ru.ru_minflt : 0;
}

/* The cell a warm pool member runs (and the zygote, ZYGOTE_WARMUP_CELLS times): an import, a
 * print, a value with a repr, on the exec path a real cell takes. */
#define WARMUP_CELL                                                                                \
        "import math\nprint('warm', 1, file=_airlock_sink)\n"                                      \
        "_airlock_warm = {'a': [1, 2.5, 'x'], 'b': (None, True)}\n_airlock_warm"
#define ZYGOTE_WARMUP_CELLS 10

static json_t *handle_warmup(void)
{
        _cleanup_json_ json_t *req = json_pack("{s:s, s:s}", "op", "exec", "code", WARMUP_CELL);
        _cleanup_pydecref_ PyObject *begin = NULL, *end = NULL;
        unsigned cells = 0, quiet = 0;
        long faults = 0, first = -1;

        if (!req)
                return NULL;
        begin = PyObject_CallMethod(cell_module, "warmup_begin", NULL);
        if (!begin)
                PyErr_Clear();
        while (begin && cells < WARMUP_CELLS_MAX && quiet < 2) {
                long before = minor_faults();
                json_t *out = handle_exec(req);
                char *text = out ? json_dumps(out, JSON_COMPACT) : NULL;
                long n;

                free(text);
                json_decref(out);
                n = minor_faults() - before;
                if (first < 0)
                        first = n;
                faults += n;
                cells++;
                quiet = n == 0 ? quiet + 1 : 0;
        }
        end = PyObject_CallMethod(cell_module, "warmup_end", NULL);
        if (!end)
                PyErr_Clear();
        return json_pack("{s:s, s:i, s:I, s:I}", "op", "ok", "cells", (int) cells, "faults",
                         (json_int_t) faults, "first_cell_faults", (json_int_t) first);
}

/* Waits for the next request; a zygote wakes up every second to reap finished sessions. */
static int next_request(bool zygote, json_t **ret_req, int *ret_fd)
{
        while (zygote) {
                struct pollfd pfd = { .fd = CTL_FD, .events = POLLIN };
                int n = poll(&pfd, 1, 1000);
                int saved = errno; /* zygote_reap() ends with ECHILD */
                zygote_reap();
                if (n > 0)
                        break;
                if (n < 0 && saved != EINTR)
                        return -saved;
        }
        size_t n_fds = 0;
        int fds[1] = { -1 };
        int r = wire_recv_ex(CTL_FD, REQUEST_MAX, ret_req, fds, 1, &n_fds, NULL);
        *ret_fd = r >= 0 && n_fds == 1 ? fds[0] : -1;
        return r;
}

/* ---- Code contexts: more interpreters in one session (docs/API.md, "Contexts") ----------- *
 * A context is a child of the session's runner, forked when it is created, with a new, empty
 * __main__ (the modules imported so far stay: a context costs a fork, no interpreter start).
 * It serves this same protocol on its end of a socketpair; the session's runner relays an
 * exec for it (the request down; every frame of the cell up to the daemon, tool replies and
 * display acks down) until its result. It inherits the runner's stdout and stderr, so output
 * streams as any cell's; it is in the session's namespaces, cgroup and seccomp/Landlock
 * policy, as everything the runner forks. A session that never makes one pays nothing. */
#define CONTEXTS_MAX 16
#define CONTEXT_ID_MAX 64

struct code_context {
        char id[CONTEXT_ID_MAX];
        pid_t pid;
        int fd;
};

static struct code_context contexts[CONTEXTS_MAX];
static size_t n_contexts;
static bool is_context;                 /* this process is a context: it makes none itself */
static volatile sig_atomic_t relay_pid; /* the context a SIGINT goes on to, while it runs a cell */

static json_t *context_answer(const char *error)
{
        return error ? json_pack("{s:s, s:s}", "op", "ok", "error", error)
                     : json_pack("{s:s}", "op", "ok");
}

static struct code_context *context_find(const char *id)
{
        for (size_t i = 0; id && i < n_contexts; i++)
                if (strcmp(contexts[i].id, id) == 0)
                        return &contexts[i];
        return NULL;
}

/* Ends the context's process and forgets it. */
static void context_end(struct code_context *c)
{
        (void) close(c->fd);
        (void) kill(c->pid, SIGKILL);
        while (waitpid(c->pid, NULL, 0) < 0 && errno == EINTR)
                ;
        *c = contexts[--n_contexts];
}

static bool context_id_is_valid(const char *id)
{
        size_t n = id ? strlen(id) : 0;

        if (n == 0 || n >= CONTEXT_ID_MAX)
                return false;
        for (size_t i = 0; i < n; i++)
                if (!((id[i] >= 'a' && id[i] <= 'z') || (id[i] >= 'A' && id[i] <= 'Z') ||
                      (id[i] >= '0' && id[i] <= '9') || id[i] == '-' || id[i] == '_'))
                        return false;
        return true;
}

/* A fresh namespace in this process, as a new context or a restarted one has. */
static void namespace_reset(void)
{
        PyObject *res = PyObject_CallMethod(cell_module, "reset_namespace", NULL);

        if (!res)
                PyErr_Clear();
        Py_XDECREF(res);
}

/* Forks the context id. Returns 1 in the context's process (which then serves its socket as
 * fd 3), 0 in the runner with *ret_resp the answer. */
static int context_new(const char *id, json_t **ret_resp)
{
        char msg[256];
        int sv[2];
        pid_t pid;

        if (is_context) {
                *ret_resp = context_answer("a context cannot make contexts");
                return 0;
        }
        if (!context_id_is_valid(id) || strcmp(id, "default") == 0) {
                *ret_resp = context_answer(
                        "a context id is 1 to 63 letters, digits, '-' or '_', not 'default'");
                return 0;
        }
        if (context_find(id)) {
                *ret_resp = context_answer("a context with this id exists");
                return 0;
        }
        if (n_contexts >= CONTEXTS_MAX) {
                *ret_resp = context_answer("at most 16 contexts per session");
                return 0;
        }
        if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0) {
                (void) snprintf(msg, sizeof(msg), "cannot make the context's socket: %s",
                                strerror(errno));
                *ret_resp = context_answer(msg);
                return 0;
        }
        PyOS_BeforeFork();
        pid = fork();
        if (pid == 0) {
                PyOS_AfterFork_Child();
                (void) prctl(PR_SET_PDEATHSIG, SIGKILL);
                for (size_t i = 0; i < n_contexts; i++)
                        (void) close(contexts[i].fd);
                n_contexts = 0;
                is_context = true;
                if (dup2(sv[1], CTL_FD) < 0)
                        _exit(1);
                (void) close(sv[0]), (void) close(sv[1]);
                namespace_reset();
                {
                        PyObject *res = PyObject_CallMethod(cell_module, "reseed", NULL);
                        if (!res)
                                PyErr_Clear();
                        Py_XDECREF(res);
                }
                return 1;
        }
        PyOS_AfterFork_Parent();
        (void) close(sv[1]);
        if (pid < 0) {
                /* EAGAIN: the session's pids limit. */
                (void) snprintf(msg, sizeof(msg), "cannot start the context's process: %s",
                                strerror(errno));
                (void) close(sv[0]);
                *ret_resp = context_answer(msg);
                return 0;
        }
        contexts[n_contexts] = (struct code_context){ .pid = pid, .fd = sv[0] };
        (void) snprintf(contexts[n_contexts].id, CONTEXT_ID_MAX, "%s", id);
        n_contexts++;
        *ret_resp = context_answer(NULL);
        return 0;
}

/* ctx_new, ctx_del, ctx_restart, ctx_list. Returns as context_new(). */
static int handle_context(const char *op, json_t *req, json_t **ret_resp)
{
        const char *id = json_string_value(json_object_get(req, "context"));
        struct code_context *c = context_find(id);
        json_t *ids;

        if (strcmp(op, "ctx_new") == 0)
                return context_new(id, ret_resp);
        if (strcmp(op, "ctx_list") == 0) {
                ids = json_array();
                for (size_t i = 0; ids && i < n_contexts; i++)
                        (void) json_array_append_new(ids, json_string(contexts[i].id));
                *ret_resp = ids ? json_pack("{s:s, s:o}", "op", "ok", "contexts", ids) : NULL;
                return 0;
        }
        if (strcmp(op, "ctx_restart") == 0 && !id) {
                /* The session's own interpreter: a new __main__, in this process. */
                namespace_reset();
                *ret_resp = context_answer(NULL);
                return 0;
        }
        if (!c) {
                *ret_resp = context_answer("no such context");
                return 0;
        }
        context_end(c);
        if (strcmp(op, "ctx_restart") == 0)
                return context_new(id, ret_resp);
        *ret_resp = context_answer(NULL);
        return 0;
}

/* Passes the SIGINT on at once (kill() is async-signal-safe): one that came between the loop's
 * check and its poll() would otherwise wait for the next frame, which may never come. */
static void on_relay_sigint(int sig)
{
        if (relay_pid > 0)
                (void) kill((pid_t) relay_pid, sig);
}

/* A cell's error answer that the runner makes itself (the context is unknown or died). */
static json_t *context_error_result(const char *name, const char *value)
{
        return json_pack("{s:s, s:s, s:n, s:{s:s, s:s, s:s}, s:i, s:[], s:[]}", "op", "result",
                         "status", "error", "result", "error", "name", name, "value", value,
                         "traceback", "", "exit_code", 1, "outputs", "files");
}

/* Runs req in the context c: relays frames both ways until the context's result. A SIGINT
 * (the daemon's interrupt or timeout) goes on to the context. */
static json_t *context_exec(struct code_context *c, json_t *req)
{
        const char *id = json_string_value(json_object_get(req, "id"));
        struct sigaction sa = { .sa_handler = on_relay_sigint }, old;
        json_t *out = NULL;
        int r;

        json_object_del(req, "context");
        json_object_del(req, "context_create");
        if (strcmp(json_string_value(json_object_get(req, "language")) ?: "python", "python") != 0)
                return context_error_result("ContextError",
                                            "a created context runs python cells only");
        /* Before the cell goes down: an interrupt for it must reach the context, never raise
         * KeyboardInterrupt in this interpreter; the handler passes it on at once. */
        (void) sigemptyset(&sa.sa_mask);
        relay_pid = (sig_atomic_t) c->pid;
        (void) sigaction(SIGINT, &sa, &old);
        if (wire_send(c->fd, req) < 0) {
                relay_pid = 0;
                (void) sigaction(SIGINT, &old, NULL);
                context_end(c);
                return context_error_result("ContextError", "the context's interpreter has ended");
        }
        for (;;) {
                struct pollfd pfd[2] = { { .fd = c->fd, .events = POLLIN },
                                         { .fd = CTL_FD, .events = POLLIN } };
                json_t *m = NULL;
                const char *op;

                if (poll(pfd, 2, -1) < 0) {
                        if (errno == EINTR)
                                continue;
                        break;
                }
                if (pfd[0].revents) {
                        r = wire_recv(c->fd, WIRE_FRAME_MAX,
                                      &m); /* a result, as large as the daemon takes */
                        if (r < 0)
                                break; /* the context died */
                        op = json_string_value(json_object_get(m, "op")) ?: "";
                        if ((strcmp(op, "result") == 0 || strcmp(op, "fatal") == 0) &&
                            strcmp(json_string_value(json_object_get(m, "id")) ?: "", id ?: "") ==
                                    0) {
                                if (strcmp(op, "fatal") == 0) {
                                        json_decref(m);
                                        break;
                                }
                                out = m;
                                break;
                        }
                        r = wire_send(CTL_FD, m); /* a display, a tool call, or a forged frame */
                        json_decref(m);
                        if (r < 0)
                                break;
                }
                if (pfd[1].revents) {
                        r = wire_recv(CTL_FD, REQUEST_MAX, &m);
                        if (r < 0)
                                break;
                        r = wire_send(c->fd, m); /* a tool reply or a display ack */
                        json_decref(m);
                        if (r < 0)
                                break;
                }
        }
        relay_pid = 0;
        (void) sigaction(SIGINT, &old, NULL);
        if (!out) {
                context_end(c);
                out = context_error_result("ContextError",
                                           "the context's interpreter ended during the cell: it "
                                           "is gone (make a new one)");
        }
        return out;
}

/* Takes every free chunk out of glibc's free lists and keeps it, so that what a session forked
 * from here allocates comes from the top of the heap, densely, instead of from chunks spread
 * over hundreds of pages it shares with the zygote: each first write to one of those is a
 * copy-on-write fault (docs/PERFORMANCE.md). Costs the zygote the free memory it had (a few
 * hundred KiB), once, shared by every session. */
static void heap_drain(void)
{
        /* Never more than was free: a bound should the heap not be the one brk() grows. */
        size_t budget = mallinfo2().fordblks, kept = 0;

        for (size_t size = 1u << 20; size >= 16; size = size > 1024 ? size / 2 : size - 16) {
                while (kept + size <= budget) {
                        struct mallinfo2 mi = mallinfo2();
                        char *top = (char *) sbrk(0) - mi.keepcost;
                        void *p = malloc(size);
                        if (!p)
                                return;
                        if ((char *) p >= top) {
                                free(p); /* from the top chunk (or mmap): none of this size left */
                                break;
                        }
                        kept += size; /* from a free list: kept for good */
                }
        }
}

static json_t *handle_zygote_init(json_t *req)
{
        json_t *resp = handle_init(req);
        PyObject *warm;
        char msg[256];
        int r;

        if (!resp || strcmp(json_string_value(json_object_get(resp, "op")), "ready") != 0)
                return resp;
        r = zygote_prepare(req);
        if (r < 0) {
                json_decref(resp);
                (void) snprintf(msg, sizeof(msg), "cannot compile the seccomp policy: %s",
                                strerror(-r));
                return json_pack("{s:s, s:s}", "op", "fatal", "message", msg);
        }
        /* The exec path warmed up here, once, rather than in each session (zygote_warmup in
         * cell/execute.py); then everything imported and built so far moves to a generation the
         * collector never visits, so sessions forked from here share those pages instead of
         * copying them on first GC. */
        warm = PyObject_CallMethod(cell_module, "zygote_warmup", "si", WARMUP_CELL,
                                   ZYGOTE_WARMUP_CELLS);
        if (!warm)
                PyErr_Clear();
        Py_XDECREF(warm);
        /* (No "import gc": this runs in __main__, the sessions' namespace, where %who showed
         * the name.) */
        if (PyRun_SimpleString("__import__('gc').collect(); __import__('gc').freeze()") < 0)
                PyErr_Clear();
        heap_drain();
        return resp;
}

/* In a new session's Python: new random sequences, then tell the daemon our pid. */
static int session_ready(void)
{
        _cleanup_pydecref_ PyObject *res = NULL;
        json_t *o;
        int r;

        res = PyObject_CallMethod(cell_module, "reseed", NULL);
        if (!res)
                PyErr_Clear();
        o = json_pack("{s:s}", "op", "ready");
        r = o ? wire_send_ex(CTL_FD, o, NULL, 0, true) : -ENOMEM;
        json_decref(o);
        return r;
}

static void on_sigchld(int sig)
{
        (void) sig; /* only to interrupt the zygote's poll(), so it reaps at once */
}

int main(int argc, char **argv)
{
        bool zygote = argc > 1 && strcmp(argv[1], "--zygote") == 0;
        int r;

        if (zygote) {
                /* No SA_RESTART: a finished session wakes the zygote, which reaps it, so the
                 * daemon can remove the session's cgroup without waiting. */
                struct sigaction sa = { .sa_handler = on_sigchld };
                (void) sigemptyset(&sa.sa_mask);
                (void) sigaction(SIGCHLD, &sa, NULL);
        }

        /* Set for a zygote only (src/session/zygote.c), for the loader: not for user code. */
        (void) unsetenv("LD_BIND_NOW");
        r = python_start();
        if (r < 0) {
                char msg[1024];
                python_error_string(msg, sizeof(msg));
                (void) send_fatal("cannot load the cell module: ", msg);
                return 1;
        }

        for (;;) {
                _cleanup_json_ json_t *req = NULL, *resp = NULL;
                const char *op;
                int fd = -1;

                r = next_request(zygote, &req, &fd);
                if (r == -EPIPE)
                        break; /* the driver is done with us */
                if (r < 0) {
                        (void) send_fatal("bad request frame: ", strerror(-r));
                        return 1;
                }
                op = json_string_value(json_object_get(req, "op"));
                if (op && strcmp(op, "init") == 0)
                        resp = zygote ? handle_zygote_init(req) : handle_init(req);
                else if (op && strcmp(op, "fork") == 0 && zygote) {
                        r = zygote_fork(req);
                        if (r == 1) {
                                /* We are the new session's Python now. */
                                zygote = false;
                                if (session_ready() < 0)
                                        _exit(1);
                                continue;
                        }
                        if (r == 0)
                                continue; /* the answer went with the fds */
                        resp = json_pack("{s:s, s:s}", "op", "fork_failed", "message",
                                         strerror(-r));
                } else if (op && strcmp(op, "exec") == 0 && !zygote) {
                        const char *ctx = json_string_value(json_object_get(req, "context"));
                        struct code_context *c = context_find(ctx);
                        if (!ctx)
                                resp = handle_exec(req);
                        else if (c)
                                resp = context_exec(c, req);
                        else if (json_is_true(json_object_get(req, "context_create"))) {
                                /* A context the daemon knows and this runner does not (the
                                 * session was resumed, or its process died): a new, empty one. */
                                json_t *made = NULL;
                                if (context_new(ctx, &made) == 1)
                                        continue; /* the new context: it serves fd 3 now */
                                c = context_find(ctx);
                                resp = c ? context_exec(c, req)
                                         : context_error_result(
                                                   "ContextError",
                                                   json_string_value(json_object_get(made, "error"))
                                                           ?: "cannot make the context");
                                json_decref(made);
                        } else
                                resp = context_error_result("ContextError",
                                                            "no such context in this session");
                } else if (op && strncmp(op, "ctx_", 4) == 0 && !zygote) {
                        if (handle_context(op, req, &resp) == 1) {
                                /* We are the new context's interpreter now, serving fd 3. */
                                json_decref(TAKE_PTR(req));
                                continue;
                        }
                } else if (op && strcmp(op, "check_dir") == 0 && !zygote)
                        resp = handle_check_dir(req);
                else if (op && strcmp(op, "setenv") == 0 && !zygote)
                        resp = handle_setenv(req);
                else if (op && strcmp(op, "warmup") == 0 && !zygote)
                        resp = handle_warmup();
                else if (op && strcmp(op, "snapshot") == 0 && !zygote && fd >= 0)
                        resp = handle_snapshot(req, TAKE_FD(fd));
                else if (op && strcmp(op, "restore") == 0 && !zygote &&
                         (fd >= 0 || json_integer_value(json_object_get(req, "size")) == 0))
                        /* Without an fd only an empty state: a microVM's copy, whose
                         * variables came with its memory, asks for fresh seeds this way (fds
                         * do not cross into a guest). */
                        resp = handle_restore(req, TAKE_FD(fd));
                else if (op && strcmp(op, "put") == 0 && !zygote && fd >= 0)
                        resp = handle_put(req, TAKE_FD(fd));
                else if (op && (strcmp(op, "tool_reply") == 0 || strcmp(op, "display_ack") == 0))
                        continue; /* a reply nobody waits for any more (a frame user code forged) */
                else
                        resp = json_pack("{s:s, s:s}", "op", "fatal", "message", "unknown op");
                if (fd >= 0)
                        (void) close(fd); /* an fd the request had no use for */
                if (!resp) {
                        (void) send_fatal("out of memory", NULL);
                        return 1;
                }
                /* The answer repeats the request's id: the driver drops every frame that does
                 * not, such as those user code writes on fd 3. */
                if (json_is_string(json_object_get(req, "id")) &&
                    json_object_set(resp, "id", json_object_get(req, "id")) < 0) {
                        (void) send_fatal("out of memory", NULL);
                        return 1;
                }
                r = wire_send(CTL_FD, resp);
                if (r < 0)
                        return 1;
        }
        Py_FinalizeEx();
        return 0;
}
