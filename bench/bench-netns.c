/* What a microVM's network namespace costs its create (src/vm/vmm.h: the child that becomes
 * QEMU unshares CLONE_NEWNET before it drops its privileges): in alternating rounds, a fork
 * whose child exits at once, and a fork whose child first unshares a network namespace (the
 * namespace dies with it), each waited for; then unshare(CLONE_NEWNET) alone, timed inside
 * the child. Prints p50/p99 of each and the ratio at p50. Root (CAP_SYS_ADMIN) only.
 *
 *   build-rel/bench/bench-netns [ROUNDS]        (default 200)
 *
 * The teardown of a network namespace is deferred by the kernel to a work queue (cleanup_net),
 * so what the wait measures is the create and the child's exit, not the whole teardown: a
 * burst of namespaces leaves work behind it, which the last series (back to back, no pause)
 * shows if it piles up. */
#include "bench-util.h"

#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

/* Forks; the child unshares a network namespace when netns, writes the unshare's own time to
 * the pipe, and exits. Returns the fork-to-reaped time; *ret_unshare the child's own. */
static uint64_t one(int netns, uint64_t *ret_unshare)
{
        int p[2];
        uint64_t t0, inner = 0;
        pid_t pid;
        int status;

        if (pipe(p) < 0)
                return 0;
        t0 = bench_now_ns();
        pid = fork();
        if (pid < 0)
                return 0;
        if (pid == 0) {
                uint64_t a = bench_now_ns(), d = 0;
                if (netns && unshare(CLONE_NEWNET) < 0)
                        _exit(1);
                d = bench_now_ns() - a;
                (void) !write(p[1], &d, sizeof(d));
                _exit(0);
        }
        (void) close(p[1]);
        if (read(p[0], &inner, sizeof(inner)) != (ssize_t) sizeof(inner))
                inner = 0;
        (void) close(p[0]);
        if (waitpid(pid, &status, 0) < 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0)
                return 0;
        *ret_unshare = inner;
        return bench_now_ns() - t0;
}

int main(int argc, char **argv)
{
        size_t rounds = argc > 1 ? strtoul(argv[1], NULL, 10) : 200;
        uint64_t *plain, *netns, *inner, *burst, unused, p_plain, p_netns;
        size_t n = 0;

        if (rounds == 0 || rounds > 100000) {
                fprintf(stderr, "usage: bench-netns [ROUNDS 1..100000]\n");
                return 2;
        }
        if (geteuid() != 0) {
                fprintf(stderr, "bench-netns: needs root (CAP_SYS_ADMIN for CLONE_NEWNET)\n");
                return 1;
        }
        plain = calloc(rounds, sizeof(*plain));
        netns = calloc(rounds, sizeof(*netns));
        inner = calloc(rounds, sizeof(*inner));
        burst = calloc(rounds, sizeof(*burst));
        if (!plain || !netns || !inner || !burst)
                return 1;
        for (size_t i = 0; i < rounds; i++) {
                plain[n] = one(0, &unused);
                netns[n] = one(1, &inner[n]);
                if (!plain[n] || !netns[n]) {
                        fprintf(stderr, "bench-netns: a child failed: %s\n", strerror(errno));
                        return 1;
                }
                n++;
                bench_sleep_ms(5); /* lets the deferred teardown run between rounds */
        }
        for (size_t i = 0; i < rounds; i++)
                if (!(burst[i] = one(1, &unused)))
                        return 1;
        p_plain = bench_report("fork + exit + wait", plain, n);
        p_netns = bench_report("fork + unshare(CLONE_NEWNET) + exit + wait", netns, n);
        (void) bench_report("unshare(CLONE_NEWNET) alone, in the child", inner, n);
        (void) bench_report("fork + unshare + exit + wait, back to back", burst, rounds);
        printf("ratio at p50 (with a network namespace / without): %.2fx, +%.3f ms\n",
               (double) p_netns / (double) p_plain, ((double) p_netns - (double) p_plain) / 1e6);
        free(plain);
        free(netns);
        free(inner);
        free(burst);
        return 0;
}
