/* bench-microvm: the microVM tier's create to first result, against the namespaces tier in the
 * same run (issue 27).
 *
 *   AIRLOCK_VM_IMAGES=DIR [AIRLOCK_VM_SNAPSHOTS=DIR] bench-microvm [AIRLOCK_BINARY] [N_WARM]
 *                                                                 [N_COLD]   (default 10, 3)
 *
 * DIR/microvm is the image `airlock profile build microvm` made. Starts its own `airlock serve
 * --pool-size 1` and times POST /v1/sessions until the answer of the first POST .../execute
 * {"code":"1"}, then DELETE, in four series:
 *   microvm, warm pool      a restored copy of the profile's saved VM, from the pool (each
 *                           sample waits until the pool is refilled); the save itself (a boot
 *                           and the preload's imports) happens before the series, once, unless
 *                           AIRLOCK_VM_SNAPSHOTS holds a current one
 *   default, warm pool      the namespaces tier's pool, the same way
 *   microvm, cold boot      a profile like microvm with "start": "cold" and no preload: a boot
 *                           of the guest per session (no pool: cold profiles start on request)
 *   default, cold           the namespaces tier's fresh exec of the runner, no preload
 * Without /dev/kvm the guests run under QEMU's software emulation (AIRLOCK_VM_ACCEL=tcg), and
 * the microVM figures are then only the emulator's: the output says so. Targets under KVM
 * (issue 27): warm pool p50 < 50 ms, cold boot < 1 s. */
#include "bench-util.h"

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* After the pool has a member again: the restore that refilled it has just ended, and the
 * quiet moment a namespaces pool member gets too. */
#define POOL_PAUSE_MS 300

static const char cold_vm_profile[] =
        "{\"description\": \"bench-microvm: microvm with a boot per session\", "
        "\"isolation\": \"microvm\", \"start\": \"cold\", \"languages\": [\"python\"], "
        "\"preload\": [], \"imports\": null, \"policy\": \"none\", \"network\": \"none\", "
        "\"rootfs\": \"/\", \"limits\": {\"memory\": \"2GiB\", \"timeout\": \"60s\"}}\n";
static const char cold_ns_profile[] =
        "{\"description\": \"bench-microvm: the namespaces tier, a fresh exec per session\", "
        "\"start\": \"cold\", \"languages\": [\"python\"], \"preload\": [], \"imports\": null, "
        "\"policy\": \"none\", \"network\": \"none\", \"rootfs\": \"/\"}\n";

static int write_file(const char *path, const char *text)
{
        FILE *f = fopen(path, "we");

        if (!f)
                return -errno;
        fputs(text, f);
        return fclose(f) == 0 ? 0 : -errno;
}

/* One session of profile: create to first result into *t; deleted afterwards. */
static void one(struct bench_daemon *d, struct bench_conn *c, const char *profile, uint64_t *t)
{
        char body[128], path[160], id[64];
        const char *resp;
        int status = 0;
        uint64_t t0 = bench_now_ns();

        snprintf(body, sizeof(body), "{\"profile\":\"%s\"}", profile);
        if (bench_http(c, "POST", "/v1/sessions", body, &status, &resp) < 0)
                bench_die(d, "POST /v1/sessions (%s): %m", profile);
        if (status != 201 || bench_json_str(resp, "id", id, sizeof(id)) < 0)
                bench_die(d, "POST /v1/sessions (%s) answered %d: %s", profile, status, resp);
        snprintf(path, sizeof(path), "/v1/sessions/%s/execute", id);
        if (bench_http(c, "POST", path, "{\"code\":\"1\"}", &status, &resp) < 0)
                bench_die(d, "POST %s: %m", path);
        *t = bench_now_ns() - t0;
        if (status != 200 || !strstr(resp, "\"result\":\"1\""))
                bench_die(d, "POST %s answered %d: %s", path, status, resp);
        snprintf(path, sizeof(path), "/v1/sessions/%s", id);
        if (bench_http(c, "DELETE", path, NULL, &status, &resp) < 0 || status != 200)
                bench_die(d, "DELETE %s failed (%d)", path, status);
}

/* Waits (up to 30 min) until the profile's warm pool holds a ready member (GET /v1/profiles:
 * its object's "pool" has "ready" >= 1), so that a warm-pool sample measures a pool hit and
 * not the restore a miss would wait for (seconds to a minute under TCG on a busy machine). */
static void wait_pool(struct bench_daemon *d, struct bench_conn *c, const char *profile)
{
        char name[128];
        uint64_t deadline = bench_now_ns() + 1800ull * 1000000000ull;

        snprintf(name, sizeof(name), "\"name\":\"%s\"", profile);
        while (bench_now_ns() < deadline) {
                const char *resp, *at, *next, *ready;
                int status = 0;

                if (bench_http(c, "GET", "/v1/profiles", NULL, &status, &resp) < 0 || status != 200)
                        bench_die(d, "GET /v1/profiles failed (%d)", status);
                at = strstr(resp, name);
                next = at ? strstr(at + 1, "\"name\":\"") : NULL;
                ready = at ? strstr(at, "\"ready\":") : NULL;
                if (ready && (!next || ready < next) && atoi(ready + 8) >= 1)
                        return;
                bench_sleep_ms(200);
        }
        bench_die(d, "the %s pool did not refill within 30 min", profile);
}

static void series(struct bench_daemon *d, struct bench_conn *c, const char *profile, size_t n,
                   unsigned pause_ms, bool pooled, uint64_t *t)
{
        for (size_t i = 0; i < n; i++) {
                if (pooled)
                        wait_pool(d, c, profile);
                bench_sleep_ms(pause_ms);
                one(d, c, profile, &t[i]);
        }
}

int main(int argc, char **argv)
{
        const char *extra[] = { "--pool-size", "1", NULL };
        const char *images = getenv("AIRLOCK_VM_IMAGES");
        char profiles[] = "/tmp/bench-microvm-XXXXXX", path[4200], link[4200];
        size_t n_warm = 10, n_cold = 3;
        uint64_t *vm_warm, *ns_warm, *vm_cold, *ns_cold, dummy, p[4];
        bool tcg = access("/dev/kvm", R_OK | W_OK) != 0;
        struct bench_daemon d;
        struct bench_conn c;
        const char *bin;
        int next;

        setvbuf(stdout, NULL, _IOLBF, 0);
        bin = bench_airlock_bin(argc, argv, &next);
        if (argc > next)
                n_warm = (size_t) strtoul(argv[next], NULL, 10);
        if (argc > next + 1)
                n_cold = (size_t) strtoul(argv[next + 1], NULL, 10);
        if (n_warm < 2)
                n_warm = 2;
        if (n_cold < 1)
                n_cold = 1;
        snprintf(path, sizeof(path), "%s/microvm/root.erofs", images ? images : "");
        if (!images || access(path, R_OK) < 0) {
                fprintf(stderr,
                        "bench-microvm: set AIRLOCK_VM_IMAGES to the directory where "
                        "`airlock profile build microvm` put the image (%s is missing)\n",
                        path);
                return 1;
        }
        vm_warm = calloc(n_warm, sizeof(uint64_t));
        ns_warm = calloc(n_warm, sizeof(uint64_t));
        vm_cold = calloc(n_cold, sizeof(uint64_t));
        ns_cold = calloc(n_cold, sizeof(uint64_t));
        if (!vm_warm || !ns_warm || !vm_cold || !ns_cold || !mkdtemp(profiles))
                return 1;
        /* The cold microVM profile has its own name, so it needs an image by that name: the
         * same one, through a link beside it. */
        snprintf(path, sizeof(path), "%s/microvm-bench-cold.json", profiles);
        if (write_file(path, cold_vm_profile) < 0)
                return 1;
        snprintf(path, sizeof(path), "%s/default-bench-cold.json", profiles);
        if (write_file(path, cold_ns_profile) < 0)
                return 1;
        snprintf(link, sizeof(link), "%s/microvm-bench-cold", images);
        (void) unlink(link);
        if (symlink("microvm", link) < 0) {
                fprintf(stderr, "bench-microvm: cannot link %s: %m\n", link);
                return 1;
        }
        setenv("AIRLOCK_PROFILES_DIR", profiles, 1);
        if (tcg)
                setenv("AIRLOCK_VM_ACCEL", "tcg", 1);
        bench_request_timeout_s = 1800;

        if (bench_daemon_start(&d, bin, extra) < 0)
                return 1;
        bench_conn_init(&c, &d);
        if (bench_daemon_wait_log(&d, "zygote ready", 20000) < 0)
                bench_die(&d, "the daemon did not log 'zygote ready' within 20 s");
        /* The first of each: the profile's VM saved (or found current), the pools filled. */
        one(&d, &c, "microvm", &dummy);
        one(&d, &c, "default", &dummy);
        series(&d, &c, "microvm", n_warm, POOL_PAUSE_MS, true, vm_warm);
        series(&d, &c, "default", n_warm, 300, true, ns_warm);
        series(&d, &c, "microvm-bench-cold", n_cold, 0, false, vm_cold);
        series(&d, &c, "default-bench-cold", n_cold, 0, false, ns_cold);
        bench_conn_close(&c);
        bench_daemon_stop(&d);
        (void) unlink(link);
        snprintf(path, sizeof(path), "%s/microvm-bench-cold.json", profiles);
        (void) unlink(path);
        snprintf(path, sizeof(path), "%s/default-bench-cold.json", profiles);
        (void) unlink(path);
        (void) rmdir(profiles);

        printf("accelerator: %s\n",
               tcg ? "TCG (QEMU's software emulation: no /dev/kvm here). The microVM figures "
                     "are the emulator's and say nothing of the KVM targets (warm pool p50 < "
                     "50 ms, cold boot < 1 s); compare them only with each other"
                   : "KVM");
        p[0] = bench_report("microvm, create to first result, warm pool (restored copy)", vm_warm,
                            n_warm);
        p[1] = bench_report("default (namespaces), create to first result, warm pool", ns_warm,
                            n_warm);
        p[2] = bench_report("microvm, create to first result, cold boot (no preload)", vm_cold,
                            n_cold);
        p[3] = bench_report("default (namespaces), create to first result, cold (no preload)",
                            ns_cold, n_cold);
        printf("ratios at p50: microvm/namespaces warm pool %.1fx, cold %.1fx; microvm cold "
               "boot/warm pool %.1fx\n",
               p[1] ? (double) p[0] / (double) p[1] : 0, p[3] ? (double) p[2] / (double) p[3] : 0,
               p[0] ? (double) p[2] / (double) p[0] : 0);
        return 0;
}
