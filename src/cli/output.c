/* Shared output of `airlock run` and `airlock exec` (see output.h). */
#include "output.h"

#include "base/cleanup.h"
#include "base/json-util.h"
#include "base/utf8.h"
#include "base/util.h"
#include "tools/base64.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int cli_read_file(const char *file, size_t max, char **ret_data, size_t *ret_len)
{
        _cleanup_close_ int fd = -EBADF;
        _cleanup_free_ char *buf = NULL;
        size_t len = 0, size = 0;

        fd = strcmp(file, "-") == 0 ? dup(0) : open(file, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
                return -errno;
        for (;;) {
                ssize_t n;
                if (len + 65536 + 1 > size) {
                        char *p;
                        size = size ? size * 2 : 131072;
                        p = realloc(buf, size);
                        if (!p)
                                return -ENOMEM;
                        buf = p;
                }
                n = read(fd, buf + len, size - len - 1);
                if (n < 0) {
                        if (errno == EINTR)
                                continue;
                        return -errno;
                }
                if (n == 0)
                        break;
                len += (size_t) n;
                if (len > max)
                        return -E2BIG;
        }
        buf[len] = '\0';
        *ret_data = TAKE_PTR(buf);
        *ret_len = len;
        return 0;
}

int cli_read_code(const char *file, char **ret_code)
{
        _cleanup_free_ char *buf = NULL;
        size_t len;
        int r;

        r = cli_read_file(file, CLI_CODE_MAX, &buf, &len);
        if (r < 0)
                return r;
        if (memchr(buf, '\0', len))
                return -EBADMSG;
        *ret_code = TAKE_PTR(buf);
        return 0;
}

/* Where streamed output goes. On a terminal, output is made valid UTF-8 and every C0 and C1
 * control other than newline, tab and carriage return is shown as ^X (C0) or U+FFFD (C1), so
 * that code cannot drive the user's terminal with escape sequences (HOSTILE.md row 34). A
 * character cut between two chunks is carried over to the next. */
static void tty_write(int fd, const char *text)
{
        const unsigned char *s = (const unsigned char *) text;
        char buf[8192];
        size_t o = 0;

        for (; *s; s++) {
                if (o + 4 > sizeof(buf)) {
                        (void) write_full(fd, buf, o);
                        o = 0;
                }
                if ((*s < 0x20 && *s != '\n' && *s != '\t' && *s != '\r') || *s == 0x7f) {
                        buf[o++] = '^';
                        buf[o++] = (char) (*s == 0x7f ? '?' : *s + '@');
                } else if (s[0] == 0xc2 && s[1] >= 0x80 && s[1] <= 0x9f) {
                        memcpy(buf + o, "\xef\xbf\xbd", 3); /* U+0080..U+009F: C1 controls */
                        o += 3;
                        s++;
                } else {
                        buf[o++] = (char) *s;
                }
        }
        (void) write_full(fd, buf, o);
}

void cli_sink_init(struct cli_sink *sink)
{
        *sink = (struct cli_sink){ .tty = { false, fd_is_tty(1), fd_is_tty(2) } };
}

void cli_sink_write(void *userdata, int stream, const char *data, size_t len)
{
        struct cli_sink *st = userdata;
        int fd = stream == 1 ? 1 : 2;
        _cleanup_free_ char *joined = NULL, *text = NULL;
        size_t total, complete;

        if (!st->tty[stream]) {
                (void) write_full(fd, data, len);
                return;
        }
        total = st->carry_len[stream] + len;
        joined = malloc(total);
        if (!joined)
                return;
        memcpy(joined, st->carry[stream], st->carry_len[stream]);
        memcpy(joined + st->carry_len[stream], data, len);
        complete = utf8_complete_prefix(joined, total);
        st->carry_len[stream] = total - complete;
        memcpy(st->carry[stream], joined + complete, st->carry_len[stream]);
        text = utf8_sanitize(joined, complete);
        if (text)
                tty_write(fd, text);
}

void cli_sink_display(void *userdata, const json_t *output, size_t index)
{
        static const char *const files[] = { "image/png", "image/jpeg", "image/svg+xml" };
        const json_t *data = json_object_get(output, "data");
        const char *text = json_output_text(data);
        size_t n;

        (void) index;
        if (!text || json_is_true(json_object_get(output, "main")) ||
            json_is_true(json_object_get(output, "update")) ||
            text == json_string_value(json_object_get(data, "text/html")))
                return;
        for (size_t k = 0; k < ELEMENTSOF(files); k++)
                if (json_object_get(data, files[k]))
                        return;
        n = strlen(text);
        cli_sink_write(userdata, 1, text, n);
        if (n && text[n - 1] != '\n')
                cli_sink_write(userdata, 1, "\n", 1);
}

int cli_exit_code(json_t *result)
{
        const char *status = json_string_value(json_object_get(result, "status"));
        int code = (int) json_integer_value(json_object_get(result, "exit_code"));

        if (status && strcmp(status, "ok") == 0)
                return 0;
        if (code == 0)
                code = 1;
        return code & 0xff;
}

void cli_print_result(json_t *result)
{
        const char *res = json_string_value(json_object_get(result, "result"));
        const char *status = json_string_value(json_object_get(result, "status"));
        json_t *error = json_object_get(result, "error");

        if (res)
                printf("%s\n", res);
        fflush(stdout);
        if (json_is_object(error)) {
                const char *tb = json_string_value(json_object_get(error, "traceback"));
                const char *name = json_string_value(json_object_get(error, "name"));
                const char *value = json_string_value(json_object_get(error, "value"));
                if (status && strcmp(status, "error") != 0)
                        fprintf(stderr, "airlock: %s: %s\n", status, value ? value : "");
                else if (tb && *tb)
                        fprintf(stderr, "%s", tb);
                else if (name && strcmp(name, "SystemExit") != 0)
                        fprintf(stderr, "%s: %s\n", name, value ? value : "");
        }
}

int cli_mkdir_p(const char *path)
{
        _cleanup_free_ char *copy = strdup(path);

        if (!copy)
                return -ENOMEM;
        for (char *p = copy + 1; *p; p++) {
                if (*p != '/')
                        continue;
                *p = '\0';
                if (mkdir(copy, 0755) < 0 && errno != EEXIST)
                        return -errno;
                *p = '/';
        }
        if (mkdir(copy, 0755) < 0 && errno != EEXIST)
                return -errno;
        return 0;
}

/* 0 when path is a directory this process may create files in, else -errno. access() answers
 * EROFS for a read-only mount even to root. */
static int dir_writable(const char *path)
{
        struct stat st;

        if (stat(path, &st) < 0)
                return -errno;
        if (!S_ISDIR(st.st_mode))
                return -ENOTDIR;
        if (access(path, W_OK | X_OK) < 0)
                return -errno;
        return 0;
}

int cli_output_dir_check(const char *prog, const char *dir)
{
        _cleanup_free_ char *ancestor = NULL;
        const char *why;
        int r;

        if (!*dir) {
                fprintf(stderr, "airlock %s: --output is empty\n", prog);
                return -EINVAL;
        }
        r = dir_writable(dir);
        if (r == -ENOENT) {
                /* Missing: the closest existing ancestor must take the new directories. */
                ancestor = strdup(dir);
                if (!ancestor)
                        return -ENOMEM;
                do {
                        char *slash = strrchr(ancestor, '/');
                        if (!slash)
                                strcpy(ancestor, ".");
                        else if (slash == ancestor)
                                slash[1] = '\0';
                        else
                                *slash = '\0';
                        r = dir_writable(ancestor);
                } while (r == -ENOENT && strcmp(ancestor, ".") != 0 && strcmp(ancestor, "/") != 0);
        }
        if (r >= 0)
                return 0;
        why = r == -ENOTDIR                                ? "is not a directory"
              : r == -EACCES || r == -EPERM || r == -EROFS ? "is not writable"
                                                           : strerror(-r);
        if (ancestor)
                fprintf(stderr, "airlock %s: --output '%s' cannot be created: '%s' %s\n", prog, dir,
                        ancestor, why);
        else
                fprintf(stderr, "airlock %s: --output '%s' %s\n", prog, dir, why);
        return r;
}

/* The rich formats saved, in the order they are looked for in an output's data. */
static const struct {
        const char *mime;
        const char *kind; /* in the file name and the message */
        const char *ext;
        bool base64;
} saved_mimes[] = {
        { "image/png", "figure", "png", true },
        { "image/jpeg", "figure", "jpg", true },
        { "image/svg+xml", "figure", "svg", false },
        { "text/html", "html", "html", false },
};

/* Creates dir/NAME exclusively, trying "-2", "-3"... before the extension while the name is
 * taken. Returns the fd and the name it got in name_buf, or -errno. */
static int create_unique(int dirfd, const char *base, const char *ext, char *name_buf, size_t size)
{
        for (unsigned k = 1; k <= 10000; k++) {
                int fd;

                if (k == 1)
                        (void) snprintf(name_buf, size, "%s.%s", base, ext);
                else
                        (void) snprintf(name_buf, size, "%s-%u.%s", base, k, ext);
                fd = openat(dirfd, name_buf, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
                            0644);
                if (fd >= 0 || errno != EEXIST)
                        return fd < 0 ? -errno : fd;
        }
        return -EEXIST;
}

size_t cli_outputs_save(const char *prog, const char *dir, const char *prefix, json_t *result)
{
        _cleanup_close_ int dirfd = -EBADF;
        json_t *outputs = json_object_get(result, "outputs"), *out;
        size_t i, saved = 0;
        int r;

        json_array_foreach (outputs, i, out) {
                json_t *data = json_object_get(out, "data");

                for (size_t m = 0; m < ELEMENTSOF(saved_mimes); m++) {
                        const char *value =
                                json_string_value(json_object_get(data, saved_mimes[m].mime));
                        _cleanup_free_ char *decoded = NULL;
                        _cleanup_close_ int fd = -EBADF;
                        char base[128], name[160];
                        size_t len;

                        if (!value)
                                continue;
                        if (saved_mimes[m].base64) {
                                r = base64_decode(value, strlen(value), &decoded, &len);
                                if (r < 0) {
                                        fprintf(stderr,
                                                "airlock %s: output %zu: its %s is not valid "
                                                "base64, not saved\n",
                                                prog, i + 1, saved_mimes[m].mime);
                                        continue;
                                }
                        } else {
                                len = strlen(value);
                        }
                        if (dirfd < 0) {
                                r = cli_mkdir_p(dir);
                                if (r >= 0) {
                                        dirfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
                                        r = dirfd < 0 ? -errno : 0;
                                }
                                if (r < 0) {
                                        fprintf(stderr,
                                                "airlock %s: cannot save outputs to '%s': %s\n",
                                                prog, dir, strerror(-r));
                                        return saved;
                                }
                        }
                        (void) snprintf(base, sizeof(base), "%s-%s-%zu", prefix,
                                        saved_mimes[m].kind, i + 1);
                        fd = create_unique(dirfd, base, saved_mimes[m].ext, name, sizeof(name));
                        r = fd < 0 ? fd : write_full(fd, decoded ? decoded : value, len);
                        if (r < 0) {
                                fprintf(stderr, "airlock %s: cannot save %s to '%s': %s\n", prog,
                                        saved_mimes[m].kind, dir, strerror(-r));
                                continue;
                        }
                        fprintf(stderr, "airlock %s: saved %s to %s%s%s\n", prog,
                                saved_mimes[m].kind, dir, dir[strlen(dir) - 1] == '/' ? "" : "/",
                                name);
                        saved++;
                }
        }
        return saved;
}
