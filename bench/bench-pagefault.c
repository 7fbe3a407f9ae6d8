/* bench-pagefault: what the machine charges for the memory operations a session is made of.
 *
 *   bench-pagefault [MIB]      (default 64: the size of the parent's touched memory)
 *
 * A session is a fork of a zygote whose memory (the interpreter with pandas imported) is some
 * 60-90 MiB, and everything it does first after the fork is paid in page faults. This prints,
 * for a parent with MIB MiB of touched anonymous memory (each figure p50/p99 over 15 runs):
 *   - fork() until it returns in the parent (page tables copied);
 *   - a child's exit until the parent's waitpid() returns (page tables torn down);
 *   - one copy-on-write fault in the child (a write to a page shared with the parent);
 *   - one fault on a fresh page (first write to new anonymous memory);
 *   - a write to a page already faulted in (the baseline);
 *   - a write fault in the parent after the child is gone (the page is no longer shared, but
 *     its mapping was made read-only by the fork: the zygote pays this after every fork).
 * On bare metal a fault is about a microsecond; in some virtual machines it is tens of times
 * that, which decides how fast a fork-based session can start (docs/PERFORMANCE.md). */
#include "bench-util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#define RUNS 15
#define PAGES 2000 /* pages faulted per measurement */

static const size_t page = 4096;

/* Writes one byte in each of n pages from p; returns ns per page. */
static uint64_t touch(char *p, size_t n, char v)
{
        uint64_t t0 = bench_now_ns();

        for (size_t i = 0; i < n; i++)
                p[i * page] = v;
        return (bench_now_ns() - t0) / n;
}

static int cmp_u64(const void *a, const void *b)
{
        uint64_t x = *(const uint64_t *) a, y = *(const uint64_t *) b;

        return x < y ? -1 : x > y;
}

/* Prints `name  p50 X us  p99 Y us` of the RUNS per-page figures in v (sorting v). */
static void report_us(const char *name, uint64_t *v)
{
        qsort(v, RUNS, sizeof(uint64_t), cmp_u64);
        printf("%-44s p50 %8.3f us  p99 %8.3f us  (n=%d)\n", name,
               (double) bench_percentile(v, RUNS, 0.5) / 1000.0,
               (double) bench_percentile(v, RUNS, 0.99) / 1000.0, RUNS);
}

int main(int argc, char **argv)
{
        size_t mib = argc > 1 ? strtoul(argv[1], NULL, 10) : 64, size;
        uint64_t fork_ns[RUNS], exit_ns[RUNS], cow[RUNS], fresh[RUNS], warm[RUNS], parent[RUNS];
        char *mem, *probe;

        setvbuf(stdout, NULL, _IOLBF, 0);
        if (mib < 8)
                mib = 8;
        size = mib << 20;
        mem = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        probe = mmap(NULL, PAGES * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1,
                     0);
        if (mem == MAP_FAILED || probe == MAP_FAILED) {
                perror("bench-pagefault: mmap");
                return 1;
        }
        memset(mem, 1, size);
        for (int r = 0; r < RUNS; r++) {
                int fds[2], status;
                uint64_t t0, got[3];
                pid_t pid;

                memset(probe, 1, PAGES * page); /* shared with the child after the fork */
                if (pipe(fds) < 0) {
                        perror("bench-pagefault: pipe");
                        return 1;
                }
                t0 = bench_now_ns();
                pid = fork();
                if (pid < 0) {
                        perror("bench-pagefault: fork");
                        return 1;
                }
                if (pid == 0) {
                        char *fresh_mem = mmap(NULL, PAGES * page, PROT_READ | PROT_WRITE,
                                               MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
                        if (fresh_mem == MAP_FAILED)
                                _exit(1);
                        got[0] = touch(probe, PAGES, 2);     /* copy-on-write */
                        got[1] = touch(fresh_mem, PAGES, 2); /* fresh pages */
                        got[2] = touch(probe, PAGES, 3);     /* already ours */
                        _exit(write(fds[1], got, sizeof(got)) == sizeof(got) ? 0 : 1);
                }
                fork_ns[r] = bench_now_ns() - t0;
                (void) close(fds[1]);
                if (read(fds[0], got, sizeof(got)) != sizeof(got)) {
                        fprintf(stderr, "bench-pagefault: the child failed\n");
                        return 1;
                }
                (void) close(fds[0]);
                t0 = bench_now_ns();
                if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status) ||
                    WEXITSTATUS(status) != 0) {
                        fprintf(stderr, "bench-pagefault: the child failed\n");
                        return 1;
                }
                exit_ns[r] = bench_now_ns() - t0;
                cow[r] = got[0], fresh[r] = got[1], warm[r] = got[2];
                parent[r] = touch(probe, PAGES, 4);
        }
        printf("parent with %zu MiB of touched memory, %d runs, faults per page over %d pages\n",
               mib, RUNS, PAGES);
        bench_report("fork() returns in the parent", fork_ns, RUNS);
        bench_report("child exit until waitpid() returns", exit_ns, RUNS);
        report_us("copy-on-write fault, per page", cow);
        report_us("fault on a fresh page, per page", fresh);
        report_us("write fault in the parent after the fork", parent);
        report_us("write to a page already faulted in", warm);
        return 0;
}
