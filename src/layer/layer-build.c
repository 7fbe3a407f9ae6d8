/* Building a profile layer (layer.h): Debian's pip installs the profile's wheels into a new
 * directory beside the current layer, the installed packages are read back into a manifest,
 * and `current` is swapped to the new layer with one rename(2). A failure leaves the current
 * layer as it was. pip runs as a child whose output is streamed line by line to the caller. */
#include "layer.h"

#include "layer-internal.h"

#include "base/cleanup.h"
#include "base/json-util.h"
#include "base/util.h"
#include "profile/profile.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/file.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define LAYER_PYTHON "/usr/bin/python3"
#define LAYER_LINE_MAX 4096
#define LAYER_RECORD_MAX (16u << 20)
#define LAYER_METADATA_MAX (64u << 10)

/* The requirements to install: packages.install, or every wheel of packages.wheels. */
static int collect_requirements(const struct profile *p, struct layer_strv *reqs,
                                struct airlock_error *err)
{
        const struct profile_packages *pk = &p->packages;
        int r;

        if ((!pk->install || !pk->install[0]) && !pk->wheels_dir)
                return airlock_error_set(err, -EINVAL,
                                         "profile '%s' has nothing to install: give it "
                                         "\"packages\": {\"install\": [\"NAME==VERSION\", ...]} "
                                         "and an \"index_url\" or a \"wheels\" directory "
                                         "(docs/PROFILES.md)",
                                         p->name);
        if (pk->wheels_dir) {
                struct stat st;
                if (pk->wheels_dir[0] != '/')
                        return airlock_error_set(err, -EINVAL,
                                                 "profile '%s': packages.wheels must be an "
                                                 "absolute directory path, not '%s'",
                                                 p->name, pk->wheels_dir);
                if (stat(pk->wheels_dir, &st) < 0 || !S_ISDIR(st.st_mode))
                        return airlock_error_set(err, -ENOENT,
                                                 "profile '%s': packages.wheels: %s is not a "
                                                 "directory",
                                                 p->name, pk->wheels_dir);
        }
        if (pk->install && pk->install[0]) {
                for (char **s = pk->install; *s; s++) {
                        /* pip would read "-..." as an option, e.g. another --index-url. */
                        if (!**s || **s == '-')
                                return airlock_error_set(err, -EINVAL,
                                                         "profile '%s': packages.install: '%s' "
                                                         "is not a requirement (a name with "
                                                         "an optional version, e.g. "
                                                         "\"rdkit==2024.3\")",
                                                         p->name, *s);
                        r = layer_strv_push(reqs, *s);
                        if (r < 0)
                                return r;
                }
                return 0;
        }

        /* A wheels directory without an install list: every wheel in it. */
        {
                _cleanup_(layer_closedirp) DIR *d = opendir(pk->wheels_dir);
                struct dirent *de;
                size_t first = reqs->n;
                if (!d)
                        return airlock_error_set(err, -errno, "cannot read %s: %s", pk->wheels_dir,
                                                 strerror(errno));
                while ((de = readdir(d))) {
                        size_t len = strlen(de->d_name);
                        _cleanup_free_ char *path = NULL;
                        struct stat st;
                        if (len < 5 || strcmp(de->d_name + len - 4, ".whl") != 0 ||
                            de->d_name[0] == '.')
                                continue;
                        if (asprintf(&path, "%s/%s", pk->wheels_dir, de->d_name) < 0)
                                return -ENOMEM;
                        if (stat(path, &st) < 0 || !S_ISREG(st.st_mode))
                                continue;
                        r = layer_strv_push(reqs, path);
                        if (r < 0)
                                return r;
                }
                if (reqs->n == first)
                        return airlock_error_set(err, -EINVAL,
                                                 "profile '%s' has nothing to install: "
                                                 "packages.wheels (%s) holds no *.whl file and "
                                                 "there is no packages.install list",
                                                 p->name, pk->wheels_dir);
                qsort(reqs->v + first, reqs->n - first, sizeof(char *), layer_cmp_str);
        }
        return 0;
}

static int build_argv(const char *python, const struct profile *p, const char *target,
                      char *const *reqs, struct layer_strv *argv)
{
        const struct profile_packages *pk = &p->packages;
        /* -I: no PYTHON* variables, no user site and no current directory on sys.path, so it
         * is Debian's pip that runs. --isolated: no PIP_* variables or user pip.conf; the
         * profile says where packages come from. --only-binary: wheels only, so no package's
         * setup.py or build backend ever runs on the host. */
        const char *fixed[] = { python,
                                "-I",
                                "-m",
                                "pip",
                                "install",
                                "--isolated",
                                "--no-input",
                                "--disable-pip-version-check",
                                "--only-binary=:all:",
                                "--no-warn-script-location",
                                "--root-user-action=ignore",
                                "--target",
                                target };
        int r = 0;

        for (size_t i = 0; i < ELEMENTSOF(fixed) && r >= 0; i++)
                r = layer_strv_push(argv, fixed[i]);
        if (r >= 0 && pk->index_url) {
                r = layer_strv_push(argv, "--index-url");
                if (r >= 0)
                        r = layer_strv_push(argv, pk->index_url);
        }
        for (char **h = pk->trusted_hosts; h && *h && r >= 0; h++) {
                r = layer_strv_push(argv, "--trusted-host");
                if (r >= 0)
                        r = layer_strv_push(argv, *h);
        }
        if (r >= 0 && pk->wheels_dir) {
                r = layer_strv_push(argv, "--find-links");
                if (r >= 0)
                        r = layer_strv_push(argv, pk->wheels_dir);
                if (r >= 0 && !pk->index_url)
                        r = layer_strv_push(argv, "--no-index");
        }
        if (r >= 0)
                r = layer_strv_push(argv, "--");
        for (char *const *s = reqs; *s && r >= 0; s++)
                r = layer_strv_push(argv, *s);
        return r;
}

/* Splits pip's output into lines for the caller, remembering the first "ERROR:" line and the
 * last line for the error message. */
struct pip_output {
        const struct layer_build_options *opts;
        char line[LAYER_LINE_MAX + 1];
        size_t len;
        bool cut; /* the rest of an overlong line is being dropped */
        char first_error[320];
        char last[320];
};

static void pip_output_flush(struct pip_output *o)
{
        if (o->len == 0)
                return;
        o->line[o->len] = '\0';
        /* Cut to what a message has room for. */
        if (!o->first_error[0] && strncmp(o->line, "ERROR:", 6) == 0)
                (void) snprintf(o->first_error, sizeof(o->first_error), "%.*s",
                                (int) sizeof(o->first_error) - 1, o->line);
        (void) snprintf(o->last, sizeof(o->last), "%.*s", (int) sizeof(o->last) - 1, o->line);
        if (o->opts->on_output)
                o->opts->on_output(o->opts->userdata, o->line);
        o->len = 0;
}

static void pip_output_feed(struct pip_output *o, const char *buf, size_t n)
{
        for (size_t i = 0; i < n; i++) {
                char c = buf[i];
                if (c == '\n' || c == '\r') {
                        if (!o->cut)
                                pip_output_flush(o);
                        o->cut = false;
                        o->len = 0;
                        continue;
                }
                if (o->cut)
                        continue;
                o->line[o->len++] = c;
                if (o->len == LAYER_LINE_MAX) {
                        pip_output_flush(o);
                        o->cut = true;
                }
        }
}

/* Runs pip with its output on one pipe; *ret_status gets its exit status (128 + N for a death
 * by signal N). */
static int run_pip(char *const *argv, struct pip_output *out, int *ret_status,
                   struct airlock_error *err)
{
        _cleanup_close_ int rd = -EBADF;
        int fds[2], status;
        pid_t parent = getpid(), pid;
        char buf[8192];
        ssize_t n;

        if (pipe2(fds, O_CLOEXEC) < 0)
                return -errno;
        pid = fork();
        if (pid < 0) {
                int r = -errno;
                (void) close(fds[0]);
                (void) close(fds[1]);
                return airlock_error_set(err, r, "cannot start pip: %s", strerror(-r));
        }
        if (pid == 0) {
                int null = open("/dev/null", O_RDONLY | O_CLOEXEC);
                sigset_t all;
                /* The caller may ignore SIGINT while we wait, as system(3) does: pip gets the
                 * default dispositions back, so ^C stops it and the build fails cleanly. */
                (void) signal(SIGINT, SIG_DFL);
                (void) signal(SIGQUIT, SIG_DFL);
                (void) signal(SIGTERM, SIG_DFL);
                (void) signal(SIGPIPE, SIG_DFL);
                (void) sigemptyset(&all);
                (void) sigprocmask(SIG_SETMASK, &all, NULL);
                /* pip must not go on writing into a layer nobody watches any more. */
                if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0 || getppid() != parent)
                        _exit(127);
                if (null < 0 || dup2(null, 0) < 0 || dup2(fds[1], 1) < 0 || dup2(fds[1], 2) < 0)
                        _exit(127);
                (void) umask(022); /* the sandbox's user reads the layer as "other" */
                execv(argv[0], argv);
                _exit(127);
        }
        (void) close(fds[1]);
        rd = fds[0];
        while ((n = read(rd, buf, sizeof(buf))) != 0) {
                if (n < 0) {
                        if (errno == EINTR)
                                continue;
                        break;
                }
                pip_output_feed(out, buf, (size_t) n);
        }
        pip_output_flush(out);
        while (waitpid(pid, &status, 0) < 0)
                if (errno != EINTR)
                        return airlock_error_set(err, -errno, "waitpid(pip): %s", strerror(errno));
        *ret_status = WIFEXITED(status)     ? WEXITSTATUS(status)
                      : WIFSIGNALED(status) ? 128 + WTERMSIG(status)
                                            : 255;
        return 0;
}

/* The value of header key in the header lines of a METADATA file (up to the first empty
 * line), copied into out; "" when it has none. */
static void metadata_header(const char *text, const char *key, char *out, size_t size)
{
        size_t klen = strlen(key);

        out[0] = '\0';
        for (const char *l = text; *l && *l != '\n' && *l != '\r';) {
                const char *nl = strchr(l, '\n');
                if (strncasecmp(l, key, klen) == 0 && l[klen] == ':') {
                        const char *v = l + klen + 1;
                        size_t len;
                        while (*v == ' ' || *v == '\t')
                                v++;
                        len = strcspn(v, "\r\n");
                        if (len >= size)
                                len = size - 1;
                        memcpy(out, v, len);
                        out[len] = '\0';
                        return;
                }
                if (!nl)
                        return;
                l = nl + 1;
        }
}

/* The first field of a RECORD line (CSV: possibly quoted, "" inside quotes is one quote). */
static bool record_path(const char *line, char *out, size_t size)
{
        size_t o = 0;

        if (*line == '"') {
                for (line++; *line; line++) {
                        if (*line == '"') {
                                if (line[1] != '"')
                                        break;
                                line++;
                        }
                        if (o + 1 >= size)
                                return false;
                        out[o++] = *line;
                }
        } else {
                for (; *line && *line != ',' && *line != '\n' && *line != '\r'; line++) {
                        if (o + 1 >= size)
                                return false;
                        out[o++] = *line;
                }
        }
        out[o] = '\0';
        return o > 0;
}

/* Whether a RECORD path stays inside site-packages ("../../bin/x" of scripts does not). */
static bool path_is_beneath(const char *path)
{
        if (path[0] == '/')
                return false;
        for (const char *c = path;;) {
                size_t len = strcspn(c, "/");
                if (len == 2 && c[0] == '.' && c[1] == '.')
                        return false;
                if (!c[len])
                        return true;
                c += len + 1;
        }
}

/* The bytes a package's files take: the files its RECORD lists, as they are on disk. */
static uint64_t package_size(int site, int distinfo)
{
        _cleanup_fclose_ FILE *f = NULL;
        _cleanup_free_ char *line = NULL;
        size_t cap = 0, total = 0;
        uint64_t bytes = 0;
        ssize_t n;
        int fd;

        fd = openat(distinfo, "RECORD", O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NOCTTY);
        if (fd < 0)
                return 0;
        f = fdopen(fd, "r");
        if (!f) {
                (void) close(fd);
                return 0;
        }
        while ((n = getline(&line, &cap, f)) > 0 && total < LAYER_RECORD_MAX) {
                char path[PATH_MAX];
                struct stat st;
                total += (size_t) n;
                if (!record_path(line, path, sizeof(path)) || !path_is_beneath(path))
                        continue;
                if (fstatat(site, path, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(st.st_mode))
                        bytes += (uint64_t) st.st_size;
        }
        return bytes;
}

/* [{"name", "version", "size"}] of the *.dist-info directories in site-packages. */
static int scan_packages(int site, json_t **ret)
{
        _cleanup_(layer_closedirp) DIR *d = NULL;
        json_t *arr = json_array();
        struct dirent *de;
        int r;

        if (!arr)
                return -ENOMEM;
        r = layer_opendir_at(site, ".", &d);
        if (r < 0) {
                json_decref(arr);
                return r;
        }
        while ((de = readdir(d))) {
                _cleanup_close_ int di = -EBADF;
                _cleanup_free_ char *text = NULL;
                char name[256], version[128];
                size_t len = strlen(de->d_name);
                ssize_t got;
                if (len < 11 || strcmp(de->d_name + len - 10, ".dist-info") != 0)
                        continue;
                di = openat(site, de->d_name, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
                text = malloc(LAYER_METADATA_MAX);
                if (di < 0 || !text)
                        continue;
                got = read_small_file_at(di, "METADATA", text, LAYER_METADATA_MAX);
                if (got < 0)
                        continue;
                metadata_header(text, "Name", name, sizeof(name));
                metadata_header(text, "Version", version, sizeof(version));
                if (!name[0])
                        continue;
                json_array_append_new(arr,
                                      json_pack("{s:s, s:s, s:I}", "name", name, "version", version,
                                                "size", (json_int_t) package_size(site, di)));
        }
        /* Sorted by name, case-insensitively, so manifests of equal layers compare equal. */
        {
                size_t n = json_array_size(arr);
                for (size_t i = 1; i < n; i++)
                        for (size_t j = i; j > 0; j--) {
                                json_t *a = json_array_get(arr, j - 1), *b = json_array_get(arr, j);
                                if (strcasecmp(json_string_value(json_object_get(a, "name")),
                                               json_string_value(json_object_get(b, "name"))) <= 0)
                                        break;
                                json_incref(a);
                                json_array_set(arr, j - 1, b);
                                json_array_set_new(arr, j, a);
                        }
        }
        *ret = arr;
        return 0;
}

static int write_manifest(int layer, const json_t *m)
{
        _cleanup_free_ char *text = json_dump_text(m, JSON_INDENT(2) | JSON_SORT_KEYS, NULL);
        _cleanup_close_ int fd = -EBADF;
        int r;

        if (!text)
                return -ENOMEM;
        fd = openat(layer, "layer.json.tmp", O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW,
                    0644);
        if (fd < 0)
                return -errno;
        r = write_full(fd, text, strlen(text));
        if (r >= 0)
                r = write_full(fd, "\n", 1);
        if (r >= 0 && fsync(fd) < 0)
                r = -errno;
        if (r < 0)
                return r;
        if (renameat(layer, "layer.json.tmp", layer, "layer.json") < 0)
                return -errno;
        return 0;
}

/* Points `current` at id: a new link beside it, renamed over it in one step, so that a reader
 * sees the old layer or the new one, never neither. */
static int swap_current(int pdir, const char *id)
{
        if (unlinkat(pdir, "current.tmp", 0) < 0 && errno != ENOENT)
                return -errno;
        if (symlinkat(id, pdir, "current.tmp") < 0)
                return -errno;
        if (renameat(pdir, "current.tmp", pdir, "current") < 0)
                return -errno;
        if (fsync(pdir) < 0)
                return -errno;
        return 0;
}

/* A new layer id from the time and 3 random bytes. */
static int new_layer_id(char id[static LAYER_ID_LEN + 1], char created[static 32])
{
        time_t now = time(NULL);
        struct tm tm;
        char rnd[7];
        int r;

        if (!gmtime_r(&now, &tm))
                return -EINVAL;
        r = random_hex(rnd, 3);
        if (r < 0)
                return r;
        (void) strftime(id, LAYER_ID_LEN + 1 - 6, "%Y%m%d-%H%M%S-", &tm);
        memcpy(id + LAYER_ID_LEN - 6, rnd, 7);
        (void) strftime(created, 32, "%Y-%m-%dT%H:%M:%SZ", &tm);
        return 0;
}

/* Runs pip into layer id of the profile directory and writes its manifest. */
static int fill_layer(int pdir, const char *path, const char *id, const char *created,
                      const struct profile *p, char *const *reqs,
                      const struct layer_build_options *opts, json_t **ret_manifest,
                      struct airlock_error *err)
{
        const struct profile_packages *pk = &p->packages;
        _cleanup_(layer_strv_done) struct layer_strv argv = { 0 };
        _cleanup_free_ char *target = NULL, *index_shown = NULL;
        _cleanup_free_ struct pip_output *out = NULL;
        _cleanup_close_ int layer = -EBADF, lock = -EBADF, site = -EBADF;
        const char *python = opts && opts->python ? opts->python : LAYER_PYTHON;
        static const struct layer_build_options no_opts = { 0 };
        struct layer_tree_count c = { 0 };
        json_t *packages = NULL, *m;
        int r, status = 0;

        if (access(python, X_OK) < 0)
                return airlock_error_set(err, -errno,
                                         "cannot run %s: %s (Debian's python3 and python3-pip "
                                         "build layers: apt-get install python3-pip)",
                                         python, strerror(errno));
        if (asprintf(&target, "%s/%s/site-packages", path, id) < 0)
                return -ENOMEM;
        r = build_argv(python, p, target, reqs, &argv);
        if (r < 0)
                return r;

        layer = openat(pdir, id, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
        if (layer < 0)
                return airlock_error_set(err, -errno, "cannot open %s/%s: %s", path, id,
                                         strerror(errno));
        /* 0600 and root's: no sandbox user can open it, so no code in a session can take a lock
         * that would keep the layer from being removed, or the daemon from using it. */
        lock = openat(layer, ".lock", O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
        if (lock < 0 || mkdirat(layer, "site-packages", 0755) < 0)
                return airlock_error_set(err, -errno, "cannot prepare %s/%s: %s", path, id,
                                         strerror(errno));

        out = calloc(1, sizeof(*out));
        if (!out)
                return -ENOMEM;
        out->opts = opts ? opts : &no_opts;
        r = run_pip(argv.v, out, &status, err);
        if (r < 0)
                return r;
        if (status != 0) {
                const char *why = out->first_error[0] ? out->first_error : out->last;
                if (strstr(out->last, "No module named pip"))
                        return airlock_error_set(err, -EIO,
                                                 "%s has no pip module (apt-get install "
                                                 "python3-pip)",
                                                 python);
                if (status > 128)
                        return airlock_error_set(err, -EIO, "pip was killed by signal %d%s%s",
                                                 status - 128, why[0] ? ": " : "", why);
                return airlock_error_set(err, -EIO, "pip exited with status %d%s%s", status,
                                         why[0] ? ": " : "", why);
        }

        site = openat(layer, "site-packages", O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
        if (site < 0)
                return -errno;
        r = scan_packages(site, &packages);
        if (r < 0)
                return airlock_error_set(err, r, "cannot read %s: %s", target, strerror(-r));
        if (json_array_size(packages) == 0) {
                json_decref(packages);
                return airlock_error_set(err, -EIO,
                                         "pip succeeded but installed no package into %s", target);
        }
        r = layer_tree_walk(layer, "site-packages", false, &c, 0);
        if (r < 0) {
                json_decref(packages);
                return airlock_error_set(err, r, "cannot measure %s: %s", target, strerror(-r));
        }
        /* The manifest is readable inside the sandbox: no index credentials in it. */
        if (pk->index_url) {
                index_shown = layer_url_redact(pk->index_url);
                if (!index_shown) {
                        json_decref(packages);
                        return -ENOMEM;
                }
                for (size_t i = 1; i < argv.n; i++)
                        if (strcmp(argv.v[i - 1], "--index-url") == 0) {
                                free(argv.v[i]);
                                argv.v[i] = strdup(index_shown);
                                if (!argv.v[i]) {
                                        json_decref(packages);
                                        return -ENOMEM;
                                }
                        }
        }
        m = json_pack("{s:s, s:s, s:s, s:I, s:I, s:o, s:{s:o, s:s?, s:o, s:s?, s:o}}", "id", id,
                      "profile", p->name, "created", created, "size", (json_int_t) c.bytes, "files",
                      (json_int_t) c.files, "packages", packages, "pip", "argv", json_strv(argv.v),
                      "index_url", index_shown, "trusted_hosts", json_strv(pk->trusted_hosts),
                      "wheels", pk->wheels_dir, "install", json_strv(reqs));
        if (!m)
                return -ENOMEM;
        r = write_manifest(layer, m);
        if (r < 0) {
                json_decref(m);
                return airlock_error_set(err, r, "cannot write %s/%s/layer.json: %s", path, id,
                                         strerror(-r));
        }
        *ret_manifest = m;
        return 0;
}

int layer_build(const char *state_dir, const struct profile *p,
                const struct layer_build_options *opts, json_t **ret_manifest, json_t **ret_gc,
                struct airlock_error *err)
{
        _cleanup_free_ char *path = NULL;
        _cleanup_close_ int pdir = -EBADF, lock = -EBADF;
        _cleanup_(layer_strv_done) struct layer_strv reqs = { 0 };
        char id[LAYER_ID_LEN + 1], created[32];
        json_t *manifest = NULL, *report;
        int r;

        r = layer_profile_path(state_dir, p->name, &path, err);
        if (r < 0)
                return r;
        /* Refuse a profile with nothing to install before anything is made on disk. */
        r = collect_requirements(p, &reqs, err);
        if (r < 0)
                return r;
        r = layer_profile_open(path, true, &pdir, err);
        if (r < 0)
                return r == -ENOENT ? airlock_error_set(err, r, "cannot open %s", path) : r;
        r = layer_profile_lock(pdir, path, p->name, &lock, err);
        if (r < 0)
                return r;
        for (int attempt = 0;; attempt++) {
                r = new_layer_id(id, created);
                if (r < 0)
                        return r;
                if (mkdirat(pdir, id, 0755) == 0)
                        break;
                if (errno != EEXIST || attempt == 8)
                        return airlock_error_set(err, -errno, "cannot create %s/%s: %s", path, id,
                                                 strerror(errno));
        }

        r = fill_layer(pdir, path, id, created, p, reqs.v, opts, &manifest, err);
        if (r >= 0) {
                r = swap_current(pdir, id);
                if (r < 0) {
                        json_decref(TAKE_PTR(manifest));
                        airlock_error_set(err, r, "cannot make %s/current point at %s: %s", path,
                                          id, strerror(-r));
                }
        }
        if (r < 0) {
                /* The half-built layer goes; the current one was never touched. */
                struct layer_tree_count c = { 0 };
                (void) layer_tree_walk(pdir, id, true, &c, 0);
                return r;
        }

        report = layer_gc_report_new();
        if (!report) {
                json_decref(manifest);
                return -ENOMEM;
        }
        /* Old layers nobody uses any more. A failure here does not undo the build. */
        {
                struct airlock_error gc_err = { { 0 } };
                if (layer_gc_locked(pdir, path, id, report, &gc_err) < 0)
                        json_object_set_new(report, "error", json_string(gc_err.msg));
        }
        *ret_manifest = manifest;
        if (ret_gc)
                *ret_gc = report;
        else
                json_decref(report);
        return 0;
}
