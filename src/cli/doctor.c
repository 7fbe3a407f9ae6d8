/* `airlock doctor`: what the kernel offers, the host settings that matter to a sandbox, and
 * which isolation mode airlock will use here. */
#include "cli.h"

#include "base/util.h"
#include "jail/jail.h"

#include <fcntl.h>
#include <getopt.h>
#include <stdio.h>
#include <string.h>

static void print_sysctl(const char *path, const char *want)
{
        char buf[64];
        ssize_t n = read_small_file_at(AT_FDCWD, path, buf, sizeof(buf));

        if (n < 0) {
                printf("  %-40s %s\n", path + strlen("/proc/sys/"), "(absent)");
                return;
        }
        buf[strcspn(buf, "\n")] = '\0';
        printf("  %-40s %-6s (recommended: %s)\n", path + strlen("/proc/sys/"), buf, want);
}

int cmd_doctor(int argc, char **argv)
{
        static const struct option opts[] = {
                { "isolation", required_argument, NULL, 'i' },
                { "help", no_argument, NULL, 'h' },
                {},
        };
        struct jail_features f;
        struct airlock_error err = { { 0 } };
        enum jail_isolation mode;
        const char *iso = NULL;
        int c, r;

        while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
                switch (c) {
                case 'i':
                        iso = optarg;
                        break;
                case 'h':
                        printf("usage: airlock doctor [--isolation MODE]\n\n"
                               "Probes the kernel (user namespaces, Landlock, seccomp, cgroups, "
                               "mount API) and\nsays which isolation mode airlock will use. "
                               "Exits 0 when that mode can run.\n");
                        return 0;
                default:
                        return EXIT_USAGE;
                }
        }
        if (cli_isolation(iso, &mode) < 0)
                return EXIT_USAGE;

        jail_probe(&f);
        printf("kernel:            %s\n", f.kernel);
        printf("running as root:   %s\n", f.is_root ? "yes" : "no");
        printf("user namespaces:   %s\n", f.userns ? "yes" : "no");
        if (f.landlock_abi > 0)
                printf("landlock:          ABI %d\n", f.landlock_abi);
        else
                printf("landlock:          unavailable (filesystem rules rely on mounts only)\n");
        printf("seccomp:           %s\n", f.seccomp ? "yes" : "no");
        printf("mount_setattr:     %s\n", f.mount_setattr ? "yes" : "no (needs Linux 5.12)");
        printf("proc subset=pid:   %s\n", f.proc_subset_pid ? "yes" : "no (hidepid=2 fallback)");
        printf("cgroups:           %s", cgroup_version_name(f.cgroups.version));
        if (f.cgroups.version == CGROUP_V2)
                printf(" at %s%s\n", f.cgroups.v2_parent, f.cgroup_kill ? " (cgroup.kill)" : "");
        else if (f.cgroups.version == CGROUP_V1)
                printf(" (memory at %s)\n", f.cgroups.v1_parent[CG1_MEMORY]);
        else
                printf(": %s\n", f.cgroup_error);

        printf("host settings:\n");
        print_sysctl("/proc/sys/kernel/io_uring_disabled", "2");
        print_sysctl("/proc/sys/dev/tty/legacy_tiocsti", "0");
        print_sysctl("/proc/sys/kernel/kptr_restrict", "2");
        print_sysctl("/proc/sys/kernel/unprivileged_bpf_disabled", ">=1");
        print_sysctl("/proc/sys/vm/unprivileged_userfaultfd", "0");
        print_sysctl("/proc/sys/kernel/perf_event_paranoid", ">=2");
        printf("  (the seccomp policy blocks io_uring, TIOCSTI, bpf, userfaultfd and perf in "
               "the sandbox either way)\n");

        r = jail_check_mode(&f, mode, &err);
        if (r < 0)
                printf("isolation:         %s cannot run here: %s\n",
                       jail_isolation_to_string(mode), err.msg);
        else
                printf("isolation:         %s%s\n", jail_isolation_to_string(mode),
                       mode == JAIL_NAMESPACES ? " (every layer)"
                       : mode == JAIL_PROCESS  ? " (rlimits, timeout and cgroup only: WEAK)"
                                               : " (no isolation: development only)");
        jail_features_done(&f);
        return r < 0 ? 1 : 0;
}
