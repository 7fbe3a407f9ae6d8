/* The r language: one R session per sandbox session, started with the first R cell (a session
 * that never runs R never pays for it) as a child of the runner in its own process group. The
 * child does not execute R: it loads Debian's libR.so and embeds it, so that where the profile
 * does not allow bash it can first install a seccomp filter that denies execve to everything R
 * will ever run (system(), pipe(), a dyn.load()ed libc alike): R then cannot start a shell nor
 * any program. It is a child REPL of the runner (repl.c); the cell function itself is
 * airlock_r.R. A SIGINT becomes R's interrupt; an R that does not stop (stuck in compiled code)
 * is killed, and only its variables are lost. */
#include "runner.h"

#include "base/cleanup.h"
#include "base/utf8.h"
#include "base/util.h"
#include "tools/base64.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "r-src.h"

#define R_HOME "/usr/lib/R"
#define R_LIBRARY R_HOME "/lib/libR.so"
#define R_CMD_FD 3
#define R_REPLY_FD 4
/* A plot's PNG larger than this is left out (its text says so). */
#define R_PNG_MAX (16u * 1024u * 1024u)

/* ---- In the child: R embedded ---------------------------------------------------------- */

/* The few entry points of R's C API used here (Rinternals.h, Rembedded.h), resolved from
 * libR.so at run time so that airlock builds without R installed. */
typedef void *sexp;
static struct {
        int (*init_embedded)(int, char **);
        sexp (*parse_eval)(const char *, sexp);
        void (*preserve)(sexp);
        sexp (*protect)(sexp);
        void (*unprotect)(int);
        sexp (*lang4)(sexp, sexp, sexp, sexp);
        sexp (*mkchar_ce)(const char *, int);
        sexp (*scalar_string)(sexp);
        sexp (*scalar_integer)(int);
        sexp (*try_eval)(sexp, sexp, int *);
        int (*length)(sexp);
        int (*is_string)(sexp);
        sexp (*string_elt)(sexp, ptrdiff_t);
        const char *(*r_char)(sexp);
        sexp *global_env;
        sexp *na_string;
        int *interrupts_pending;
} R;

#define CE_UTF8 1

static int r_resolve(void *lib)
{
        const struct {
                void **slot;
                const char *name;
        } syms[] = {
                { (void **) &R.init_embedded, "Rf_initEmbeddedR" },
                { (void **) &R.parse_eval, "R_ParseEvalString" },
                { (void **) &R.preserve, "R_PreserveObject" },
                { (void **) &R.protect, "Rf_protect" },
                { (void **) &R.unprotect, "Rf_unprotect" },
                { (void **) &R.lang4, "Rf_lang4" },
                { (void **) &R.mkchar_ce, "Rf_mkCharCE" },
                { (void **) &R.scalar_string, "Rf_ScalarString" },
                { (void **) &R.scalar_integer, "Rf_ScalarInteger" },
                { (void **) &R.try_eval, "R_tryEval" },
                { (void **) &R.length, "Rf_length" },
                { (void **) &R.is_string, "Rf_isString" },
                { (void **) &R.string_elt, "STRING_ELT" },
                { (void **) &R.r_char, "R_CHAR" },
                { (void **) &R.global_env, "R_GlobalEnv" },
                { (void **) &R.na_string, "R_NaString" },
                { (void **) &R.interrupts_pending, "R_interrupts_pending" },
        };

        for (size_t i = 0; i < sizeof(syms) / sizeof(syms[0]); i++) {
                *syms[i].slot = dlsym(lib, syms[i].name);
                if (!*syms[i].slot)
                        return -ENOENT;
        }
        return 0;
}

/* No execve nor execveat from here on (EACCES), for this process and what it forks: stacked on
 * the sandbox's own filter, which allows prctl(PR_SET_SECCOMP) for that (no_new_privs is set).
 * Another ABI (i386's int 0x80, where execve is 11) ends the process, and x32's numbers are
 * denied too; the sandbox's filter already does both, this one does not count on it. */
#if defined(__x86_64__)
#define R_AUDIT_ARCH AUDIT_ARCH_X86_64
#define R_X32_BIT 0x40000000u
#elif defined(__aarch64__)
#define R_AUDIT_ARCH AUDIT_ARCH_AARCH64
#define R_X32_BIT 0xffffffffu /* no such ABI: only a number no syscall has */
#endif

static int deny_exec(void)
{
        struct sock_filter insns[] = {
                BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),
                BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, R_AUDIT_ARCH, 1, 0),
                BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS),
                BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
                BPF_JUMP(BPF_JMP | BPF_JGE | BPF_K, R_X32_BIT, 2, 0),
                BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_execve, 1, 0),
                BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_execveat, 0, 1),
                BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | EACCES),
                BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
        };
        struct sock_fprog prog = { .len = sizeof(insns) / sizeof(insns[0]), .filter = insns };

        if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
                return -errno;
        if (prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog, 0, 0) < 0)
                return -errno;
        return 0;
}

static void child_answer(json_t *o)
{
        char *text = o ? json_dumps(o, JSON_COMPACT) : NULL;

        if (!text || write_full(R_REPLY_FD, text, strlen(text)) < 0 ||
            write_full(R_REPLY_FD, "\n", 1) < 0)
                _exit(70);
        free(text);
}

_Noreturn static void child_fail(const char *what, const char *detail)
{
        char msg[512];

        (void) snprintf(msg, sizeof(msg), "%s: %s", what, detail ? detail : "?");
        child_answer(json_pack("{s:s, s:s}", "status", "failed", "message", msg));
        _exit(1);
}

/* Element i of the string vector v as a new JSON string (null for NA or past the end). */
static json_t *r_string(sexp v, int i)
{
        sexp e;
        const char *s;
        char *clean;
        json_t *j;

        if (i >= R.length(v))
                return json_null();
        e = R.string_elt(v, i);
        if (e == *R.na_string)
                return json_null();
        s = R.r_char(e);
        clean = utf8_sanitize(s, strlen(s));
        j = clean ? json_string(clean) : json_null();
        free(clean);
        return j;
}

/* The PNG at path as an output, and the file removed; NULL if it cannot be read. */
static json_t *plot_output(const char *path)
{
        _cleanup_free_ char *data = NULL, *b64 = NULL;
        _cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
        struct stat st;

        (void) unlink(path);
        if (fd < 0 || fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || st.st_size > R_PNG_MAX)
                return NULL;
        data = malloc((size_t) st.st_size + 1);
        if (!data || read_full(fd, data, (size_t) st.st_size) < 0)
                return NULL;
        b64 = base64_encode(data, (size_t) st.st_size);
        if (!b64)
                return NULL;
        return json_pack("{s:{s:s, s:s}, s:b}", "data", "image/png", b64, "text/plain",
                         "plot without title", "main", 0);
}

/* The answer for the cell function's vector (airlock_r.R says its layout). */
static json_t *cell_answer(sexp v)
{
        _cleanup_(json_decrefp) json_t *status = r_string(v, 0), *outputs = json_array();
        json_t *error = json_null();
        int n = R.length(v);

        if (strcmp(json_string_value(status) ?: "", "ok") != 0)
                error = json_pack("{s:o, s:o, s:o}", "name", r_string(v, 2), "value",
                                  r_string(v, 3), "traceback", r_string(v, 4));
        for (int i = 5; outputs && i < n; i++) {
                _cleanup_(json_decrefp) json_t *path = r_string(v, i);
                json_t *out = json_is_string(path) ? plot_output(json_string_value(path)) : NULL;
                if (out)
                        (void) json_array_append_new(outputs, out);
        }
        return json_pack("{s:O, s:o, s:o, s:O}", "status", status, "result", r_string(v, 1),
                         "error", error ? error : json_null(), "outputs", outputs);
}

/* Per-call environment and working directory: applied for one cell, then put back. */
static json_t *apply_call(json_t *req, char **ret_cwd)
{
        json_t *env = json_object_get(req, "env"), *saved = json_object(), *v;
        const char *cwd = json_string_value(json_object_get(req, "cwd")), *k;

        *ret_cwd = NULL;
        json_object_foreach (json_is_object(env) ? env : NULL, k, v) {
                const char *old = getenv(k);
                if (!json_is_string(v))
                        continue;
                (void) json_object_set_new(saved, k, old ? json_string(old) : json_null());
                (void) setenv(k, json_string_value(v), 1);
        }
        if (cwd) {
                *ret_cwd = getcwd(NULL, 0);
                (void) chdir(cwd);
        }
        return saved;
}

static void restore_call(json_t *saved, char *cwd)
{
        const char *k;
        json_t *v;

        json_object_foreach (saved, k, v) {
                if (json_is_string(v))
                        (void) setenv(k, json_string_value(v), 1);
                else
                        (void) unsetenv(k);
        }
        json_decref(saved);
        if (cwd)
                (void) chdir(cwd);
        free(cwd);
}

static json_t *child_cell(sexp fn, json_t *req, const char *plotdir)
{
        const char *code = json_string_value(json_object_get(req, "code"));
        _cleanup_free_ char *clean = NULL;
        char *cwd = NULL;
        json_t *saved, *out;
        sexp call, v, code_arg, cell_arg, dir_arg;
        int failed = 0;

        clean = utf8_sanitize(code ?: "", strlen(code ?: ""));
        if (!clean)
                return NULL;
        saved = apply_call(req, &cwd);
        /* Each argument protected as it is made: the next allocation may collect garbage. */
        code_arg = R.protect(R.scalar_string(R.mkchar_ce(clean, CE_UTF8)));
        cell_arg =
                R.protect(R.scalar_integer((int) json_integer_value(json_object_get(req, "cell"))));
        dir_arg = R.protect(R.scalar_string(R.mkchar_ce(plotdir, CE_UTF8)));
        call = R.protect(R.lang4(fn, code_arg, cell_arg, dir_arg));
        /* A SIGINT that came between cells is not this cell's. */
        *R.interrupts_pending = 0;
        v = R.try_eval(call, *R.global_env, &failed);
        if (failed || !v || !R.is_string(v))
                out = repl_error("RError", 1, "the R session could not run the cell");
        else {
                out = cell_answer(R.protect(v));
                R.unprotect(1);
        }
        R.unprotect(4);
        restore_call(saved, cwd);
        return out;
}

_Noreturn static void r_child(void *arg)
{
        bool shell_allowed = *(const bool *) arg;
        char *argv[] = { "R", "--vanilla", "--silent", "--no-readline", NULL };
        char plotdir[] = "/tmp/.airlock-r-XXXXXX";
        _cleanup_free_ char *line = NULL;
        size_t size = 0;
        FILE *in;
        void *lib;
        sexp fn;
        int r;

        /* The zygote's reaper, inherited: R waits for its own children. */
        (void) signal(SIGCHLD, SIG_DFL);
        if (!shell_allowed && (r = deny_exec()) < 0)
                child_fail("cannot forbid R to execute programs", strerror(-r));
        /* What /usr/bin/R sets before it executes R itself. */
        if (setenv("R_HOME", R_HOME, 1) < 0 || setenv("R_SHARE_DIR", "/usr/share/R/share", 1) < 0 ||
            setenv("R_INCLUDE_DIR", "/usr/share/R/include", 1) < 0 ||
            setenv("R_DOC_DIR", "/usr/share/R/doc", 1) < 0)
                child_fail("cannot set R's environment", strerror(errno));
        /* airlock_r.R attaches the default packages itself then (it says why). */
        if (!shell_allowed && (setenv("AIRLOCK_R_NO_EXEC", "1", 1) < 0 ||
                               setenv("R_DEFAULT_PACKAGES", "NULL", 1) < 0))
                child_fail("cannot set R's environment", strerror(errno));
        (void) setvbuf(stdout, NULL, _IONBF, 0);
        lib = dlopen(R_LIBRARY, RTLD_NOW | RTLD_GLOBAL);
        if (!lib)
                child_fail("cannot load R", dlerror());
        if (r_resolve(lib) < 0)
                child_fail(R_LIBRARY " lacks a function airlock needs", "R 4.1 or later has them");
        if (!mkdtemp(plotdir))
                child_fail("cannot make R's plot directory", strerror(errno));
        R.init_embedded(4, argv);
        fn = R.parse_eval((const char *) r_src_source, *R.global_env);
        R.preserve(fn);
        child_answer(json_pack("{s:s}", "status", "ready"));

        in = fdopen(R_CMD_FD, "r");
        if (!in)
                _exit(70);
        while (getline(&line, &size, in) > 0) {
                _cleanup_(json_decrefp) json_t *req = json_loads(line, 0, NULL), *out = NULL;
                if (!json_is_object(req))
                        _exit(70); /* the runner never sends this */
                out = child_cell(fn, req, plotdir);
                child_answer(out);
        }
        _exit(0);
}

/* ---- In the runner ----------------------------------------------------------------------- */

static int r_check(void)
{
        return access(R_LIBRARY, R_OK) < 0 ? -ENOENT : 0;
}

static const struct repl_kind r_kind = {
        .program = "R",
        .language = "r",
        .vars = "R",
        .missing = "r needs R (" R_LIBRARY "), which is not installed in this profile's root "
                   "filesystem (apt-get install r-base-core)",
        .stop_hint = " (stuck in compiled code)",
        .check = r_check,
        .child = r_child,
};

static struct repl rproc = REPL_INIT(&r_kind);

bool r_has_state(void)
{
        return repl_is_running(&rproc);
}

json_t *r_run(const char *code, json_t *req, bool shell_allowed)
{
        /* Plots ride in the answer as base64, besides the strings the runner cuts later. */
        return repl_run(&rproc, &shell_allowed, code, req, 64u * 1024u * 1024u);
}
