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

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int report(const char *when, int daemon_pid, unsigned nsessions)
{
        struct bench_sandbox_memory m;
        double per_uid, per_session, total;

        if (bench_sandbox_memory(daemon_pid, &m) < 0 || m.session_uids == 0)
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
