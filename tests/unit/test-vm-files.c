/* The microVM's file channel (src/vm/files-proto.h) without a VM: the guest's server
 * (files-server.c) in a child process on a socketpair, in a temporary directory standing for
 * /work, driven by the daemon's client (src/vm/files.h); and a lying "guest" whose answers the
 * client must bound and refuse. */
#include "vm/files-proto.h"
#include "vm/files.h"

#include <criterion/criterion.h>
#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static char work[64];
static pid_t server = -1;

/* A server on one end of a socketpair; returns the client on the other. */
static struct vm_files *start_server(void)
{
        int sv[2];

        (void) snprintf(work, sizeof(work), "/tmp/airlock-vmf-XXXXXX");
        cr_assert_not_null(mkdtemp(work));
        cr_assert_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
        server = fork();
        cr_assert_geq(server, 0);
        if (server == 0) {
                (void) close(sv[0]);
                vmf_serve(sv[1], getuid(), work);
        }
        (void) close(sv[1]);
        return vm_files_new(sv[0]);
}

static void stop_server(struct vm_files *vf)
{
        char cmd[128];

        (void) vm_files_free(vf);
        if (server > 0)
                (void) waitpid(server, NULL, 0);
        (void) snprintf(cmd, sizeof(cmd), "rm -rf '%s'", work);
        (void) system(cmd);
}

static char *at(const char *rel)
{
        static char path[256];
        (void) snprintf(path, sizeof(path), "%s/%s", work, rel);
        return path;
}

struct listed {
        char names[8][64];
        uint8_t types[8];
        uint64_t sizes[8];
        int n;
};

static int collect(void *ctx, const char *name, uint8_t type, uint64_t size, int64_t mtime)
{
        struct listed *l = ctx;
        (void) mtime;
        if (l->n < 8) {
                (void) snprintf(l->names[l->n], sizeof(l->names[0]), "%s", name);
                l->types[l->n] = type;
                l->sizes[l->n++] = size;
        }
        return 0;
}

Test(vm_files, write_read_list_delete)
{
        struct vm_files *vf = start_server();
        struct airlock_error err = { { 0 } };
        char *data = NULL;
        size_t len = 0;
        uint64_t size = 0, removed = 0, left = 0;
        struct listed l = { 0 };
        bool truncated = true;
        struct stat st;

        cr_assert_eq(vm_files_write(vf, "a/b/c.txt", "hello", 5, &err), 0, "%s", err.msg);
        cr_assert_eq(stat(at("a/b/c.txt"), &st), 0);
        cr_expect_eq(st.st_size, 5);
        cr_assert_eq(vm_files_read(vf, "a/b/c.txt", 100, &data, &len, &size, &err), 0, "%s",
                     err.msg);
        cr_expect_eq(len, 5);
        cr_expect_str_eq(data, "hello");
        free(data);
        data = NULL;
        /* Larger than the caller takes: refused with the size, and nothing sent. */
        cr_expect_eq(vm_files_read(vf, "a/b/c.txt", 2, &data, &len, &size, &err), -EFBIG);
        cr_expect_eq(size, 5);
        cr_expect_null(data);
        /* Replaced, not appended; empty files too. */
        cr_assert_eq(vm_files_write(vf, "a/b/c.txt", "hi", 2, &err), 0);
        cr_assert_eq(vm_files_write(vf, "empty", "", 0, &err), 0);
        cr_assert_eq(vm_files_read(vf, "empty", 100, &data, &len, &size, &err), 0);
        cr_expect_eq(len, 0);
        free(data);

        cr_assert_eq(vm_files_list(vf, "a/b", 100, collect, &l, &truncated, &err), 0, "%s",
                     err.msg);
        cr_assert_eq(l.n, 1);
        cr_expect_str_eq(l.names[0], "c.txt");
        cr_expect_eq(l.types[0], VMF_FILE);
        cr_expect_eq(l.sizes[0], 2);
        cr_expect_not(truncated);
        memset(&l, 0, sizeof(l));
        cr_assert_eq(vm_files_list(vf, "", 1, collect, &l, &truncated, &err), 0);
        cr_expect_eq(l.n, 1);
        cr_expect(truncated, "two entries, one asked for: truncated");

        cr_expect_eq(vm_files_read(vf, "nope", 100, &data, &len, &size, &err), -ENOENT);
        cr_expect_eq(vm_files_read(vf, "a", 100, &data, &len, &size, &err), -EISDIR);
        {
                /* Streamed into an fd, as a download is. */
                char got[8] = { 0 };
                FILE *tmp = tmpfile();
                cr_assert_not_null(tmp);
                cr_assert_eq(vm_files_read_to_fd(vf, "a/b/c.txt", 100, fileno(tmp), &size, &err), 0,
                             "%s", err.msg);
                cr_expect_eq(size, 2);
                cr_expect_eq(pread(fileno(tmp), got, sizeof(got), 0), 2);
                cr_expect_str_eq(got, "hi");
                (void) fclose(tmp);
        }
        cr_expect_eq(vm_files_list(vf, "a/b/c.txt", 100, collect, &l, &truncated, &err), -ENOTDIR);
        cr_assert_eq(vm_files_delete(vf, "a", 1000, &removed, &left, &err), 0, "%s", err.msg);
        cr_expect_eq(removed, 3);
        cr_expect_eq(left, 0);
        cr_expect_neq(access(at("a"), F_OK), 0);
        cr_expect_eq(vm_files_delete(vf, "a", 1000, &removed, &left, &err), -ENOENT);
        cr_expect_eq(err.msg[0], '\0', "a file's errno is not a channel failure: %s", err.msg);
        stop_server(vf);
}

Test(vm_files, nothing_outside_the_workspace)
{
        struct vm_files *vf = start_server();
        struct airlock_error err = { { 0 } };
        char *data = NULL, outside[128];
        size_t len = 0;
        uint64_t size = 0, removed = 0, left = 0;
        struct listed l = { 0 };
        bool truncated;
        int fd;

        /* A directory and a file next to the workspace, and links to them from inside. */
        (void) snprintf(outside, sizeof(outside), "%s-outside", work);
        cr_assert_eq(mkdir(outside, 0700), 0);
        fd = open(at("../secret"), O_WRONLY | O_CREAT, 0600);
        cr_assert_geq(fd, 0);
        cr_assert_eq(write(fd, "secret", 6), 6);
        (void) close(fd);
        cr_assert_eq(symlink("../secret", at("link")), 0);
        cr_assert_eq(symlink(outside, at("linkdir")), 0);
        cr_assert_eq(mkfifo(at("fifo"), 0600), 0);

        cr_expect_eq(vm_files_read(vf, "link", 100, &data, &len, &size, &err), -ELOOP);
        cr_expect_lt(vm_files_write(vf, "linkdir/x", "x", 1, &err), 0);
        cr_expect_lt(vm_files_write(vf, "link", "x", 1, &err), 0);
        cr_expect_lt(vm_files_list(vf, "linkdir", 100, collect, &l, &truncated, &err), 0);
        /* The server checks paths itself, whatever the daemon sends. */
        cr_expect_eq(vm_files_read(vf, "../secret", 100, &data, &len, &size, &err), -EINVAL);
        cr_expect_eq(vm_files_read(vf, "/etc/passwd", 100, &data, &len, &size, &err), -EINVAL);
        cr_expect_eq(vm_files_write(vf, "a/../../x", "x", 1, &err), -EINVAL);
        cr_expect_eq(vm_files_delete(vf, "..", 1000, &removed, &left, &err), -EINVAL);
        /* A FIFO is never opened for reading (it would block the server). */
        cr_expect_eq(vm_files_read(vf, "fifo", 100, &data, &len, &size, &err), -EINVAL);
        /* A symlink is deleted itself, never what it points to. */
        cr_expect_eq(vm_files_delete(vf, "link", 1000, &removed, &left, &err), 0);
        cr_expect_eq(access(at("../secret"), F_OK), 0);
        cr_expect_eq(vm_files_delete(vf, "linkdir", 1000, &removed, &left, &err), 0);
        cr_expect_eq(access(outside, F_OK), 0);
        cr_expect_null(data);
        {
                char cmd[300];
                (void) snprintf(cmd, sizeof(cmd), "rm -rf '%s' '%s/../secret'", outside, work);
                (void) system(cmd);
        }
        stop_server(vf);
}

/* A lying guest: answers each request with the bytes given, then closes. */
static struct vm_files *liar(const void *answer, size_t len)
{
        int sv[2];

        cr_assert_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
        server = fork();
        cr_assert_geq(server, 0);
        if (server == 0) {
                char buf[4096];
                (void) close(sv[0]);
                (void) read(sv[1], buf, sizeof(buf));
                (void) write(sv[1], answer, len);
                (void) shutdown(sv[1], SHUT_WR);
                while (read(sv[1], buf, sizeof(buf)) > 0) /* until the client closes */
                        ;
                _exit(0);
        }
        (void) close(sv[1]);
        return vm_files_new(sv[0]);
}

static struct vmf_resp resp(uint32_t magic, int32_t status, uint64_t len, uint64_t aux)
{
        struct vmf_resp r = { .magic = htole32(magic),
                              .seq = htole32(1),
                              .status = (int32_t) htole32((uint32_t) status),
                              .len = htole64(len),
                              .aux = htole64(aux) };
        return r;
}

Test(vm_files, a_lying_guest_breaks_the_channel)
{
        struct airlock_error err = { { 0 } };
        struct vmf_resp r = resp(0xdeadbeef, 0, 0, 0);
        struct vm_files *vf = liar(&r, sizeof(r));
        char *data = NULL;
        size_t len;
        uint64_t size;
        struct listed l = { 0 };
        bool truncated;

        cr_expect_eq(vm_files_read(vf, "x", 100, &data, &len, &size, &err), -EIO);
        cr_expect(strstr(err.msg, "file channel failed"), "%s", err.msg);
        /* Broken for good: the next call fails at once. */
        err.msg[0] = '\0';
        cr_expect_eq(vm_files_write(vf, "x", "x", 1, &err), -EIO);
        cr_expect(strstr(err.msg, "failed earlier"), "%s", err.msg);
        (void) vm_files_free(vf);
        (void) waitpid(server, NULL, 0);

        /* A listing claiming a gigabyte: refused before anything is allocated. */
        r = resp(VMF_MAGIC, 0, 1ull << 30, 0);
        vf = liar(&r, sizeof(r));
        cr_expect_eq(vm_files_list(vf, "", 100, collect, &l, &truncated, &err), -EIO);
        (void) vm_files_free(vf);
        (void) waitpid(server, NULL, 0);

        /* A read sending more than was asked for. */
        {
                char answer[sizeof(r) + 4 + 200] = { 0 };
                uint32_t n = htole32(200);
                r = resp(VMF_MAGIC, 0, 0, 10);
                memcpy(answer, &r, sizeof(r));
                memcpy(answer + sizeof(r), &n, 4);
                vf = liar(answer, sizeof(answer));
                cr_expect_eq(vm_files_read(vf, "x", 100, &data, &len, &size, &err), -EIO);
                cr_expect_null(data);
                (void) vm_files_free(vf);
                (void) waitpid(server, NULL, 0);
        }

        /* A size claimed in the exabytes allocates nothing of it: what arrives is kept. */
        {
                char answer[sizeof(r) + 4 + 3 + 4] = { 0 };
                uint32_t n = htole32(3);
                r = resp(VMF_MAGIC, 0, 0, 1ull << 62);
                memcpy(answer, &r, sizeof(r));
                memcpy(answer + sizeof(r), &n, 4);
                memcpy(answer + sizeof(r) + 4, "abc", 3);
                vf = liar(answer, sizeof(answer));
                cr_expect_eq(vm_files_read(vf, "x", UINT64_MAX, &data, &len, &size, &err), 0, "%s",
                             err.msg);
                cr_expect_eq(len, 3);
                cr_expect_str_eq(data, "abc");
                free(data);
                data = NULL;
                (void) vm_files_free(vf);
                (void) waitpid(server, NULL, 0);
        }

        /* A status that is no errno, and an error carrying data. */
        r = resp(VMF_MAGIC, 5, 0, 0);
        vf = liar(&r, sizeof(r));
        cr_expect_eq(vm_files_write(vf, "x", "x", 1, &err), -EIO);
        (void) vm_files_free(vf);
        (void) waitpid(server, NULL, 0);
        r = resp(VMF_MAGIC, -ENOENT, 7, 0);
        vf = liar(&r, sizeof(r));
        cr_expect_eq(vm_files_write(vf, "x", "x", 1, &err), -EIO);
        (void) vm_files_free(vf);
        (void) waitpid(server, NULL, 0);

        /* A guest that hangs up mid-answer. */
        vf = liar(&r, 10);
        cr_expect_eq(vm_files_write(vf, "x", "x", 1, &err), -EPIPE);
        (void) vm_files_free(vf);
        (void) waitpid(server, NULL, 0);
}
