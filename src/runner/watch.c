/* See watch.h. */
#include "watch.h"

#include <errno.h>
#include <stdbool.h>
#include <sys/inotify.h>
#include <unistd.h>

#define WATCH_MASK                                                                                 \
        (IN_MODIFY | IN_ATTRIB | IN_CLOSE_WRITE | IN_MOVED_FROM | IN_MOVED_TO | IN_CREATE |        \
         IN_DELETE | IN_DELETE_SELF | IN_MOVE_SELF | IN_ONLYDIR | IN_DONT_FOLLOW | IN_EXCL_UNLINK)

static int watch_fd = -1;
static bool watch_broken = true;

static void watch_close(void)
{
        if (watch_fd >= 0)
                (void) close(watch_fd);
        watch_fd = -1;
        watch_broken = true;
}

static PyObject *watch_reset(PyObject *self, PyObject *unused)
{
        (void) self;
        (void) unused;
        watch_close();
        watch_fd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
        watch_broken = watch_fd < 0;
        Py_RETURN_NONE;
}

static PyObject *watch_add(PyObject *self, PyObject *arg)
{
        PyObject *bytes = NULL;

        (void) self;
        if (watch_broken)
                Py_RETURN_NONE;
        if (!PyUnicode_FSConverter(arg, &bytes))
                return NULL;
        if (inotify_add_watch(watch_fd, PyBytes_AS_STRING(bytes), WATCH_MASK) < 0)
                watch_broken = true;
        Py_DECREF(bytes);
        Py_RETURN_NONE;
}

static PyObject *watch_quiet(PyObject *self, PyObject *unused)
{
        /* Events are read whole; one buffer of 4 KiB takes dozens. */
        char buf[4096] __attribute__((aligned(__alignof__(struct inotify_event))));
        bool quiet = !watch_broken;

        (void) self;
        (void) unused;
        while (watch_fd >= 0) {
                ssize_t n = read(watch_fd, buf, sizeof(buf));
                if (n < 0 && errno == EINTR)
                        continue;
                if (n < 0 && errno == EAGAIN)
                        break;
                quiet = false;
                if (n <= 0) { /* an error, or EOF: nothing more can be trusted */
                        watch_broken = true;
                        break;
                }
        }
        return PyBool_FromLong(quiet);
}

static PyObject *watch_forget(PyObject *self, PyObject *unused)
{
        (void) self;
        (void) unused;
        watch_close();
        Py_RETURN_NONE;
}

PyMethodDef watch_reset_def = { "_watch_reset", watch_reset, METH_NOARGS,
                                "Drops the files manifest's watch and starts an empty one." };
PyMethodDef watch_add_def = { "_watch_add", watch_add, METH_O,
                              "Watches one directory for the files manifest." };
PyMethodDef watch_quiet_def = { "_watch_quiet", watch_quiet, METH_NOARGS,
                                "Whether nothing changed in the watched directories." };
PyMethodDef watch_forget_def = { "_watch_forget", watch_forget, METH_NOARGS,
                                 "Closes a forked child's copy of the watch." };
