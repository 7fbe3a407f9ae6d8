/* `airlock profile`: the profiles this installation finds, and their layers (docs/PROFILES.md,
 * "Your own libraries: layers"): list and show them, build a profile's layer with Debian's pip,
 * remove its layers. It works on the state directory directly, like `airlock tenants`: a
 * running daemon there picks a new layer up for its next session, no restart needed. */
#include "cli.h"

#include "api/auth.h"
#include "base/cleanup.h"
#include "base/json-util.h"
#include "config.h"
#include "jail/seccomp.h"
#include "layer/layer.h"
#include "profile/profile.h"
#include "session/sandbox.h"
#include "vm/vm.h"

#include <errno.h>
#include <getopt.h>
#include <jansson.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static const char profile_help[] =
        "usage: airlock profile list [--json] [--state-dir DIR]\n"
        "       airlock profile show NAME [--state-dir DIR]\n"
        "       airlock profile build NAME [--state-dir DIR]\n"
        "       airlock profile rm NAME [--state-dir DIR]\n"
        "\n"
        "The profiles found on the profile path (docs/PROFILES.md) and their layers: the\n"
        "packages a profile's \"packages\" lists, installed into the state directory by\n"
        "`build`. New sessions of the profile get its current layer read-only at\n"
        "/opt/airlock/layer, with its site-packages on sys.path; \"preload\" may name its\n"
        "modules.\n"
        "\n"
        "subcommands:\n"
        "  list         the profiles: name, languages, network, layer (id, size and\n"
        "               number of packages, or none) and description\n"
        "  show NAME    one profile as JSON, with its packages, its current layer's\n"
        "               manifest and its layers\n"
        "  build NAME   install the profile's packages.install (or every wheel of\n"
        "               packages.wheels) with Debian's pip into a new layer beside the\n"
        "               old one, then make it current in one atomic step. Only wheels\n"
        "               are installed (--only-binary=:all:): no package's build code\n"
        "               runs on this machine. pip's output is shown as it runs; the\n"
        "               last line names the new layer and its size. A running daemon\n"
        "               gives it to new sessions without a restart; live sessions keep\n"
        "               the layer they started with. Old layers nobody uses are removed.\n"
        "               On failure the old layer stays current.\n"
        "               A profile whose \"isolation\" is \"microvm\" also gets its\n"
        "               guest image (root filesystem, initramfs, kernel from\n"
        "               $AIRLOCK_VM_KERNEL_DIR, default /var/cache/airlock/vm-kernel,\n"
        "               made by scripts/vm-kernel.sh) in DIR/vm/NAME.\n"
        "  rm NAME      remove the profile's layers: new sessions get none. A layer\n"
        "               that live sessions have mounted stays until they end (it is\n"
        "               named; `rm` or `build` again removes it then).\n"
        "\n"
        "options:\n"
        "      --json           list: print JSON\n"
        "      --state-dir DIR  the daemon's state directory; default: /var/lib/airlock\n"
        "                       for root, else $XDG_STATE_HOME/airlock\n"
        "\n"
        "exit status: 0 done; 1 refused or failed (unknown profile, nothing to install,\n"
        "pip failed, another build running, no layers to remove); 2 bad arguments.\n";

enum {
        OPT_STATE_DIR = 256,
        OPT_JSON,
};

/* pip's "ERROR:" lines of a build, said again under the failure. */
#define PIP_ERRORS_MAX 8

struct build_progress {
        char *errors[PIP_ERRORS_MAX];
        unsigned n_errors;
};

static const char *size_text(uint64_t bytes, char buf[static 32])
{
        static const char *const units[] = { "B", "KiB", "MiB", "GiB", "TiB" };
        double v = (double) bytes;
        unsigned u = 0;

        while (v >= 1024 && u + 1 < ELEMENTSOF(units)) {
                v /= 1024;
                u++;
        }
        if (u == 0)
                (void) snprintf(buf, 32, "%llu B", (unsigned long long) bytes);
        else
                (void) snprintf(buf, 32, "%.1f %s", v, units[u]);
        return buf;
}

/* "none", or "allow (N rules)". */
static const char *network_text(const struct profile *p, char buf[static 32])
{
        if (!p->network || p->network->mode == EGRESS_MODE_NONE)
                return "none";
        (void) snprintf(buf, 32, "allow(%zu)", p->network->n_rules);
        return buf;
}

/* The current layer's manifest: 1 with *ret, 0 for none, -errno with err set. */
static int current_manifest(const char *state_dir, const char *name, json_t **ret,
                            struct airlock_error *err)
{
        _cleanup_free_ char *dir = NULL;
        int r;

        r = layer_current(state_dir, name, &dir, err);
        if (r <= 0)
                return r;
        r = layer_manifest_read(dir, ret, err);
        if (r == -ENOENT)
                return airlock_error_set(err, -ENOENT, "%s has no layer.json", dir);
        return r < 0 ? r : 1;
}

/* {id, size, packages, created} of a manifest: what `list` says of a layer. */
static json_t *layer_summary(const json_t *m)
{
        return json_pack("{s:O, s:O, s:i, s:O}", "id", json_object_get(m, "id"), "size",
                         json_object_get(m, "size"), "packages",
                         (int) json_array_size(json_object_get(m, "packages")), "created",
                         json_object_get(m, "created"));
}

static int cmd_list(const char *state_dir, bool as_json)
{
        _cleanup_strv_free_ char **names = NULL;
        json_t *rows = json_array();
        int r;

        r = profile_list(&names);
        if (r < 0 || !rows) {
                json_decref(rows);
                fprintf(stderr, "airlock profile: cannot list the profiles: %s\n", strerror(-r));
                return 1;
        }
        if (!as_json)
                printf("%-20s %-24s %-10s %-40s %s\n", "NAME", "LANGUAGES", "NETWORK", "LAYER",
                       "DESCRIPTION");
        for (char **n = names; *n; n++) {
                struct airlock_error err = { { 0 } }, lerr = { { 0 } };
                struct profile *p = NULL;
                json_t *m = NULL, *row;
                char langs[64], net[32], size[32], layer[96];

                r = profile_load(*n, &p, &err);
                if (r < 0) {
                        if (as_json)
                                json_array_append_new(rows, json_pack("{s:s, s:s}", "name", *n,
                                                                      "error", err.msg));
                        else
                                printf("%-20s error: %s\n", *n, err.msg);
                        continue;
                }
                r = current_manifest(state_dir, *n, &m, &lerr);
                if (as_json) {
                        row = profile_to_json(p);
                        if (row)
                                json_object_set_new(row, "layer",
                                                    r > 0   ? layer_summary(m)
                                                    : r < 0 ? json_pack("{s:s}", "error", lerr.msg)
                                                            : json_null());
                        json_array_append_new(rows, row);
                } else {
                        if (r > 0)
                                (void) snprintf(layer, sizeof(layer), "%s %s %zu pkg",
                                                json_string_value(json_object_get(m, "id")),
                                                size_text((uint64_t) json_integer_value(
                                                                  json_object_get(m, "size")),
                                                          size),
                                                json_array_size(json_object_get(m, "packages")));
                        else
                                (void) snprintf(layer, sizeof(layer), "%s",
                                                r < 0 ? "broken (see `profile show`)" : "none");
                        printf("%-20s %-24s %-10s %-40s %s\n", *n,
                               profile_languages_text(p, langs, sizeof(langs)),
                               network_text(p, net), layer, p->description);
                }
                json_decref(m);
                profile_free(p);
        }
        if (as_json) {
                char *text = json_dump_text(rows, JSON_INDENT(2), NULL);
                printf("%s\n", text ? text : "[]");
                free(text);
        }
        json_decref(rows);
        return 0;
}

/* "packages" as the profile says it, the index's credentials left out. */
static json_t *packages_json(const struct profile *p)
{
        const struct profile_packages *pk = &p->packages;
        _cleanup_free_ char *index = pk->index_url ? layer_url_redact(pk->index_url) : NULL;

        return json_pack("{s:s?, s:o, s:o, s:s?}", "index_url", index, "trusted_host",
                         json_strv(pk->trusted_hosts), "install", json_strv(pk->install), "wheels",
                         pk->wheels_dir);
}

/* The profile name, or NULL after saying why not. */
static struct profile *load_profile(const char *name)
{
        struct airlock_error err = { { 0 } };
        struct profile *p = NULL;

        if (profile_load(name, &p, &err) < 0) {
                fprintf(stderr, "airlock profile: %s\n", err.msg);
                return NULL;
        }
        return p;
}

static int cmd_show(const char *state_dir, const char *name)
{
        struct airlock_error err = { { 0 } };
        struct profile *p = NULL;
        json_t *o, *m = NULL, *layers = NULL, *brief, *l;
        char *text;
        size_t i;
        int r;

        p = load_profile(name);
        if (!p)
                return 1;
        o = profile_to_json(p);
        if (o) {
                json_object_set_new(o, "packages", packages_json(p));
                json_object_set_new(o, "rootfs", json_string(p->rootfs));
        }
        profile_free(p);
        if (!o)
                return 1;
        r = current_manifest(state_dir, name, &m, &err);
        if (r < 0)
                json_object_set_new(o, "layer", json_pack("{s:s}", "error", err.msg));
        else
                json_object_set_new(o, "layer", r > 0 ? m : json_null());
        /* Every layer on disk: the current one, older ones that live sessions still use, and
         * leftovers. */
        brief = json_array();
        if (layer_list(state_dir, name, &layers, &err) >= 0 && brief) {
                json_array_foreach (layers, i, l) {
                        const json_t *lm = json_object_get(l, "manifest");
                        json_array_append_new(brief,
                                              json_pack("{s:O, s:O, s:O, s:O, s:O*, s:O*}", "id",
                                                        json_object_get(l, "id"), "current",
                                                        json_object_get(l, "current"), "in_use",
                                                        json_object_get(l, "in_use"), "complete",
                                                        json_object_get(l, "complete"), "created",
                                                        json_object_get(lm, "created"), "size",
                                                        json_object_get(lm, "size")));
                }
        }
        json_decref(layers);
        json_object_set_new(o, "layers", brief ? brief : json_array());
        text = json_dump_text(o, JSON_INDENT(2), NULL);
        printf("%s\n", text ? text : "null");
        free(text);
        json_decref(o);
        return 0;
}

static void on_pip_line(void *userdata, const char *line)
{
        struct build_progress *bp = userdata;

        fprintf(stderr, "  %s\n", line);
        if (strncmp(line, "ERROR:", 6) == 0 && bp->n_errors < PIP_ERRORS_MAX)
                bp->errors[bp->n_errors++] = strdup(line);
}

/* What to check after a failed build, for the profile's kind of source. */
static void build_hints(const struct profile *p)
{
        const struct profile_packages *pk = &p->packages;
        _cleanup_free_ char *index = pk->index_url ? layer_url_redact(pk->index_url) : NULL;

        fprintf(stderr, "check:\n");
        if (pk->install && pk->install[0])
                fprintf(stderr, "  - the names and versions of packages.install\n");
        if (pk->wheels_dir)
                fprintf(stderr,
                        "  - that %s holds a wheel of each requirement and of each of their\n"
                        "    dependencies%s\n",
                        pk->wheels_dir, index ? " (or that the index has them)" : "");
        if (index)
                fprintf(stderr,
                        "  - that %s answers from this machine and has the packages\n"
                        "    (packages.trusted_host for an index without a trusted certificate)\n",
                        index);
        else if (!pk->wheels_dir)
                fprintf(stderr, "  - that pip's default index answers from this machine (the "
                                "profile names no packages.index_url)\n");
        fprintf(stderr, "  - that each package has a wheel for this Python and machine: only\n"
                        "    wheels are installed, never source distributions\n");
}

/* A build tool of the microVM tier: $env, else beside the build tree's CLI (src/cli/../vm),
 * else installed in libexec. A new string or NULL. */
static char *find_vm_tool(const char *env, const char *name)
{
        const char *e = getenv(env);
        char exe[4096], path[4200];
        ssize_t n;

        if (e && *e)
                return strdup(e);
        n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
        if (n > 0) {
                exe[n] = '\0';
                if (strrchr(exe, '/'))
                        *strrchr(exe, '/') = '\0';
                (void) snprintf(path, sizeof(path), "%s/../vm/%s", exe, name);
                if (access(path, X_OK) == 0)
                        return realpath(path, NULL);
        }
        (void) snprintf(path, sizeof(path), "%s/%s", AIRLOCK_LIBEXEC_DIR, name);
        return access(path, X_OK) == 0 ? strdup(path) : NULL;
}

/* Writes the sandbox's compiled seccomp filter (src/jail/seccomp.h: raw struct sock_filter
 * instructions) into a new file made from template path. Returns its fd (the caller unlinks
 * and closes it) or -errno. */
static int write_seccomp_bpf(char *path)
{
        struct seccomp_filter *f = NULL;
        size_t len, off = 0;
        int fd, r = seccomp_filter_new(&(struct seccomp_policy_options){ 0 }, &f);

        if (r < 0)
                return r;
        fd = mkstemp(path);
        if (fd < 0) {
                r = -errno;
                seccomp_filter_free(f);
                return r;
        }
        len = f->prog.len * sizeof(*f->prog.filter);
        while (off < len) {
                ssize_t n = write(fd, (const char *) f->prog.filter + off, len - off);
                if (n < 0 && errno == EINTR)
                        continue;
                if (n <= 0) {
                        r = n < 0 ? -errno : -EIO;
                        seccomp_filter_free(f);
                        (void) unlink(path);
                        (void) close(fd);
                        return r;
                }
                off += (size_t) n;
        }
        seccomp_filter_free(f);
        (void) fchmod(fd, 0444);
        return fd;
}

/* The guest image of a microVM profile (src/vm/guest-image.sh): its root filesystem with the
 * profile's layer, if it has one, the runner and the init. Returns 0 or -errno, having said
 * why on stderr. */
static int build_vm_image(const char *state_dir, const struct profile *p)
{
        _cleanup_free_ char *tool = find_vm_tool("AIRLOCK_VM_IMAGE_TOOL", "airlock-vm-image");
        _cleanup_free_ char *init = find_vm_tool("AIRLOCK_VM_INIT", "airlock-vm-init");
        _cleanup_free_ char *runner = sandbox_find_runner();
        _cleanup_free_ char *layer = NULL;
        const char *kdir = getenv("AIRLOCK_VM_KERNEL_DIR");
        char out[4096], bpf_path[] = "/tmp/airlock-vm-seccomp-XXXXXX";
        int status, bpf_fd, r;
        pid_t pid;

        if (!kdir || !*kdir)
                kdir = "/var/cache/airlock/vm-kernel";
        if (!tool || !init || !runner) {
                fprintf(stderr,
                        "airlock profile build: cannot find %s: reinstall airlock, or set %s\n",
                        !tool   ? "airlock-vm-image"
                        : !init ? "airlock-vm-init"
                                : "airlock-runner",
                        !tool   ? "AIRLOCK_VM_IMAGE_TOOL"
                        : !init ? "AIRLOCK_VM_INIT"
                                : "AIRLOCK_RUNNER");
                return -ENOENT;
        }
        if (vm_image_dir(state_dir, p->name, out, sizeof(out)) < 0)
                return -ENAMETOOLONG;
        if (strncmp(out, state_dir, strlen(state_dir)) == 0) {
                char vmdir[4096];
                (void) snprintf(vmdir, sizeof(vmdir), "%s/vm", state_dir);
                (void) mkdir(vmdir, 0700);
        }
        (void) layer_current(state_dir, p->name, &layer, NULL);
        /* The guest's init loads the jail's own seccomp filter before it executes the runner
         * (a guest is a second wall, not the only one): compiled here, as the jail compiles it,
         * and put into the image. */
        bpf_fd = write_seccomp_bpf(bpf_path);
        if (bpf_fd < 0) {
                fprintf(stderr,
                        "airlock profile build: cannot compile the sandbox's seccomp "
                        "filter for the guest: %s\n",
                        strerror(-bpf_fd));
                return bpf_fd;
        }
        fprintf(stderr, "airlock profile: building the microVM image of profile '%s' in %s\n",
                p->name, out);
        pid = fork();
        if (pid < 0) {
                r = -errno;
                (void) unlink(bpf_path);
                (void) close(bpf_fd);
                return r;
        }
        if (pid == 0) {
                execl("/bin/sh", "sh", tool, out, runner, init, kdir, bpf_path, p->rootfs,
                      layer ? layer : "", (char *) NULL);
                _exit(127);
        }
        while (waitpid(pid, &status, 0) < 0)
                if (errno != EINTR) {
                        r = -errno;
                        (void) unlink(bpf_path);
                        (void) close(bpf_fd);
                        return r;
                }
        (void) unlink(bpf_path);
        (void) close(bpf_fd);
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
                fprintf(stderr,
                        "airlock profile build: the microVM image of profile '%s' was not built "
                        "(see above); the old one, if any, stays\n",
                        p->name);
                return -EIO;
        }
        printf("microVM image of profile '%s': %s; current\n", p->name, out);
        return 0;
}

static int cmd_build(const char *state_dir, const char *name)
{
        struct airlock_error err = { { 0 } };
        struct build_progress bp = { 0 };
        struct layer_build_options opts = { .on_output = on_pip_line, .userdata = &bp };
        struct sigaction ign = { .sa_handler = SIG_IGN }, old_int, old_quit;
        _cleanup_free_ char *before = NULL;
        struct profile *p = NULL;
        json_t *m = NULL, *gc = NULL, *v;
        char size[32];
        size_t i;
        int r;

        p = load_profile(name);
        if (!p)
                return 1;
        if (api_state_dir_make(state_dir, &err) < 0) {
                fprintf(stderr, "airlock profile: %s\n", err.msg);
                profile_free(p);
                return 1;
        }
        if (p->isolation == PROFILE_ISOLATION_MICROVM &&
            !(p->packages.install && p->packages.install[0]) && !p->packages.wheels_dir) {
                /* Nothing for a layer: only the guest image. */
                r = build_vm_image(state_dir, p);
                profile_free(p);
                return r < 0 ? 1 : 0;
        }
        (void) layer_current(state_dir, name, &before, NULL);
        if ((p->packages.install && p->packages.install[0]) || p->packages.wheels_dir)
                fprintf(stderr,
                        "airlock profile: building a layer of profile '%s' in %s/layers/%s\n", name,
                        state_dir, name);
        /* As system(3) does: ^C reaches pip, which stops, and the build fails cleanly here. */
        (void) sigaction(SIGINT, &ign, &old_int);
        (void) sigaction(SIGQUIT, &ign, &old_quit);
        r = layer_build(state_dir, p, &opts, &m, &gc, &err);
        (void) sigaction(SIGINT, &old_int, NULL);
        (void) sigaction(SIGQUIT, &old_quit, NULL);
        if (r < 0) {
                fprintf(stderr, "airlock profile build: %s\n", err.msg);
                for (unsigned k = 1; k < bp.n_errors; k++)
                        fprintf(stderr, "  %s\n", bp.errors[k] ? bp.errors[k] : "");
                if (r == -EIO)
                        build_hints(p);
                if (before)
                        fprintf(stderr, "the current layer stays: %s\n", before);
                else if (r != -EINVAL)
                        fprintf(stderr, "profile '%s' still has no layer\n", name);
        } else {
                json_array_foreach (json_object_get(gc, "removed"), i, v)
                        fprintf(stderr, "airlock profile: removed old layer %s\n",
                                json_string_value(v));
                json_array_foreach (json_object_get(gc, "in_use"), i, v)
                        fprintf(stderr,
                                "airlock profile: old layer %s is in use by live sessions: kept "
                                "until they end\n",
                                json_string_value(v));
                if (json_object_get(gc, "error"))
                        fprintf(stderr, "airlock profile: %s\n",
                                json_string_value(json_object_get(gc, "error")));
                printf("layer %s of profile '%s': %zu packages, %s; current\n",
                       json_string_value(json_object_get(m, "id")), name,
                       json_array_size(json_object_get(m, "packages")),
                       size_text((uint64_t) json_integer_value(json_object_get(m, "size")), size));
                if (p->isolation == PROFILE_ISOLATION_MICROVM)
                        r = build_vm_image(state_dir, p);
        }
        for (unsigned k = 0; k < bp.n_errors; k++)
                free(bp.errors[k]);
        json_decref(m);
        json_decref(gc);
        profile_free(p);
        return r < 0 ? 1 : 0;
}

static int cmd_rm(const char *state_dir, const char *name)
{
        struct airlock_error err = { { 0 } };
        json_t *report = NULL, *v;
        size_t i;
        int r;

        r = layer_remove(state_dir, name, &report, &err);
        if (r < 0) {
                fprintf(stderr, "airlock profile rm: %s\n", err.msg);
                return 1;
        }
        if (json_is_string(json_object_get(report, "current")))
                printf("profile '%s': layer %s is no longer current; new sessions get no layer\n",
                       name, json_string_value(json_object_get(report, "current")));
        json_array_foreach (json_object_get(report, "removed"), i, v)
                printf("removed layer %s\n", json_string_value(v));
        json_array_foreach (json_object_get(report, "in_use"), i, v)
                printf("kept layer %s: live sessions have it mounted and keep it until they end; "
                       "`airlock profile rm %s` again removes it then\n",
                       json_string_value(v), name);
        json_decref(report);
        return 0;
}

int cmd_profile(int argc, char **argv)
{
        static const struct option opts[] = {
                { "state-dir", required_argument, NULL, OPT_STATE_DIR },
                { "json", no_argument, NULL, OPT_JSON },
                { "help", no_argument, NULL, 'h' },
                {},
        };
        _cleanup_free_ char *state_dir = NULL;
        const char *verb, *name = NULL, *dir_arg = NULL;
        bool json = false;
        int c;

        optind = 1;
        while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
                switch (c) {
                case 'h':
                        fputs(profile_help, stdout);
                        return 0;
                case OPT_STATE_DIR:
                        dir_arg = optarg;
                        break;
                case OPT_JSON:
                        json = true;
                        break;
                default:
                        fputs("Try 'airlock profile --help'.\n", stderr);
                        return EXIT_USAGE;
                }
        }
        if (optind >= argc)
                return cli_usage_error("profile", "%s",
                                       "a subcommand is needed: list, show, build or rm");
        verb = argv[optind++];
        if (strcmp(verb, "list") != 0 && strcmp(verb, "show") != 0 && strcmp(verb, "build") != 0 &&
            strcmp(verb, "rm") != 0)
                return cli_usage_error("profile", "unknown subcommand '%s' (list, show, build, rm)",
                                       verb);
        if (strcmp(verb, "list") != 0) {
                if (optind >= argc)
                        return cli_usage_error("profile", "%s needs a profile NAME", verb);
                name = argv[optind++];
                /* Only names: a layer belongs to the profile the daemon finds by that name. */
                if (!profile_name_is_valid(name))
                        return cli_usage_error("profile",
                                               "'%s' is not a profile name (lowercase letters, "
                                               "digits, '_' and '-', at most 64, starting with a "
                                               "letter or digit; not a path)",
                                               name);
        }
        if (optind < argc)
                return cli_usage_error("profile", "unexpected argument '%s'", argv[optind]);
        if (json && strcmp(verb, "list") != 0)
                return cli_usage_error("profile",
                                       "--json goes with list (show always prints JSON)");

        if (dir_arg) {
                state_dir = strdup(dir_arg);
                if (!state_dir)
                        return 1;
        } else if (api_state_dir_default(&state_dir) < 0) {
                fprintf(stderr, "airlock profile: no state directory: set --state-dir, HOME or "
                                "XDG_STATE_HOME\n");
                return EXIT_USAGE;
        }

        if (strcmp(verb, "list") == 0)
                return cmd_list(state_dir, json);
        if (strcmp(verb, "show") == 0)
                return cmd_show(state_dir, name);
        if (strcmp(verb, "build") == 0)
                return cmd_build(state_dir, name);
        return cmd_rm(state_dir, name);
}
