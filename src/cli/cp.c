/* `airlock cp`: files in and out of a session of a running daemon, docker-cp style, over the
 * files API (docs/API.md): a file is one PUT or GET, a directory (-r) a walk that PUTs each file
 * or lists and GETs each one. The daemon checks every path beneath /work; this file only builds
 * them, and never follows a link it finds on either side (a link named on the command line is
 * the user's own, followed as cp follows it). */
#include "cli.h"
#include "client.h"
#include "output.h"

#include "base/cleanup.h"
#include "base/util.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define CP_FILE_MAX (64u * 1024u * 1024u) /* what one files API call carries */
#define CP_DEPTH_MAX 64

static const char cp_help[] =
        "usage: airlock cp [-r] [--url URL] [--state-dir DIR] SRC DST\n"
        "\n"
        "Copies files between this machine and a session of a running `airlock serve`, like\n"
        "docker cp. One of SRC and DST is in the session, written ID:PATH, with PATH relative\n"
        "to the session's /work (/work/PATH is accepted too; ID: alone is /work itself):\n"
        "\n"
        "  airlock cp ./data.csv s-ID:data.csv       upload a file\n"
        "  airlock cp s-ID:out/plot.png .            download into the current directory\n"
        "  airlock cp -r results s-ID:inputs         upload a directory\n"
        "  airlock cp s-ID:log.txt -                 write a file to standard output\n"
        "  echo hi | airlock cp - s-ID:hello.txt     read a file from standard input\n"
        "\n"
        "As with cp, a DST that is an existing directory (or ends in /) receives SRC under\n"
        "its own name; otherwise DST is the new name. A local path with a ':' in its first\n"
        "component is written ./a:b. Files replace files of the same name. Symbolic links\n"
        "and special files are skipped (with a note), never followed; empty directories are\n"
        "not copied into a session. At most 64 MiB per file.\n"
        "\n"
        "  -r, --recursive       copy directories\n"
        "      --url URL         the daemon: http://HOST:PORT or unix:/PATH; also\n"
        "                        AIRLOCK_URL; default: " CLI_DEFAULT_URL "\n"
        "      --state-dir DIR   where the daemon keeps its token (when AIRLOCK_TOKEN is\n"
        "                        not set)\n"
        "\n"
        "exit status: 0 copied; 1 the daemon refused or a file could not be copied (the\n"
        "others still are); 2 bad arguments.\n";

static void closedirp(DIR **d)
{
        if (*d)
                (void) closedir(*d);
}

struct cp_args {
        const char *url;
        const char *state_dir;
        const char *src, *dst;
        bool recursive;
};

/* One side of the copy. */
struct cp_end {
        const char *arg;  /* as given */
        char id[65];      /* the session; "" for a local path */
        const char *path; /* local: the path ("-" = stdio); remote: relative to /work, "" = it */
};

struct cp_ctx {
        struct cli_client *c;
        const char *id;
        bool failed;
};

static bool id_char(char ch)
{
        return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
               ch == '-' || ch == '_' || ch == '.';
}

/* "ID:PATH" is a session's; anything else (a '/' before the first ':', no ':') is local. */
static int parse_end(const char *arg, struct cp_end *e)
{
        const char *colon = strchr(arg, ':');
        size_t n;

        *e = (struct cp_end){ .arg = arg, .path = arg };
        if (!colon || memchr(arg, '/', (size_t) (colon - arg)))
                return 0;
        n = (size_t) (colon - arg);
        if (n == 0 || n >= sizeof(e->id) || (n <= 2 && arg[0] == '.' && arg[n - 1] == '.'))
                goto bad;
        for (size_t i = 0; i < n; i++)
                if (!id_char(arg[i]))
                        goto bad;
        memcpy(e->id, arg, n);
        e->id[n] = '\0';
        e->path = colon + 1;
        if (strcmp(e->path, "/work") == 0 || strcmp(e->path, "/work/") == 0)
                e->path = "";
        else if (strncmp(e->path, "/work/", 6) == 0)
                e->path += 6;
        else if (e->path[0] == '/') {
                fprintf(stderr,
                        "airlock cp: '%s': a session's files are under /work; give a path "
                        "relative to it (or /work/...)\n",
                        arg);
                return -EINVAL;
        }
        /* The daemon refuses these too, but a URL with "." or ".." would be resolved by
         * curl into another route before it gets there. */
        for (const char *p = e->path; *p;) {
                size_t len = strcspn(p, "/");
                if (len == 0) {
                        fprintf(stderr, "airlock cp: '%s': an empty name between slashes\n", arg);
                        return -EINVAL;
                }
                if ((len == 1 && p[0] == '.') || (len == 2 && p[0] == '.' && p[1] == '.')) {
                        fprintf(stderr,
                                "airlock cp: '%s': '%.*s' is not a name in a session "
                                "path\n",
                                arg, (int) len, p);
                        return -EINVAL;
                }
                p += len;
                if (*p == '/')
                        p++;
        }
        return 0;
bad:
        fprintf(stderr,
                "airlock cp: '%.*s' in '%s' is not a session id (write a local path "
                "with ':' as ./%s)\n",
                (int) n, arg, arg, arg);
        return -EINVAL;
}

static bool is_remote(const struct cp_end *e)
{
        return e->id[0] != '\0';
}

/* The last component of path ("" for none), without trailing slashes, in a new string. */
static char *base_name(const char *path)
{
        size_t n = strlen(path), start;

        while (n > 0 && path[n - 1] == '/')
                n--;
        start = n;
        while (start > 0 && path[start - 1] != '/')
                start--;
        return strndup(path + start, n - start);
}

/* "a" + "b" -> "a/b"; "" + "b" -> "b". */
static char *join(const char *dir, const char *name)
{
        char *s;
        size_t n = strlen(dir);

        while (n > 0 && dir[n - 1] == '/')
                n--;
        if (asprintf(&s, "%.*s%s%s", (int) n, dir, n ? "/" : "", name) < 0)
                return NULL;
        return s;
}

/* "/v1/sessions/ID/files/<path, percent-encoded but its slashes>" plus an optional query. */
static char *files_url(const char *id, const char *path, bool listing)
{
        static const char hex[] = "0123456789ABCDEF";
        _cleanup_free_ char *enc = malloc(strlen(path) * 3 + 1);
        char *o = enc, *s;

        if (!enc)
                return NULL;
        for (const unsigned char *p = (const unsigned char *) path; *p; p++) {
                if (id_char((char) *p) || *p == '~' || *p == '/') {
                        *o++ = (char) *p;
                } else {
                        *o++ = '%';
                        *o++ = hex[*p >> 4];
                        *o++ = hex[*p & 15];
                }
        }
        *o = '\0';
        if (listing)
                return asprintf(&s, "/v1/sessions/%s/files?dir=%s", id, enc) < 0 ? NULL : s;
        return asprintf(&s, "/v1/sessions/%s/files/%s", id, enc) < 0 ? NULL : s;
}

/* Prints the daemon's refusal, naming what was being copied. */
static void refused(struct cp_ctx *x, const char *what, const struct cli_response *resp)
{
        _cleanup_(json_decrefp) json_t *obj =
                resp->body ? json_loadb(resp->body, resp->len, 0, NULL) : NULL;
        const char *msg = json_string_value(json_object_get(obj, "error"));

        if (resp->status == 401 || !msg)
                cli_client_print_error(x->c, resp);
        else
                fprintf(stderr, "airlock cp: %s:%s: %s (HTTP %ld)\n", x->id, what, msg,
                        resp->status);
        x->failed = true;
}

/* What a remote path is: 'd' a directory (its listing in *ret_listing), 'f' something else
 * that exists (a file, or what GET will name), 0 missing, -errno after printing why. */
static int remote_kind(struct cp_ctx *x, const char *path, json_t **ret_listing)
{
        _cleanup_free_ char *url = files_url(x->id, path, true);
        struct cli_response resp = { 0 };
        int r;

        if (!url)
                return -ENOMEM;
        r = cli_client_request(x->c, "GET", url, NULL, 0, NULL, NULL, &resp);
        if (r < 0)
                return r;
        if (resp.status == 200) {
                json_t *obj = json_loadb(resp.body ? resp.body : "", resp.len, 0, NULL);
                free(resp.body);
                if (!json_is_object(obj)) {
                        json_decref(obj);
                        fprintf(stderr, "airlock cp: the daemon's listing is not JSON\n");
                        return -EBADMSG;
                }
                if (ret_listing)
                        *ret_listing = obj;
                else
                        json_decref(obj);
                return 'd';
        }
        /* 400 names a path that is not a directory, 404 one that does not exist; a 404 for
         * an unknown session says so in its message, shown by the call that needs the path. */
        if (resp.status == 400 || resp.status == 404) {
                _cleanup_(json_decrefp) json_t *obj =
                        resp.body ? json_loadb(resp.body, resp.len, 0, NULL) : NULL;
                const char *msg = json_string_value(json_object_get(obj, "error"));
                bool session_missing = resp.status == 404 && msg && strstr(msg, "session");

                if (!session_missing && !(resp.status == 400 && msg && strstr(msg, "field")) &&
                    !(resp.status == 400 && msg && strstr(msg, "symbolic link"))) {
                        free(resp.body);
                        return resp.status == 400 ? 'f' : 0;
                }
        }
        refused(x, path[0] ? path : "/work", &resp);
        free(resp.body);
        return -EPROTO;
}

static void local_failed(struct cp_ctx *x, const char *what, int r)
{
        fprintf(stderr, "airlock cp: '%s': %s\n", what,
                r == -E2BIG    ? "larger than the 64 MiB one file may be"
                : r == -ELOOP  ? "a symbolic link, not followed"
                : r == -EISDIR ? "is a directory (copy directories with -r)"
                               : strerror(-r));
        x->failed = true;
}

static int put_file(struct cp_ctx *x, const char *local, const char *remote)
{
        _cleanup_free_ char *data = NULL, *url = NULL;
        struct cli_response resp = { 0 };
        size_t len = 0;
        int r;

        if (!*remote) {
                fprintf(stderr, "airlock cp: '%s' needs a file name in the session\n", local);
                x->failed = true;
                return -EINVAL;
        }
        r = cli_read_file(local, CP_FILE_MAX, &data, &len);
        if (r < 0) {
                local_failed(x, local, r);
                return r;
        }
        url = files_url(x->id, remote, false);
        if (!url)
                return -ENOMEM;
        r = cli_client_request(x->c, "PUT", url, data ? data : "", len, NULL, NULL, &resp);
        if (r < 0) {
                x->failed = true;
                return r;
        }
        if (resp.status != 200)
                refused(x, remote, &resp);
        free(resp.body);
        return 0;
}

/* Uploads the directory local (an fd of it) into remote, file by file. */
static int put_tree(struct cp_ctx *x, int dirfd, const char *local, const char *remote, int depth)
{
        _cleanup_(closedirp) DIR *d = NULL;
        struct dirent *de;
        int fd;

        if (depth > CP_DEPTH_MAX) {
                fprintf(stderr, "airlock cp: '%s': deeper than %d levels, not copied\n", local,
                        CP_DEPTH_MAX);
                x->failed = true;
                return 0;
        }
        fd = dup(dirfd);
        if (fd < 0 || !(d = fdopendir(fd))) {
                if (fd >= 0)
                        close(fd);
                local_failed(x, local, -errno);
                return 0;
        }
        while ((de = readdir(d))) {
                _cleanup_free_ char *lpath = NULL, *rpath = NULL;
                _cleanup_close_ int sub = -EBADF;
                struct stat st;

                if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
                        continue;
                lpath = join(local, de->d_name);
                rpath = join(remote, de->d_name);
                if (!lpath || !rpath)
                        return -ENOMEM;
                if (fstatat(dirfd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0) {
                        local_failed(x, lpath, -errno);
                } else if (S_ISDIR(st.st_mode)) {
                        sub = openat(dirfd, de->d_name,
                                     O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                        if (sub < 0)
                                local_failed(x, lpath, -errno);
                        else if (put_tree(x, sub, lpath, rpath, depth + 1) == -ENOMEM)
                                return -ENOMEM;
                } else if (S_ISREG(st.st_mode)) {
                        if (put_file(x, lpath, rpath) == -ENOMEM)
                                return -ENOMEM;
                } else {
                        fprintf(stderr, "airlock cp: skipped '%s': %s\n", lpath,
                                S_ISLNK(st.st_mode) ? "symbolic link (not followed)"
                                                    : "not a regular file");
                }
        }
        return 0;
}

static int copy_in(struct cp_ctx *x, const struct cp_args *a, const struct cp_end *src,
                   const struct cp_end *dst)
{
        _cleanup_free_ char *name = NULL, *target = NULL;
        struct stat st;
        bool into;
        int kind;

        if (strcmp(src->path, "-") == 0) {
                st.st_mode = S_IFREG;
        } else if (lstat(src->path, &st) < 0) {
                local_failed(x, src->path, -errno);
                return -errno;
        }
        if (S_ISLNK(st.st_mode) && stat(src->path, &st) < 0) {
                /* A link named on the command line is the user's own: followed, as cp does. */
                local_failed(x, src->path, -errno);
                return -ENOENT;
        }
        if (S_ISDIR(st.st_mode) && !a->recursive) {
                local_failed(x, src->path, -EISDIR);
                return -EISDIR;
        }
        if (!S_ISDIR(st.st_mode) && !S_ISREG(st.st_mode)) {
                fprintf(stderr, "airlock cp: '%s' is not a regular file or a directory\n",
                        src->path);
                return -EINVAL;
        }

        kind = dst->path[0] ? remote_kind(x, dst->path, NULL) : 'd';
        if (kind < 0)
                return kind;
        into = kind == 'd' || dst->path[strlen(dst->path) - 1] == '/';
        if (into && strcmp(src->path, "-") == 0) {
                fprintf(stderr,
                        "airlock cp: standard input needs a file name in the session, "
                        "not the directory '%s'\n",
                        dst->arg);
                return -EINVAL;
        }
        name = base_name(src->path);
        target = into ? join(dst->path, name) : strdup(dst->path);
        if (!name || !target)
                return -ENOMEM;
        while (*target && target[strlen(target) - 1] == '/')
                target[strlen(target) - 1] = '\0';
        if (S_ISDIR(st.st_mode)) {
                _cleanup_close_ int fd = open(src->path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
                if (fd < 0) {
                        local_failed(x, src->path, -errno);
                        return -errno;
                }
                if (kind == 'f') {
                        fprintf(stderr,
                                "airlock cp: cannot copy the directory '%s' onto the "
                                "file '%s'\n",
                                src->path, dst->arg);
                        return -ENOTDIR;
                }
                return put_tree(x, fd, src->path, target, 0);
        }
        return put_file(x, src->path, target);
}

/* Writes one remote file to the local path ("-" = standard output). nofollow: local is a name
 * the session chose (inside a copied tree), so a link already there is not written through. */
static int get_file(struct cp_ctx *x, const char *remote, const char *local, bool nofollow)
{
        _cleanup_free_ char *url = files_url(x->id, remote, false);
        _cleanup_close_ int fd = -EBADF;
        struct cli_response resp = { 0 };
        int r;

        if (!url)
                return -ENOMEM;
        r = cli_client_request(x->c, "GET", url, NULL, 0, NULL, NULL, &resp);
        if (r < 0) {
                x->failed = true;
                return r;
        }
        if (resp.status != 200) {
                refused(x, remote, &resp);
                free(resp.body);
                return -EPROTO;
        }
        fd = strcmp(local, "-") == 0
                     ? dup(1)
                     : open(local,
                            O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | (nofollow ? O_NOFOLLOW : 0),
                            0644);
        r = fd < 0 ? -errno : write_full(fd, resp.body ? resp.body : "", resp.len);
        free(resp.body);
        if (r < 0)
                local_failed(x, local, r);
        return r;
}

/* Downloads the remote directory (its listing given) into the local directory, made here. */
static int get_tree(struct cp_ctx *x, const char *remote, json_t *listing, const char *local,
                    int depth)
{
        json_t *entries = json_object_get(listing, "entries"), *e;
        size_t i;

        if (mkdir(local, 0755) < 0 && errno != EEXIST) {
                local_failed(x, local, -errno);
                return 0;
        }
        if (json_is_true(json_object_get(listing, "truncated"))) {
                fprintf(stderr,
                        "airlock cp: %s:%s: more than the listing holds; copying the "
                        "first entries only\n",
                        x->id, remote);
                x->failed = true;
        }
        json_array_foreach (entries, i, e) {
                const char *name = json_string_value(json_object_get(e, "name"));
                const char *path = json_string_value(json_object_get(e, "path"));
                const char *type = json_string_value(json_object_get(e, "type"));
                _cleanup_free_ char *lpath = NULL;

                if (!name || !path || !type || strchr(name, '/') || !strcmp(name, ".") ||
                    !strcmp(name, "..") || json_object_get(e, "raw_path")) {
                        fprintf(stderr,
                                "airlock cp: skipped %s:%s: its name is not valid "
                                "UTF-8\n",
                                x->id, path ? path : "?");
                        continue;
                }
                lpath = join(local, name);
                if (!lpath)
                        return -ENOMEM;
                if (strcmp(type, "file") == 0) {
                        if (get_file(x, path, lpath, true) == -ENOMEM)
                                return -ENOMEM;
                } else if (strcmp(type, "directory") == 0 && depth < CP_DEPTH_MAX) {
                        _cleanup_(json_decrefp) json_t *sub = NULL;
                        struct stat st;
                        /* The session chose the name: a local link of that name (to a
                         * directory elsewhere) is not descended into. */
                        if (lstat(lpath, &st) == 0 && !S_ISDIR(st.st_mode)) {
                                local_failed(x, lpath, S_ISLNK(st.st_mode) ? -ELOOP : -EEXIST);
                                continue;
                        }
                        if (remote_kind(x, path, &sub) == 'd' &&
                            get_tree(x, path, sub, lpath, depth + 1) == -ENOMEM)
                                return -ENOMEM;
                } else {
                        fprintf(stderr, "airlock cp: skipped %s:%s: %s\n", x->id, path,
                                strcmp(type, "symlink") == 0     ? "symbolic link (not followed)"
                                : strcmp(type, "directory") == 0 ? "too deep"
                                                                 : "not a regular file");
                }
        }
        return 0;
}

static int copy_out(struct cp_ctx *x, const struct cp_args *a, const struct cp_end *src,
                    const struct cp_end *dst)
{
        _cleanup_(json_decrefp) json_t *listing = NULL;
        _cleanup_free_ char *name = NULL, *target = NULL;
        struct stat st;
        bool dst_is_dir;
        int kind;

        kind = remote_kind(x, src->path, &listing);
        if (kind < 0)
                return kind;
        if (kind == 0) {
                fprintf(stderr, "airlock cp: %s:%s: no such file or directory in the session\n",
                        x->id, src->path);
                return -ENOENT;
        }
        if (kind == 'd' && !a->recursive) {
                fprintf(stderr, "airlock cp: %s: is a directory (copy directories with -r)\n",
                        src->arg);
                return -EISDIR;
        }
        if (kind == 'd' && strcmp(dst->path, "-") == 0) {
                fprintf(stderr, "airlock cp: a directory cannot go to standard output\n");
                return -EINVAL;
        }
        dst_is_dir =
                strcmp(dst->path, "-") != 0 && stat(dst->path, &st) == 0 && S_ISDIR(st.st_mode);
        name = base_name(src->path[0] ? src->path : "work");
        target = dst_is_dir ? join(dst->path, name) : strdup(dst->path);
        if (!name || !target)
                return -ENOMEM;
        if (kind == 'd')
                return get_tree(x, src->path, listing, target, 0);
        return get_file(x, src->path, target, false);
}

static int parse_args(int argc, char **argv, struct cp_args *a)
{
        enum { OPT_URL = 256, OPT_STATE_DIR };
        static const struct option opts[] = {
                { "recursive", no_argument, NULL, 'r' },
                { "url", required_argument, NULL, OPT_URL },
                { "state-dir", required_argument, NULL, OPT_STATE_DIR },
                { "help", no_argument, NULL, 'h' },
                {},
        };
        int c;

        while ((c = getopt_long(argc, argv, "rRh", opts, NULL)) != -1) {
                switch (c) {
                case 'r':
                case 'R':
                        a->recursive = true;
                        break;
                case OPT_URL:
                        a->url = optarg;
                        break;
                case OPT_STATE_DIR:
                        a->state_dir = optarg;
                        break;
                case 'h':
                        fputs(cp_help, stdout);
                        return 1;
                default:
                        fputs("Try 'airlock cp --help'.\n", stderr);
                        return -EINVAL;
                }
        }
        if (argc - optind != 2) {
                fprintf(stderr, "airlock cp: expected SRC and DST\nTry 'airlock cp --help'.\n");
                return -EINVAL;
        }
        a->src = argv[optind];
        a->dst = argv[optind + 1];
        return 0;
}

int cmd_cp(int argc, char **argv)
{
        struct cp_args a = { 0 };
        struct cp_end src, dst;
        struct cp_ctx x = { 0 };
        int r;

        r = parse_args(argc, argv, &a);
        if (r != 0)
                return r < 0 ? EXIT_USAGE : 0;
        if (parse_end(a.src, &src) < 0 || parse_end(a.dst, &dst) < 0)
                return EXIT_USAGE;
        if (is_remote(&src) == is_remote(&dst)) {
                fprintf(stderr, "airlock cp: one of SRC and DST must be in a session (ID:PATH) "
                                "and the other here\nTry 'airlock cp --help'.\n");
                return EXIT_USAGE;
        }
        if (!src.path[0] && !is_remote(&src)) {
                fprintf(stderr, "airlock cp: SRC is empty\n");
                return EXIT_USAGE;
        }
        if (!dst.path[0] && !is_remote(&dst)) {
                fprintf(stderr, "airlock cp: DST is empty\n");
                return EXIT_USAGE;
        }
        if (a.recursive && (strcmp(src.path, "-") == 0 || strcmp(dst.path, "-") == 0) &&
            !is_remote(strcmp(src.path, "-") == 0 ? &src : &dst)) {
                fprintf(stderr, "airlock cp: - (standard input or output) takes one file, not "
                                "-r\n");
                return EXIT_USAGE;
        }

        if (cli_client_new("cp", a.url, a.state_dir, &x.c) < 0)
                return EXIT_FAILURE;
        x.id = is_remote(&src) ? src.id : dst.id;
        r = is_remote(&src) ? copy_out(&x, &a, &src, &dst) : copy_in(&x, &a, &src, &dst);
        cli_client_free(x.c);
        return r < 0 || x.failed ? EXIT_FAILURE : 0;
}
