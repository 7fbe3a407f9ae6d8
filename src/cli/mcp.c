/* `airlock mcp`: an MCP server on standard input and output (newline-delimited JSON-RPC), for
 * MCP clients that start their servers as subprocesses. It runs sandboxes itself with an
 * in-process session manager, or forwards to a daemon with --url. stdout carries protocol
 * messages only; logs go to stderr. At EOF or SIGTERM it ends its session and exits. */
#include "cli.h"
#include "client.h"
#include "tools-remote.h"

#include "base/cleanup.h"
#include "base/json-util.h"
#include "base/log.h"
#include "base/util.h"
#include "hub/hub.h"
#include "mcp/mcp.h"
#include "profile/profile.h"
#include "session/session.h"
#include "tools/tools.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* One message at most; the daemon takes 16 MiB of JSON, and a base64 file a little more. */
#define LINE_MAX_BYTES (32u * 1024u * 1024u)

static const char mcp_help[] =
        "usage: airlock mcp [OPTIONS]\n"
        "\n"
        "Runs an MCP server (Model Context Protocol) on standard input and output, for MCP\n"
        "clients such as Claude Desktop. Tools: run_python, run_shell, write_file,\n"
        "read_file, list_files, reset_session, all in one sandbox session that lives as long\n"
        "as this process (docs/MCP.md).\n"
        "\n"
        "  -p, --profile NAME    profile of the session (default, minimal, data-science,\n"
        "                        visualization); default: default\n"
        "      --isolation MODE  namespaces (default), process or none; also\n"
        "                        AIRLOCK_ISOLATION\n"
        "      --url URL         forward to a running daemon instead of running sandboxes\n"
        "                        here (token: AIRLOCK_TOKEN or the daemon's token file)\n"
        "      --state-dir DIR   where to find the daemon's token file (with --url)\n"
        "      --mcp-config FILE MCP servers whose tools are offered too, as one MCP\n"
        "                        endpoint (docs/TOOLS.md); also AIRLOCK_MCP_CONFIG\n";

struct mcp_args {
        const char *profile;
        const char *isolation;
        const char *url;
        const char *state_dir;
        const char *mcp_config;
};

struct stopper {
        sigset_t mask;
        struct session_manager *mgr; /* NULL when forwarding */
        int wake_fd;                 /* write end: wakes the main loop */
        atomic_bool stop;
};

static int parse_args(int argc, char **argv, struct mcp_args *a)
{
        enum { OPT_ISOLATION = 256, OPT_URL, OPT_STATE_DIR, OPT_MCP_CONFIG };
        static const struct option opts[] = {
                { "profile", required_argument, NULL, 'p' },
                { "isolation", required_argument, NULL, OPT_ISOLATION },
                { "url", required_argument, NULL, OPT_URL },
                { "state-dir", required_argument, NULL, OPT_STATE_DIR },
                { "mcp-config", required_argument, NULL, OPT_MCP_CONFIG },
                { "help", no_argument, NULL, 'h' },
                {},
        };
        int c;

        while ((c = getopt_long(argc, argv, "p:h", opts, NULL)) != -1) {
                switch (c) {
                case 'p':
                        a->profile = optarg;
                        break;
                case OPT_ISOLATION:
                        a->isolation = optarg;
                        break;
                case OPT_URL:
                        a->url = optarg;
                        break;
                case OPT_STATE_DIR:
                        a->state_dir = optarg;
                        break;
                case OPT_MCP_CONFIG:
                        a->mcp_config = optarg;
                        break;
                case 'h':
                        fputs(mcp_help, stdout);
                        exit(0);
                default:
                        fputs("Try 'airlock mcp --help'.\n", stderr);
                        return -EINVAL;
                }
        }
        if (optind != argc) {
                fprintf(stderr, "airlock mcp: unexpected argument '%s'\n", argv[optind]);
                return -EINVAL;
        }
        return 0;
}

/* The signal thread: SIGTERM/SIGINT end the sessions at once, so that a cell running now
 * stops (its call returns "killed") rather than holding the exit up to its timeout. */
static void *stopper_main(void *userdata)
{
        struct stopper *st = userdata;
        int sig;

        while (sigwait(&st->mask, &sig) == 0) {
                if (sig == SIGHUP)
                        continue;
                /* SIGUSR1 comes from cmd_mcp() itself: the loop ended, time to go. */
                if (sig == SIGUSR1)
                        break;
                atomic_store(&st->stop, true);
                log_info("%s received, ending the session", sig == SIGINT ? "SIGINT" : "SIGTERM");
                if (st->mgr) {
                        json_t *list = session_list(st->mgr, NULL), *s;
                        size_t i;
                        json_array_foreach (list, i, s) {
                                const char *id = json_string_value(json_object_get(s, "id"));
                                if (id)
                                        (void) session_destroy(st->mgr, id);
                        }
                        json_decref(list);
                }
                (void) write(st->wake_fd, "x", 1);
                break;
        }
        return NULL;
}

/* Handles one line and writes the reply, if any, as one line. Returns 0, or -errno when
 * stdout is gone (the client left). */
static int handle_line(struct mcp_conn *conn, const char *line, size_t len)
{
        _cleanup_free_ char *reply = NULL;
        int r;

        while (len > 0 && (line[len - 1] == '\r' || line[len - 1] == ' ' || line[len - 1] == '\t'))
                len--;
        if (len == 0)
                return 0;
        r = mcp_conn_handle(conn, line, len, &reply);
        if (r < 0)
                return log_error_errno(r, "cannot build a reply");
        if (!reply)
                return 0;
        /* One write for message and newline, so a reader never sees half a line. */
        len = strlen(reply);
        reply[len] = '\n';
        r = write_full(STDOUT_FILENO, reply, len + 1);
        reply[len] = '\0';
        return r;
}

/* Tells the client its tool list changed (internal tools came, went or changed) when the
 * hub's generation moved since the last look; only once the client is initialized. */
static int notify_tools_changed(struct mcp_conn *conn, struct hub *hub, uint64_t *seen)
{
        static const char msg[] = "{\"jsonrpc\":\"2.0\",\"method\":"
                                  "\"notifications/tools/list_changed\"}\n";
        uint64_t g;

        if (!hub || !mcp_conn_is_initialized(conn))
                return 0;
        g = hub_generation(hub);
        if (g == *seen)
                return 0;
        *seen = g;
        return write_full(STDOUT_FILENO, msg, sizeof(msg) - 1);
}

static int serve_stdio(struct mcp_conn *conn, struct hub *hub, struct stopper *st, int wake_read)
{
        _cleanup_free_ char *buf = NULL;
        size_t len = 0, size = 0;
        bool discarding = false;
        /* The client lists the tools after initialize: changes count from then. */
        uint64_t seen = hub ? hub_generation(hub) : 0;

        for (;;) {
                struct pollfd fds[2] = { { .fd = STDIN_FILENO, .events = POLLIN },
                                         { .fd = wake_read, .events = POLLIN } };
                char *nl, *start;
                ssize_t n;
                int r;

                if (atomic_load(&st->stop))
                        return 0;
                r = poll(fds, 2, hub ? 500 : -1);
                if (r < 0) {
                        if (errno == EINTR)
                                continue;
                        return -errno;
                }
                if (fds[1].revents)
                        return 0;
                if (notify_tools_changed(conn, hub, &seen) < 0)
                        return -EPIPE;
                if (r == 0)
                        continue;
                if (size - len < 65536) {
                        size_t nsize = size ? size * 2 : 131072;
                        char *p = realloc(buf, nsize);
                        if (!p)
                                return -ENOMEM;
                        buf = p;
                        size = nsize;
                }
                n = read(STDIN_FILENO, buf + len, size - len - 1);
                if (n < 0) {
                        if (errno == EINTR || errno == EAGAIN)
                                continue;
                        return -errno;
                }
                if (n == 0) {
                        /* EOF: a last message without its newline is still a message. */
                        if (len > 0 && !discarding)
                                (void) handle_line(conn, buf, len);
                        return 0;
                }
                len += (size_t) n;

                start = buf;
                while ((nl = memchr(start, '\n', len - (size_t) (start - buf)))) {
                        if (discarding)
                                discarding = false;
                        else {
                                r = handle_line(conn, start, (size_t) (nl - start));
                                if (r < 0)
                                        return r;
                        }
                        if (atomic_load(&st->stop))
                                return 0;
                        start = nl + 1;
                }
                len -= (size_t) (start - buf);
                memmove(buf, start, len);

                if (len > LINE_MAX_BYTES) {
                        /* Refused without keeping it: the rest of this line is dropped. */
                        _cleanup_free_ char *reply = NULL;
                        json_t *err = mcp_error_reply(NULL, JSONRPC_PARSE_ERROR,
                                                      "message larger than 32 MiB");
                        reply = err ? json_dump_text(err, JSON_COMPACT, NULL) : NULL;
                        json_decref(err);
                        if (reply && (write_full(STDOUT_FILENO, reply, strlen(reply)) < 0 ||
                                      write_full(STDOUT_FILENO, "\n", 1) < 0))
                                return -EPIPE;
                        len = 0;
                        discarding = true;
                }
        }
}

int cmd_mcp(int argc, char **argv)
{
        struct mcp_args a = { .profile = "default" };
        struct airlock_error err = { { 0 } };
        struct jail_features features = { 0 };
        struct session_manager *mgr = NULL;
        struct cli_client *client = NULL;
        struct tools_backend *backend = NULL;
        struct mcp_conn *conn = NULL;
        struct hub *hub = NULL;
        struct stopper st = { .wake_fd = -EBADF };
        _cleanup_close_ int wake_read = -EBADF, wake_write = -EBADF;
        enum jail_isolation mode;
        bool probed = false, thread_started = false;
        pthread_t thread;
        int pipefd[2], r, status = EXIT_USAGE;

        if (parse_args(argc, argv, &a) < 0)
                return EXIT_USAGE;
        if (cli_isolation(a.isolation, &mode) < 0)
                return EXIT_USAGE;

        /* Before any thread exists, so every thread inherits the mask and the stopper is the
         * only one that sees these signals. A client that closed our stdout is EPIPE. */
        sigemptyset(&st.mask);
        sigaddset(&st.mask, SIGTERM);
        sigaddset(&st.mask, SIGINT);
        sigaddset(&st.mask, SIGHUP);
        sigaddset(&st.mask, SIGUSR1);
        (void) pthread_sigmask(SIG_BLOCK, &st.mask, NULL);
        (void) signal(SIGPIPE, SIG_IGN);
        if (pipe2(pipefd, O_CLOEXEC) < 0) {
                fprintf(stderr, "airlock mcp: pipe: %s\n", strerror(errno));
                return EXIT_USAGE;
        }
        wake_read = pipefd[0];
        wake_write = pipefd[1];
        st.wake_fd = wake_write;
        atomic_init(&st.stop, false);
        if (cli_hub_start("mcp", a.mcp_config, &hub) < 0)
                goto out;

        if (a.url) {
                r = cli_client_new("mcp", a.url, a.state_dir, &client);
                if (r < 0)
                        goto out;
                r = tools_backend_remote_new(client, &backend);
        } else {
                struct profile *p = NULL;
                const char *pool[] = { a.profile, NULL };

                /* A bad profile name is better said now than at the first tool call. */
                r = profile_load(a.profile, &p, &err);
                profile_free(p);
                if (r < 0) {
                        fprintf(stderr, "airlock mcp: %s\n", err.msg);
                        goto out;
                }
                r = cli_probe_mode("mcp", mode, &features);
                probed = true;
                if (r < 0)
                        goto out;
                /* One live session (plus one after reset_session) for as long as the client
                 * keeps us: idle reaping would only lose its variables. One warm sandbox makes
                 * the first call quick. */
                r = session_manager_new(
                        &(struct session_manager_config){ .features = &features,
                                                          .mode = mode,
                                                          .max_sessions = 4,
                                                          .pool_size = 1,
                                                          .default_stop_after_ms =
                                                                  24ULL * 3600 * 1000,
                                                          .max_stop_after_ms = 24ULL * 3600 * 1000,
                                                          .interrupt_grace_ms = 2000,
                                                          .pool_profiles = pool,
                                                          .hub = hub },
                        &mgr, &err);
                if (r < 0) {
                        fprintf(stderr, "airlock mcp: cannot start sessions: %s\n", err.msg);
                        goto out;
                }
                st.mgr = mgr;
                r = tools_backend_local_new(mgr, &backend);
        }
        if (r < 0)
                goto out;
        r = mcp_conn_new(&(struct mcp_conn_options){ .backend = backend,
                                                     .profile = a.profile,
                                                     .name = "stdio",
                                                     .hub = hub,
                                                     .tools_list_changes = true },
                         &conn);
        if (r < 0)
                goto out;
        /* Before the first tools/list, so the client sees the internal tools. */
        cli_hub_wait(hub);
        if (pthread_create(&thread, NULL, stopper_main, &st) != 0) {
                r = -EAGAIN;
                goto out;
        }
        thread_started = true;
        log_info("mcp server ready on stdio (%s)", a.url ? a.url : "in-process sandboxes");

        r = serve_stdio(conn, hub, &st, wake_read);
        if (r < 0 && r != -EPIPE)
                log_error_errno(r, "mcp stdio transport failed");
        status = 0;
out:
        /* The session first (toolbox_free ends it, on the daemon too), then the manager. */
        mcp_conn_free(conn);
        tools_backend_free(backend);
        if (thread_started) {
                /* Not pthread_cancel(): a cancelled sigwait() unwinds the thread in a way
                 * AddressSanitizer misreads as a stack overflow. */
                (void) pthread_kill(thread, SIGUSR1);
                (void) pthread_join(thread, NULL);
        }
        session_manager_free(mgr);
        hub_free(hub);
        cli_client_free(client);
        if (probed)
                jail_features_done(&features);
        return status;
}
