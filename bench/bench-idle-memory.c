/* bench-idle-memory: memory (PSS) per idle session with 200 sessions open.
 *
 *   bench-idle-memory [AIRLOCK_BINARY] [SESSIONS]      (default 200; also $AIRLOCK_BIN)
 *
 * Starts its own `airlock serve --max-sessions 256 --pool-size 2` on a free loopback port,
 * opens SESSIONS sessions (profile default: numpy, pandas and matplotlib preloaded), lets them
 * idle, and sums the PSS (/proc/PID/smaps_rollup) of every process of every session: the
 * daemon's descendants whose host uid is in the session range [0x70000000, 0x90000000). The
 * zygote (uids [0x60000000, 0x60800000)) is reported on its own; PSS splits the pages the
 * sessions still share with it among all of them, so its figure shrinks as sessions are
 * added. Then one trivial cell runs in each session and the figures are taken again. Every
 * session is deleted at the end. Target (issue 13): under 3 MiB per session. */
#include "bench-util.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SESSION_UID_MIN 0x70000000u
#define SESSION_UID_MAX 0x90000000u /* exclusive */
#define ZYGOTE_UID_MIN 0x60000000u
#define ZYGOTE_UID_MAX 0x60800000u /* exclusive */

struct proc {
        int pid, ppid;
        unsigned uid;
        int mine; /* a descendant of the daemon */
};

struct mem {
        unsigned long long session_pss_kb, zygote_pss_kb, daemon_pss_kb, session_rss_kb;
        unsigned session_procs, session_uids, zygote_procs, foreign_procs;
};

static int read_status(int pid, int *ppid, unsigned *uid)
{
        char path[64], line[256];
        FILE *f;
        int got = 0;

        snprintf(path, sizeof(path), "/proc/%d/status", pid);
        f = fopen(path, "re");
        if (!f)
                return -1;
        while (fgets(line, sizeof(line), f) && got < 2) {
                if (!strncmp(line, "PPid:", 5)) {
                        *ppid = atoi(line + 5);
                        got++;
                } else if (!strncmp(line, "Uid:", 4)) {
                        *uid = (unsigned) strtoul(line + 4, NULL, 10);
                        got++;
                }
        }
        fclose(f);
        return got == 2 ? 0 : -1;
}

/* PSS and RSS in kB from smaps_rollup; 0 for a zombie or a process gone. */
static void read_pss(int pid, unsigned long long *pss, unsigned long long *rss)
{
        char path[64], line[256];
        FILE *f;

        *pss = *rss = 0;
        snprintf(path, sizeof(path), "/proc/%d/smaps_rollup", pid);
        f = fopen(path, "re");
        if (!f)
                return;
        while (fgets(line, sizeof(line), f)) {
                if (!strncmp(line, "Pss:", 4))
                        *pss = strtoull(line + 4, NULL, 10);
                else if (!strncmp(line, "Rss:", 4))
                        *rss = strtoull(line + 4, NULL, 10);
        }
        fclose(f);
}

static int cmp_uint(const void *a, const void *b)
{
        unsigned x = *(const unsigned *) a, y = *(const unsigned *) b;

        return x < y ? -1 : x > y;
}

static int measure(int daemon_pid, struct mem *m)
{
        struct proc *ps = NULL;
        size_t n = 0, cap = 0;
        unsigned *uids;
        DIR *dir = opendir("/proc");
        struct dirent *de;
        int changed;

        memset(m, 0, sizeof(*m));
        if (!dir)
                return -1;
        while ((de = readdir(dir))) {
                struct proc p = { 0 };

                if (de->d_name[0] < '1' || de->d_name[0] > '9')
                        continue;
                p.pid = atoi(de->d_name);
                if (read_status(p.pid, &p.ppid, &p.uid) < 0)
                        continue;
                if (n == cap) {
                        struct proc *q = realloc(ps, (cap ? cap * 2 : 1024) * sizeof(*ps));

                        if (!q) {
                                closedir(dir);
                                free(ps);
                                return -1;
                        }
                        ps = q;
                        cap = cap ? cap * 2 : 1024;
                }
                p.mine = p.pid == daemon_pid;
                ps[n++] = p;
        }
        closedir(dir);
        /* the daemon's descendants (other daemons on the machine use the same uid ranges) */
        do {
                changed = 0;
                for (size_t i = 0; i < n; i++) {
                        if (ps[i].mine)
                                continue;
                        for (size_t j = 0; j < n; j++)
                                if (ps[j].mine && ps[j].pid == ps[i].ppid) {
                                        ps[i].mine = changed = 1;
                                        break;
                                }
                }
        } while (changed);

        uids = calloc(n ? n : 1, sizeof(*uids));
        if (!uids) {
                free(ps);
                return -1;
        }
        for (size_t i = 0; i < n; i++) {
                unsigned long long pss, rss;
                int session = ps[i].uid >= SESSION_UID_MIN && ps[i].uid < SESSION_UID_MAX;
                int zygote = ps[i].uid >= ZYGOTE_UID_MIN && ps[i].uid < ZYGOTE_UID_MAX;

                if (!ps[i].mine) {
                        if (session || zygote)
                                m->foreign_procs++;
                        continue;
                }
                read_pss(ps[i].pid, &pss, &rss);
                if (ps[i].pid == daemon_pid) {
                        m->daemon_pss_kb = pss;
                } else if (session) {
                        if (!rss)
                                continue; /* a zombie */
                        m->session_pss_kb += pss;
                        m->session_rss_kb += rss;
                        uids[m->session_procs++] = ps[i].uid;
                } else if (zygote && rss) {
                        m->zygote_pss_kb += pss;
                        m->zygote_procs++;
                }
        }
        qsort(uids, m->session_procs, sizeof(*uids), cmp_uint);
        for (unsigned i = 0; i < m->session_procs; i++)
                if (i == 0 || uids[i] != uids[i - 1])
                        m->session_uids++;
        free(uids);
        free(ps);
        return 0;
}

static int report(const char *when, int daemon_pid, unsigned nsessions)
{
        struct mem m;
        double per_uid, per_session, total;

        if (measure(daemon_pid, &m) < 0 || m.session_uids == 0)
                return -1;
        per_uid = (double) m.session_pss_kb / 1024.0 / m.session_uids;
        per_session = (double) m.session_pss_kb / 1024.0 / nsessions;
        total = (double) (m.session_pss_kb + m.zygote_pss_kb) / 1024.0 / nsessions;
        printf("%s: %u session processes, %u session uids (%u sessions + warm pool)\n", when,
               m.session_procs, m.session_uids, nsessions);
        printf("  %-52s %8.2f MiB\n", "session PSS, sum", (double) m.session_pss_kb / 1024.0);
        printf("  %-52s %8.2f MiB\n", "PSS per session (sum / session uids)", per_uid);
        printf("  %-52s %8.2f MiB\n", "PSS per open session (sum / sessions)", per_session);
        printf("  %-52s %8.2f MiB  (%u processes)\n", "zygote PSS",
               (double) m.zygote_pss_kb / 1024.0, m.zygote_procs);
        printf("  %-52s %8.2f MiB\n", "(sessions + zygote) PSS / sessions", total);
        printf("  %-52s %8.2f MiB\n", "RSS per session (for comparison; shared pages count)",
               (double) m.session_rss_kb / 1024.0 / m.session_uids);
        printf("  %-52s %8.2f MiB\n", "daemon PSS", (double) m.daemon_pss_kb / 1024.0);
        if (m.foreign_procs)
                printf("  (ignored %u processes in those uid ranges that belong to other "
                       "daemons)\n",
                       m.foreign_procs);
        printf("  target < 3 MiB PSS per session: %s\n", per_uid < 3.0 ? "met" : "MISSED");
        return 0;
}

int main(int argc, char **argv)
{
        const char *extra[] = { "--max-sessions", "256", "--pool-size", "2", NULL };
        unsigned nsessions = 200, created = 0;
        struct bench_daemon d;
        struct bench_conn c;
        char(*ids)[64];
        const char *bin, *resp;
        char path[128], label[64];
        int next, status = 0, failed = 0;
        uint64_t t0, t_create, t_exec;

        setvbuf(stdout, NULL, _IOLBF, 0);
        bin = bench_airlock_bin(argc, argv, &next);
        if (argc > next)
                nsessions = (unsigned) strtoul(argv[next], NULL, 10);
        if (nsessions < 1 || nsessions > 256)
                nsessions = 200;
        ids = calloc(nsessions, sizeof(*ids));
        if (!ids)
                return 1;

        if (bench_daemon_start(&d, bin, extra) < 0)
                return 1;
        bench_conn_init(&c, &d);
        if (bench_daemon_wait_log(&d, "zygote ready", 20000) < 0)
                bench_die(&d, "the daemon did not log 'zygote ready' within 20 s");
        bench_sleep_ms(300); /* the warm pool fills */

        t0 = bench_now_ns();
        for (; created < nsessions; created++) {
                if (bench_http(&c, "POST", "/v1/sessions", "{\"profile\":\"default\"}", &status,
                               &resp) < 0) {
                        fprintf(stderr, "bench-idle-memory: POST /v1/sessions: %m\n");
                        failed = 1;
                        break;
                }
                if (status != 201 ||
                    bench_json_str(resp, "id", ids[created], sizeof(ids[created])) < 0) {
                        fprintf(stderr,
                                "bench-idle-memory: session %u: POST /v1/sessions answered "
                                "%d: %s\n",
                                created + 1, status, resp);
                        failed = 1;
                        break;
                }
        }
        t_create = bench_now_ns() - t0;
        if (!failed) {
                printf("opened %u sessions in %.2f s (%.2f ms each)\n", nsessions,
                       (double) t_create / 1e9, (double) t_create / 1e6 / nsessions);
                bench_sleep_ms(2000); /* idle; the warm pool refills */
                snprintf(label, sizeof(label), "%u idle sessions", nsessions);
                if (report(label, d.pid, nsessions) < 0) {
                        fprintf(stderr, "bench-idle-memory: found no session processes\n");
                        failed = 1;
                }
        }
        if (!failed) {
                t0 = bench_now_ns();
                for (unsigned i = 0; i < nsessions && !failed; i++) {
                        snprintf(path, sizeof(path), "/v1/sessions/%s/execute", ids[i]);
                        if (bench_http(&c, "POST", path, "{\"code\":\"1\"}", &status, &resp) < 0 ||
                            status != 200 || !strstr(resp, "\"result\":\"1\"")) {
                                fprintf(stderr, "bench-idle-memory: execute in %s failed\n",
                                        ids[i]);
                                failed = 1;
                        }
                }
                t_exec = bench_now_ns() - t0;
                if (!failed) {
                        printf("ran '1' in each session in %.2f s\n", (double) t_exec / 1e9);
                        bench_sleep_ms(1000);
                        snprintf(label, sizeof(label), "%u sessions after one trivial cell each",
                                 nsessions);
                        if (report(label, d.pid, nsessions) < 0)
                                failed = 1;
                }
        }

        /* delete every session, whatever happened */
        for (unsigned i = 0; i < created; i++) {
                snprintf(path, sizeof(path), "/v1/sessions/%s", ids[i]);
                if (bench_http(&c, "DELETE", path, NULL, &status, &resp) < 0 || status != 200) {
                        fprintf(stderr, "bench-idle-memory: DELETE %s failed (%d)\n", path, status);
                        failed = 1;
                }
        }
        if (bench_http(&c, "GET", "/v1/sessions", NULL, &status, &resp) < 0 || status != 200 ||
            !strstr(resp, "\"sessions\":[]")) {
                fprintf(stderr, "bench-idle-memory: sessions left after the deletes: %.300s\n",
                        status == 200 ? resp : "?");
                failed = 1;
        } else {
                printf("deleted all %u sessions\n", created);
        }
        bench_conn_close(&c);
        bench_daemon_stop(&d);
        free(ids);
        return failed;
}
