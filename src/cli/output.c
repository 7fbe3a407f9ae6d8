/* Shared output of `airlock run` and `airlock exec` (see output.h). */
#include "output.h"

#include "base/cleanup.h"
#include "base/utf8.h"
#include "base/util.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int cli_read_code(const char *file, char **ret_code)
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
                if (len > CLI_CODE_MAX)
                        return -E2BIG;
        }
        if (memchr(buf, '\0', len))
                return -EBADMSG;
        buf[len] = '\0';
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
