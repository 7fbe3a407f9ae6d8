/* `airlock serve`: the daemon. Probes the kernel, loads or creates the API token, starts the
 * session manager (zygotes and warm pools) and the HTTP API, then waits for SIGTERM/SIGINT and
 * takes everything down in order: no new connections, every session killed, handlers
 * finished, the manager freed (cgroups removed), the unix socket removed. */
#include "cli.h"

#include "api/api.h"
#include "api/auth.h"
#include "api/listen.h"
#include "audit/audit.h"
#include "base/cidr.h"
#include "base/cleanup.h"
#include "base/log.h"
#include "base/node-id.h"
#include "base/notify.h"
#include "base/util.h"
#include "chat/chat.h"
#include "chat/gateway.h"
#include "chat/suspend.h"
#include "e2b/e2b.h"
#include "egress/egress.h"
#include "hub/hub.h"
#include "metrics/metrics.h"
#include "openai/openai.h"
#include "profile/profile.h"
#include "responses/responses.h"
#include "serve-audit.h"
#include "serve-cluster.h"
#include "session/recent.h"
#include "session/session.h"
#include "systemd-unit.h"
#include "tenant/tenant.h"
#include "vm/vm.h"

#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#define ALLOW_HOSTS_MAX 32
#define DEFAULT_LISTEN "127.0.0.1:8080"

static const char serve_help[] =
        "usage: airlock serve [OPTIONS]\n"
        "\n"
        "Runs the daemon: the HTTP API of docs/API.md, with persistent sessions.\n"
        "\n"
        "      --listen ADDR       HOST:PORT ([::1]:8080 for IPv6, port 0 = any free port)\n"
        "                          or unix:/PATH; default: " DEFAULT_LISTEN "\n"
        "      --state-dir DIR     token, session store and the id of this daemon's\n"
        "                          cgroup; default: /var/lib/airlock as root, else\n"
        "                          $XDG_STATE_HOME/airlock or ~/.local/state/airlock\n"
        "      --isolation MODE    namespaces (default), process or none; also\n"
        "                          AIRLOCK_ISOLATION. none listens on loopback only\n"
        "      --max-sessions N    live sessions at most (default 64)\n"
        "      --pool-size N       warm sessions kept per profile (default 2, 0 = none)\n"
        "      --stop-after S      stop sessions idle this long (default 5m): their state\n"
        "                          goes to disk and their next call resumes them\n"
        "      --delete-after S    delete stopped sessions this long after they stopped\n"
        "                          (default 5d)\n"
        "      --checkpoint-after S  save a session's state in the background once it\n"
        "                          was quiet this long, so a crash loses less (default\n"
        "                          30s, 0 = never)\n"
        "      --max-stopped-bytes N  disk one stopped session may use (default 1G)\n"
        "      --max-session-memory N  memory of all sessions together, their files in\n"
        "                          /work included (e.g. 16G; default: no cap beyond each\n"
        "                          profile's own)\n"
        "      --daemon-cpu-weight N  the daemon's CPU weight against all its sessions\n"
        "                          (1-10000, cgroup v2's scale; default 100, as much as\n"
        "                          all its sessions together)\n"
        "      --cpu-fairness on|off  lower the CPU weight of sessions that used much CPU\n"
        "                          recently, shared per tenant (default on)\n"
        "      --min-free-memory N  below this much free memory, refuse new sessions\n"
        "                          (503) and stop idle ones (default 5% of the memory,\n"
        "                          at most 1G; off = never)\n"
        "      --zygote-max-sessions N  replace a profile's zygote after it forked N\n"
        "                          sandboxes (default 256, 0 = no limit): sessions of one\n"
        "                          zygote share its memory layout and hash secret\n"
        "      --zygote-max-age S  replace a profile's zygote once it is this old\n"
        "                          (default 10m, 0 = no limit)\n"
        "      --recent-executions N  executions kept in memory, code and output cut\n"
        "                          short, for GET /v1/executions and /ui (default 256,\n"
        "                          0 = none kept)\n"
        "      --idle-timeout S    the old name of --stop-after\n"
        "      --allow-host HOST   also accept this Host header (repeatable)\n"
        "      --max-upload N      largest file POST /v1/files and\n"
        "                          /v1/containers/{id}/files accept (default 512M;\n"
        "                          larger is 413), streamed to disk under DIR/openai\n"
        "\n"
        "Connections (docs/SECURITY.md, \"The HTTP server under load\"):\n"
        "      --max-connections N  open at once (default 4096); near the limit the oldest\n"
        "                          idle or half-sent connection is closed for a new one\n"
        "      --max-connections-per-client N  from one IP address (default 512, 0 = no\n"
        "                          cap; a unix socket has none)\n"
        "      --request-timeout S  time to send a request's headers, and a body's base\n"
        "                          time (plus 1 s per MiB it declares); default 10s\n"
        "      --keepalive-timeout S  an idle keep-alive connection is closed after this\n"
        "                          long without traffic (default 5m)\n"
        "\n"
        "The model behind POST /v1/chat/completions (docs/CHAT.md) and POST\n"
        "/v1/responses (docs/RESPONSES.md):\n"
        "      --llm-base-url URL  the upstream endpoint; also AIRLOCK_LLM_BASE_URL (off\n"
        "                          without one)\n"
        "      --llm-model NAME    model for requests that name none; also AIRLOCK_LLM_MODEL\n"
        "      --llm-api-key KEY   the upstream's key; prefer AIRLOCK_LLM_API_KEY\n"
        "      --llm-timeout S     longest wait for one upstream answer (default 120)\n"
        "      --chat-max-rounds N tool rounds per answer at most (default 10)\n"
        "      --chat-require-approval  run_python and run_shell wait for the client's\n"
        "                          approval (airlock.approvals, docs/CHAT.md);\n"
        "                          /v1/responses then refuses code_interpreter\n"
        "\n"
        "Metrics (docs/METRICS.md): GET /metrics in the Prometheus text format\n"
        "      --metrics-listen ADDR  also serve GET /metrics, and nothing else, without a\n"
        "                          token on ADDR (HOST:PORT or unix:/PATH); loopback only\n"
        "                          unless --metrics-public\n"
        "      --metrics-public    let --metrics-listen take a non-loopback address: anyone\n"
        "                          who reaches it reads the metrics (firewall it)\n"
        "      --metrics-token-file FILE  the token GET /metrics on --listen needs (created\n"
        "                          when missing); default DIR/metrics-token, or\n"
        "                          $AIRLOCK_METRICS_TOKEN. The API token works too\n"
        "      --metrics-top-sessions N  memory and CPU series for the N live sessions\n"
        "                          using the most memory, labelled by rank, never by id\n"
        "                          (default 10, 0 = none, at most 100)\n"
        "\n"
        "Internal tools (docs/TOOLS.md):\n"
        "      --mcp-config FILE   the MCP servers behind airlock, in the mcpServers JSON\n"
        "                          MCP clients read; also AIRLOCK_MCP_CONFIG. Their tools\n"
        "                          are offered at /mcp, the gateway and Code Mode\n"
        "\n"
        "Cluster (docs/API.md, \"Cluster\"):\n"
        "      --node NAME         this daemon's node name (a DNS label, at most 32):\n"
        "                          every id it makes ends in -NAME; also AIRLOCK_NODE;\n"
        "                          default none, or the hostname of a StatefulSet pod\n"
        "      --peers SPEC        the other nodes, NAME=HOST:PORT,...: a NAME may end in\n"
        "                          a range [A-B] and HOST may hold {node}, e.g.\n"
        "                          'airlock-[0-15]={node}.airlock-peers:8080'; requests\n"
        "                          for their ids are forwarded to them; also AIRLOCK_PEERS\n"
        "      --trusted-proxies CIDR[,CIDR...]  a front door's addresses: exempt from\n"
        "                          --max-connections-per-client, and the last entry of\n"
        "                          their X-Forwarded-For is the client in logs and audit\n"
        "\n"
        "      --print-systemd-unit  print the systemd unit meson installs\n"
        "                          (airlock.service, docs/DEPLOY.md) and exit\n"
        "\n"
        "The audit log (docs/AUDIT.md): one JSON line per security-relevant event:\n"
        "      --audit-log PATH    the file (created 0600); default DIR/audit.log; off =\n"
        "                          no file\n"
        "      --audit-max-size N  rotate before the file passes N (default 100M, 0 =\n"
        "                          never)\n"
        "      --audit-keep N      rotated files kept, PATH.1 (newest) .. PATH.N\n"
        "                          (default 5)\n"
        "      --audit-syslog FACILITY  also to syslog(3) (journald reads it): auth,\n"
        "                          authpriv, daemon, user, local0..local7; default off\n"
        "      --audit-code on|off the code text in execution lines (default on; its\n"
        "                          SHA-256 is always there)\n"
        "      --audit-fail continue|refuse  when a line cannot be written (disk full):\n"
        "                          executions go on (default) or are refused with 503\n"
        "SIGHUP reopens the audit log (after an outside rotation).\n"
        "\n"
        "The API token is $AIRLOCK_TOKEN, else DIR/token (created on the first start and\n"
        "printed once). SIGTERM or SIGINT stop the daemon cleanly: every live session is\n"
        "stopped (saved) first, and the next daemon on the same state directory resumes it.\n"
        "Durations: 30, 30s, 5m, 2h, 5d. Sizes: 512M, 1G.\n";

/* Parses a duration flag within [min_ms, max_ms], saying what is allowed when it is not. */
static int parse_duration_flag(const char *flag, const char *value, uint64_t min_ms,
                               uint64_t max_ms, const char *range, uint64_t *ret_ms)
{
        uint64_t ms;

        if (parse_duration_ms(value, &ms) < 0 || ms < min_ms || ms > max_ms) {
                fprintf(stderr, "airlock serve: %s '%s' is not a duration between %s\n", flag,
                        value, range);
                return -EINVAL;
        }
        *ret_ms = ms;
        return 0;
}

struct serve_args {
        const char *listen;
        const char *state_dir;
        const char *isolation;
        const char *allow_hosts[ALLOW_HOSTS_MAX + 1];
        size_t n_allow_hosts;
        unsigned max_sessions;
        unsigned pool_size;
        uint64_t stop_after_ms;
        uint64_t delete_after_ms;
        uint64_t checkpoint_after_ms;
        uint64_t max_stopped_bytes;
        uint64_t max_session_memory;
        uint32_t daemon_cpu_weight;
        bool cpu_fairness_off;
        uint64_t min_free_memory; /* SESSION_MEMORY_PRESSURE_OFF for off; 0 = the default */
        uint64_t max_upload;
        unsigned max_connections, max_connections_per_client;
        uint64_t request_timeout_ms, keepalive_timeout_ms;
        unsigned zygote_max_sessions; /* SESSION_ZYGOTE_NEVER for 0 */
        unsigned recent_executions;   /* SESSION_RECENT_OFF for 0; 0 = the default */
        uint64_t zygote_max_age_ms;   /* SESSION_ZYGOTE_NEVER for 0 */
        const char *llm_base_url, *llm_model, *llm_api_key;
        uint64_t llm_timeout_ms;
        unsigned chat_max_rounds;
        bool chat_require_approval;
        const char *mcp_config;
        const char *metrics_listen;
        bool metrics_public;
        const char *metrics_token_file;
        unsigned metrics_top_sessions;
        struct serve_audit audit;
        const char *node, *peers;           /* serve-cluster.h */
        struct cidr trusted[CIDR_LIST_MAX]; /* --trusted-proxies */
        size_t n_trusted;
};

static int parse_uint(const char *opt, const char *s, unsigned min, unsigned max, unsigned *ret)
{
        char *end;
        unsigned long v;

        errno = 0;
        v = strtoul(s, &end, 10);
        if (!*s || *end || errno || s[0] == '-' || v < min || v > max) {
                fprintf(stderr, "airlock serve: %s '%s' is not a number from %u to %u\n", opt, s,
                        min, max);
                return -EINVAL;
        }
        *ret = (unsigned) v;
        return 0;
}

static int parse_args(int argc, char **argv, struct serve_args *a)
{
        enum {
                OPT_LISTEN = 256,
                OPT_STATE_DIR,
                OPT_ISOLATION,
                OPT_MAX_SESSIONS,
                OPT_POOL_SIZE,
                OPT_IDLE_TIMEOUT,
                OPT_STOP_AFTER,
                OPT_DELETE_AFTER,
                OPT_CHECKPOINT_AFTER,
                OPT_MAX_STOPPED_BYTES,
                OPT_MAX_SESSION_MEMORY,
                OPT_DAEMON_CPU_WEIGHT,
                OPT_CPU_FAIRNESS,
                OPT_MIN_FREE_MEMORY,
                OPT_MAX_UPLOAD,
                OPT_ZYGOTE_MAX_SESSIONS,
                OPT_ZYGOTE_MAX_AGE,
                OPT_RECENT_EXECUTIONS,
                OPT_ALLOW_HOST,
                OPT_MAX_CONNECTIONS,
                OPT_MAX_CONNECTIONS_PER_CLIENT,
                OPT_REQUEST_TIMEOUT,
                OPT_KEEPALIVE_TIMEOUT,
                OPT_LLM_BASE_URL,
                OPT_LLM_MODEL,
                OPT_LLM_API_KEY,
                OPT_LLM_TIMEOUT,
                OPT_CHAT_MAX_ROUNDS,
                OPT_CHAT_REQUIRE_APPROVAL,
                OPT_MCP_CONFIG,
                OPT_METRICS_LISTEN,
                OPT_METRICS_PUBLIC,
                OPT_METRICS_TOKEN_FILE,
                OPT_METRICS_TOP_SESSIONS,
                OPT_PRINT_SYSTEMD_UNIT,
                OPT_NODE,
                OPT_PEERS,
                OPT_TRUSTED_PROXIES,
                OPT_AUDIT /* every --audit-* flag: serve-audit.c reads them */
        };
        static const struct option opts[] = {
                { "listen", required_argument, NULL, OPT_LISTEN },
                { "state-dir", required_argument, NULL, OPT_STATE_DIR },
                { "isolation", required_argument, NULL, OPT_ISOLATION },
                { "max-sessions", required_argument, NULL, OPT_MAX_SESSIONS },
                { "pool-size", required_argument, NULL, OPT_POOL_SIZE },
                { "idle-timeout", required_argument, NULL, OPT_IDLE_TIMEOUT },
                { "stop-after", required_argument, NULL, OPT_STOP_AFTER },
                { "delete-after", required_argument, NULL, OPT_DELETE_AFTER },
                { "checkpoint-after", required_argument, NULL, OPT_CHECKPOINT_AFTER },
                { "max-stopped-bytes", required_argument, NULL, OPT_MAX_STOPPED_BYTES },
                { "max-session-memory", required_argument, NULL, OPT_MAX_SESSION_MEMORY },
                { "daemon-cpu-weight", required_argument, NULL, OPT_DAEMON_CPU_WEIGHT },
                { "cpu-fairness", required_argument, NULL, OPT_CPU_FAIRNESS },
                { "min-free-memory", required_argument, NULL, OPT_MIN_FREE_MEMORY },
                { "max-upload", required_argument, NULL, OPT_MAX_UPLOAD },
                { "zygote-max-sessions", required_argument, NULL, OPT_ZYGOTE_MAX_SESSIONS },
                { "zygote-max-age", required_argument, NULL, OPT_ZYGOTE_MAX_AGE },
                { "recent-executions", required_argument, NULL, OPT_RECENT_EXECUTIONS },
                { "allow-host", required_argument, NULL, OPT_ALLOW_HOST },
                { "max-connections", required_argument, NULL, OPT_MAX_CONNECTIONS },
                { "max-connections-per-client", required_argument, NULL,
                  OPT_MAX_CONNECTIONS_PER_CLIENT },
                { "request-timeout", required_argument, NULL, OPT_REQUEST_TIMEOUT },
                { "keepalive-timeout", required_argument, NULL, OPT_KEEPALIVE_TIMEOUT },
                { "llm-base-url", required_argument, NULL, OPT_LLM_BASE_URL },
                { "llm-model", required_argument, NULL, OPT_LLM_MODEL },
                { "llm-api-key", required_argument, NULL, OPT_LLM_API_KEY },
                { "llm-timeout", required_argument, NULL, OPT_LLM_TIMEOUT },
                { "chat-max-rounds", required_argument, NULL, OPT_CHAT_MAX_ROUNDS },
                { "chat-require-approval", no_argument, NULL, OPT_CHAT_REQUIRE_APPROVAL },
                { "mcp-config", required_argument, NULL, OPT_MCP_CONFIG },
                { "metrics-listen", required_argument, NULL, OPT_METRICS_LISTEN },
                { "metrics-public", no_argument, NULL, OPT_METRICS_PUBLIC },
                { "metrics-token-file", required_argument, NULL, OPT_METRICS_TOKEN_FILE },
                { "metrics-top-sessions", required_argument, NULL, OPT_METRICS_TOP_SESSIONS },
                { "print-systemd-unit", no_argument, NULL, OPT_PRINT_SYSTEMD_UNIT },
                { "node", required_argument, NULL, OPT_NODE },
                { "peers", required_argument, NULL, OPT_PEERS },
                { "trusted-proxies", required_argument, NULL, OPT_TRUSTED_PROXIES },
                { "audit-log", required_argument, NULL, OPT_AUDIT },
                { "audit-max-size", required_argument, NULL, OPT_AUDIT },
                { "audit-keep", required_argument, NULL, OPT_AUDIT },
                { "audit-syslog", required_argument, NULL, OPT_AUDIT },
                { "audit-code", required_argument, NULL, OPT_AUDIT },
                { "audit-fail", required_argument, NULL, OPT_AUDIT },
                { "help", no_argument, NULL, 'h' },
                {},
        };
        char flag[64];
        int c, k;

        while ((c = getopt_long(argc, argv, "h", opts, &k)) != -1) {
                switch (c) {
                case OPT_AUDIT:
                        (void) snprintf(flag, sizeof(flag), "--%s", opts[k].name);
                        if (serve_audit_flag(&a->audit, flag, optarg) < 0)
                                return -EINVAL;
                        break;
                case OPT_LISTEN:
                        a->listen = optarg;
                        break;
                case OPT_STATE_DIR:
                        a->state_dir = optarg;
                        break;
                case OPT_ISOLATION:
                        a->isolation = optarg;
                        break;
                case OPT_MAX_SESSIONS:
                        if (parse_uint("--max-sessions", optarg, 1, 100000, &a->max_sessions) < 0)
                                return -EINVAL;
                        break;
                case OPT_POOL_SIZE:
                        if (parse_uint("--pool-size", optarg, 0, 64, &a->pool_size) < 0)
                                return -EINVAL;
                        break;
                case OPT_IDLE_TIMEOUT:
                case OPT_STOP_AFTER:
                        if (parse_duration_flag(c == OPT_STOP_AFTER ? "--stop-after"
                                                                    : "--idle-timeout",
                                                optarg, 1000, 24ULL * 3600 * 1000,
                                                "1s and 24h (e.g. 300, 5m)", &a->stop_after_ms) < 0)
                                return -EINVAL;
                        break;
                case OPT_DELETE_AFTER:
                        if (parse_duration_flag(
                                    "--delete-after", optarg, 1000, 3650ULL * 24 * 3600 * 1000,
                                    "1s and 3650d (e.g. 5d, 12h)", &a->delete_after_ms) < 0)
                                return -EINVAL;
                        break;
                case OPT_CHECKPOINT_AFTER:
                        if (parse_duration_flag("--checkpoint-after", optarg, 0,
                                                24ULL * 3600 * 1000, "0 (never) and 24h (e.g. 30s)",
                                                &a->checkpoint_after_ms) < 0)
                                return -EINVAL;
                        break;
                case OPT_MAX_STOPPED_BYTES:
                        if (parse_size(optarg, &a->max_stopped_bytes) < 0 ||
                            a->max_stopped_bytes < (1u << 20)) {
                                fprintf(stderr,
                                        "airlock serve: --max-stopped-bytes '%s' is not a size "
                                        "of at least 1M (e.g. 512M, 2G)\n",
                                        optarg);
                                return -EINVAL;
                        }
                        break;
                case OPT_MAX_SESSION_MEMORY:
                        if (parse_size(optarg, &a->max_session_memory) < 0 ||
                            a->max_session_memory < (64u << 20)) {
                                fprintf(stderr,
                                        "airlock serve: --max-session-memory '%s' is not a size "
                                        "of at least 64M (e.g. 16G)\n",
                                        optarg);
                                return -EINVAL;
                        }
                        break;
                case OPT_DAEMON_CPU_WEIGHT: {
                        char *end;
                        unsigned long v;
                        errno = 0;
                        v = strtoul(optarg, &end, 10);
                        if (errno || end == optarg || *end || optarg[0] == '-' || v < 1 ||
                            v > 10000) {
                                fprintf(stderr,
                                        "airlock serve: --daemon-cpu-weight '%s' is not a "
                                        "whole number from 1 to 10000 (a session weighs 100)\n",
                                        optarg);
                                return -EINVAL;
                        }
                        a->daemon_cpu_weight = (uint32_t) v;
                        break;
                }
                case OPT_CPU_FAIRNESS:
                        if (strcmp(optarg, "on") == 0) {
                                a->cpu_fairness_off = false;
                        } else if (strcmp(optarg, "off") == 0) {
                                a->cpu_fairness_off = true;
                        } else {
                                fprintf(stderr,
                                        "airlock serve: --cpu-fairness '%s' must be on or off\n",
                                        optarg);
                                return -EINVAL;
                        }
                        break;
                case OPT_MIN_FREE_MEMORY:
                        if (strcmp(optarg, "off") == 0) {
                                a->min_free_memory = SESSION_MEMORY_PRESSURE_OFF;
                        } else if (parse_size(optarg, &a->min_free_memory) < 0 ||
                                   a->min_free_memory < (1u << 20) ||
                                   a->min_free_memory >= SESSION_MEMORY_PRESSURE_OFF) {
                                fprintf(stderr,
                                        "airlock serve: --min-free-memory '%s' is not a size of "
                                        "at least 1M (e.g. 512M, 2G) or off\n",
                                        optarg);
                                return -EINVAL;
                        }
                        break;
                case OPT_MAX_UPLOAD:
                        if (parse_size(optarg, &a->max_upload) < 0 || a->max_upload < 1024 ||
                            a->max_upload > (64ULL << 30)) {
                                fprintf(stderr,
                                        "airlock serve: --max-upload '%s' is not a size from 1K "
                                        "to 64G (e.g. 512M)\n",
                                        optarg);
                                return -EINVAL;
                        }
                        break;
                case OPT_ZYGOTE_MAX_SESSIONS:
                        if (parse_uint("--zygote-max-sessions", optarg, 0, 1000000,
                                       &a->zygote_max_sessions) < 0)
                                return -EINVAL;
                        if (a->zygote_max_sessions == 0)
                                a->zygote_max_sessions = SESSION_ZYGOTE_NEVER;
                        break;
                case OPT_RECENT_EXECUTIONS:
                        if (parse_uint("--recent-executions", optarg, 0, RECENT_CAPACITY_MAX,
                                       &a->recent_executions) < 0)
                                return -EINVAL;
                        if (a->recent_executions == 0)
                                a->recent_executions = SESSION_RECENT_OFF;
                        break;
                case OPT_ZYGOTE_MAX_AGE:
                        if (parse_duration_flag("--zygote-max-age", optarg, 0,
                                                7ULL * 24 * 3600 * 1000,
                                                "0 (no limit) and 7d (e.g. 10m, 1h)",
                                                &a->zygote_max_age_ms) < 0)
                                return -EINVAL;
                        if (a->zygote_max_age_ms == 0)
                                a->zygote_max_age_ms = SESSION_ZYGOTE_NEVER;
                        else if (a->zygote_max_age_ms < 1000) {
                                fprintf(stderr,
                                        "airlock serve: --zygote-max-age '%s' is shorter "
                                        "than 1s (a zygote takes about that long to "
                                        "start)\n",
                                        optarg);
                                return -EINVAL;
                        }
                        break;
                case OPT_ALLOW_HOST:
                        if (a->n_allow_hosts >= ALLOW_HOSTS_MAX || !*optarg) {
                                fprintf(stderr,
                                        "airlock serve: --allow-host: at most %d non-empty "
                                        "values\n",
                                        ALLOW_HOSTS_MAX);
                                return -EINVAL;
                        }
                        a->allow_hosts[a->n_allow_hosts++] = optarg;
                        break;
                case OPT_MAX_CONNECTIONS:
                        if (parse_uint("--max-connections", optarg, 16, 1000000,
                                       &a->max_connections) < 0)
                                return -EINVAL;
                        break;
                case OPT_MAX_CONNECTIONS_PER_CLIENT:
                        if (parse_uint("--max-connections-per-client", optarg, 0, 1000000,
                                       &a->max_connections_per_client) < 0)
                                return -EINVAL;
                        if (a->max_connections_per_client == 0)
                                a->max_connections_per_client = UINT_MAX;
                        break;
                case OPT_REQUEST_TIMEOUT:
                        if (parse_duration_flag("--request-timeout", optarg, 1000, 300 * 1000,
                                                "1s and 5m (e.g. 10s)", &a->request_timeout_ms) < 0)
                                return -EINVAL;
                        break;
                case OPT_KEEPALIVE_TIMEOUT:
                        if (parse_duration_flag("--keepalive-timeout", optarg, 1000, 3600 * 1000,
                                                "1s and 1h (e.g. 5m)",
                                                &a->keepalive_timeout_ms) < 0)
                                return -EINVAL;
                        break;
                case OPT_MCP_CONFIG:
                        a->mcp_config = optarg;
                        break;
                case OPT_METRICS_LISTEN:
                        a->metrics_listen = optarg;
                        break;
                case OPT_METRICS_PUBLIC:
                        a->metrics_public = true;
                        break;
                case OPT_METRICS_TOKEN_FILE:
                        a->metrics_token_file = optarg;
                        break;
                case OPT_METRICS_TOP_SESSIONS:
                        if (parse_uint("--metrics-top-sessions", optarg, 0, 100,
                                       &a->metrics_top_sessions) < 0)
                                return -EINVAL;
                        break;
                case OPT_LLM_BASE_URL:
                        a->llm_base_url = optarg;
                        break;
                case OPT_LLM_MODEL:
                        a->llm_model = optarg;
                        break;
                case OPT_LLM_API_KEY:
                        a->llm_api_key = optarg;
                        break;
                case OPT_LLM_TIMEOUT:
                        if (parse_duration_ms(optarg, &a->llm_timeout_ms) < 0 ||
                            a->llm_timeout_ms == 0 || a->llm_timeout_ms > 3600ULL * 1000) {
                                fprintf(stderr,
                                        "airlock serve: --llm-timeout '%s' is not a duration "
                                        "between 1ms and 1h (e.g. 120, 2m)\n",
                                        optarg);
                                return -EINVAL;
                        }
                        break;
                case OPT_CHAT_MAX_ROUNDS:
                        if (parse_uint("--chat-max-rounds", optarg, 1, CHAT_MAX_ROUNDS_MAX,
                                       &a->chat_max_rounds) < 0)
                                return -EINVAL;
                        break;
                case OPT_CHAT_REQUIRE_APPROVAL:
                        a->chat_require_approval = true;
                        break;
                case OPT_NODE:
                        a->node = optarg;
                        break;
                case OPT_PEERS:
                        a->peers = optarg;
                        break;
                case OPT_TRUSTED_PROXIES: {
                        char why[256];

                        if (cidr_list_parse(optarg, a->trusted, CIDR_LIST_MAX, &a->n_trusted, why,
                                            sizeof(why)) < 0) {
                                fprintf(stderr, "airlock serve: --trusted-proxies: %s\n", why);
                                return -EINVAL;
                        }
                        break;
                }
                case OPT_PRINT_SYSTEMD_UNIT:
                        /* The same bytes meson writes to packaging's airlock.service. */
                        fputs((const char *) systemd_unit_source, stdout);
                        exit(0);
                case 'h':
                        fputs(serve_help, stdout);
                        exit(0);
                default:
                        fputs("Try 'airlock serve --help'.\n", stderr);
                        return -EINVAL;
                }
        }
        if (optind != argc) {
                fprintf(stderr, "airlock serve: unexpected argument '%s'\n", argv[optind]);
                return -EINVAL;
        }
        return 0;
}

static void print_probe(const struct jail_features *f, enum jail_isolation mode)
{
        fprintf(stderr,
                "airlock: kernel %s; user namespaces %s; landlock %s%.0d; seccomp %s; "
                "cgroups %s\n",
                f->kernel, f->userns ? "yes" : "no", f->landlock_abi > 0 ? "ABI " : "unavailable",
                f->landlock_abi, f->seccomp ? "yes" : "no",
                cgroup_version_name(f->cgroups.version));
        fprintf(stderr, "airlock: isolation %s%s\n", jail_isolation_to_string(mode),
                mode == JAIL_NAMESPACES ? " (every layer)"
                : mode == JAIL_PROCESS  ? " (rlimits, timeout and cgroup only: WEAK)"
                                        : " (no isolation: development only)");
}

/* Says at start which profiles allow javascript where their root filesystem has no Node, or r
 * where it has no R: those cells will fail at once with a message saying so (src/runner/node.c,
 * r.c). */
static void probe_languages(void)
{
        char **names = NULL;

        if (profile_list(&names) < 0)
                return;
        for (char **n = names; *n; n++) {
                struct airlock_error err = { { 0 } };
                struct profile *p = NULL;
                char path[4096];

                if (profile_load(*n, &p, &err) < 0)
                        continue;
                if (p->isolation == PROFILE_ISOLATION_MICROVM && vm_probe(&err) < 0)
                        log_error("profile=%s msg=\"refused: its sessions run in microVMs, "
                                  "which this host cannot run: %s. The other profiles are "
                                  "served.\"",
                                  p->name, err.msg);
                else if (p->isolation == PROFILE_ISOLATION_MICROVM && getenv("AIRLOCK_VM_ACCEL") &&
                         strcmp(getenv("AIRLOCK_VM_ACCEL"), "tcg") == 0)
                        log_warn("profile=%s msg=\"microVMs run under QEMU's software emulation "
                                 "(AIRLOCK_VM_ACCEL=tcg): slow, and a larger attack surface "
                                 "than KVM; for development and tests only\"",
                                 p->name);
                const struct {
                        bool allowed;
                        const char *language, *file, *package;
                        int mode;
                } needs[] = {
                        { p->lang_javascript, "javascript", "/usr/bin/node", "nodejs", X_OK },
                        { p->lang_r, "r", "/usr/lib/R/lib/libR.so", "r-base-core", R_OK },
                };

                for (size_t i = 0; i < sizeof(needs) / sizeof(needs[0]); i++) {
                        (void) snprintf(path, sizeof(path), "%s%s",
                                        strcmp(p->rootfs, "/") == 0 ? "" : p->rootfs,
                                        needs[i].file);
                        if (needs[i].allowed && access(path, needs[i].mode) < 0)
                                log_warn("profile=%s msg=\"the profile allows %s but '%s' is not "
                                         "installed: its %s cells will fail (apt-get install "
                                         "%s)\"",
                                         p->name, needs[i].language, path, needs[i].language,
                                         needs[i].package);
                }
                profile_free(p);
        }
        strv_free(names);
}

/* Sessions hold several fds each (pipes, control socket, pidfds, cgroups): use what the hard
 * limit allows. Returns the soft limit found at start. */
static rlim_t raise_nofile(void)
{
        struct rlimit rl;
        rlim_t was;

        if (getrlimit(RLIMIT_NOFILE, &rl) < 0)
                return 0;
        was = rl.rlim_cur;
        if (rl.rlim_cur < rl.rlim_max) {
                rl.rlim_cur = rl.rlim_max;
                (void) setrlimit(RLIMIT_NOFILE, &rl);
        }
        return was;
}

/* Says whether the open-file limit covers --max-sessions; when it does not, the daemon runs
 * anyway and refuses the sessions that do not fit with a 503 that says why (session.h). */
static void check_nofile(struct session_manager *mgr, unsigned max_sessions, rlim_t was)
{
        unsigned per, need = session_manager_fds_needed(mgr, &per);
        unsigned long long fit;
        struct rlimit rl;

        if (getrlimit(RLIMIT_NOFILE, &rl) < 0)
                return;
        if (rl.rlim_cur == RLIM_INFINITY || rl.rlim_cur >= need) {
                log_info("msg=\"open-file limit %llu%s: room for --max-sessions %u (%u fds "
                         "each, about %u in all)\"",
                         (unsigned long long) rl.rlim_cur, rl.rlim_cur > was ? " (raised)" : "",
                         max_sessions, per, need);
                return;
        }
        fit = rl.rlim_cur > need - (unsigned long long) max_sessions * per
                      ? (rl.rlim_cur - (need - (unsigned long long) max_sessions * per)) / per
                      : 0;
        log_warn("msg=\"the open-file limit (RLIMIT_NOFILE %llu, hard limit %llu) cannot cover "
                 "--max-sessions %u: they need about %u fds (%u each); sessions past about %llu "
                 "will be refused. Raise the limit (ulimit -n, systemd LimitNOFILE=) or lower "
                 "--max-sessions\"",
                 (unsigned long long) rl.rlim_cur, (unsigned long long) rl.rlim_max, max_sessions,
                 need, per, fit);
}

/* The token GET /metrics needs on --listen: $AIRLOCK_METRICS_TOKEN, else the file
 * (--metrics-token-file, or DIR/metrics-token), created with a random token when missing.
 * There is no flag with the token itself: a command line is readable by every local user
 * (/proc/PID/cmdline). Returns 0 or -errno after saying why on stderr. */
static int load_metrics_token(const struct serve_args *a, const char *state_dir, char **ret_token)
{
        _cleanup_free_ char *copy = NULL;
        struct airlock_error err = { { 0 } };
        const char *env = getenv("AIRLOCK_METRICS_TOKEN"), *dir = state_dir,
                   *file = METRICS_TOKEN_FILE;
        bool created = false;
        char *slash;
        int r;

        if (env && *env) {
                if (strlen(env) < 16)
                        log_warn("AIRLOCK_METRICS_TOKEN is shorter than 16 characters: easy to "
                                 "guess");
                *ret_token = strdup(env);
                return *ret_token ? 0 : -ENOMEM;
        }
        if (a->metrics_token_file) {
                copy = strdup(a->metrics_token_file);
                if (!copy)
                        return -ENOMEM;
                slash = strrchr(copy, '/');
                if (!slash || slash[1] == '\0') {
                        fprintf(stderr,
                                "airlock serve: --metrics-token-file '%s': give a path with a "
                                "directory and a file name (e.g. /etc/airlock/metrics-token)\n",
                                a->metrics_token_file);
                        return -EINVAL;
                }
                *slash = '\0';
                dir = copy[0] ? copy : "/";
                file = slash + 1;
        }
        r = api_token_file_load_or_create(dir, file, ret_token, &created, &err);
        if (r < 0) {
                fprintf(stderr, "airlock serve: metrics token: %s\n", err.msg);
                return r;
        }
        if (created)
                fprintf(stderr, "airlock: new metrics token written to %s/%s\n",
                        strcmp(dir, "/") == 0 ? "" : dir, file);
        return 0;
}

/* What the egress proxy did: each refusal and each connection ended goes to the audit log, the
 * metrics and the daemon's log. Called from the proxy's connection threads. */
static void on_egress_event(void *userdata, const struct egress_event *ev)
{
        struct audit *audit = userdata;
        bool refused = ev->type == EGRESS_EVENT_REFUSED;

        if (ev->type == EGRESS_EVENT_OPEN)
                return;
        metrics_egress(metrics_profile(ev->profile), refused, ev->bytes_in, ev->bytes_out);
        if (refused) {
                log_info("session=%s profile=%s msg=\"egress refused: %s %s:%u: %s\"", ev->session,
                         ev->profile, ev->via, ev->host, ev->port, ev->reason);
                audit_emit_owned(audit, "egress.refusal", ev->tenant, ev->session,
                                 json_pack("{s:s, s:s, s:i, s:s, s:s?}", "profile", ev->profile,
                                           "host", ev->host, "port", (int) ev->port, "via", ev->via,
                                           "reason", ev->reason));
                return;
        }
        log_debug("session=%s msg=\"egress %s %s:%u (%s) closed: %llu bytes in, %llu out\"",
                  ev->session, ev->via, ev->host, ev->port, ev->address ? ev->address : "?",
                  (unsigned long long) ev->bytes_in, (unsigned long long) ev->bytes_out);
        audit_emit_owned(audit, "egress.connection", ev->tenant, ev->session,
                         json_pack("{s:s, s:s, s:i, s:s?, s:s, s:I, s:I, s:s?}", "profile",
                                   ev->profile, "host", ev->host, "port", (int) ev->port, "address",
                                   ev->address, "via", ev->via, "bytes_in",
                                   (json_int_t) ev->bytes_in, "bytes_out",
                                   (json_int_t) ev->bytes_out, "reason", ev->reason));
}

/* No session may reach the daemon's own listeners through the proxy, whatever its profile
 * allows. */
static int set_egress_denylist(struct egress *egress, const struct api_server *srv,
                               const struct api_server *msrv)
{
        struct sockaddr_storage addrs[2];
        size_t n = 0;

        n += api_server_sockaddr(srv, &addrs[n]);
        n += api_server_sockaddr(msrv, &addrs[n]);
        return egress_set_denylist(egress,
                                   &(struct egress_denylist){ .listen = addrs, .n_listen = n });
}

/* --metrics-listen: loopback (or a unix socket) unless --metrics-public, since it answers
 * without a token. Returns 0 or -EINVAL after saying why. */
static int check_metrics_listen(const struct serve_args *a)
{
        struct api_listen ml;
        const char *why = NULL;

        if (!a->metrics_listen) {
                if (a->metrics_public) {
                        fprintf(stderr, "airlock serve: --metrics-public goes with "
                                        "--metrics-listen ADDR\n");
                        return -EINVAL;
                }
                return 0;
        }
        if (api_listen_parse(a->metrics_listen, &ml, &why) < 0) {
                fprintf(stderr, "airlock serve: --metrics-listen '%s': %s\n", a->metrics_listen,
                        why);
                return -EINVAL;
        }
        if (!a->metrics_public && !api_listen_is_loopback(&ml)) {
                fprintf(stderr,
                        "airlock serve: --metrics-listen '%s' is not a loopback address: the "
                        "metrics listener needs no token, so anyone who reaches it could read "
                        "the metrics. Use 127.0.0.1:PORT, or add --metrics-public (and a "
                        "firewall) to serve them beyond this machine\n",
                        a->metrics_listen);
                return -EINVAL;
        }
        if (strcmp(a->metrics_listen, a->listen) == 0) {
                fprintf(stderr, "airlock serve: --metrics-listen must differ from --listen\n");
                return -EINVAL;
        }
        return 0;
}

/* Tells systemd (Type=notify) that the API answers; outside systemd it does nothing. A failure
 * is said once and does not stop the daemon: systemd then times the start out itself. */
static void notify_ready(const char *url)
{
        char state[512];
        int r;

        (void) snprintf(state, sizeof(state), "READY=1\nSTATUS=listening on %s", url);
        r = notify_send(state);
        if (r < 0)
                log_warn("msg=\"cannot tell the service manager that the daemon is ready "
                         "(NOTIFY_SOCKET '%s'): %s\"",
                         getenv("NOTIFY_SOCKET"), strerror(-r));
}

int cmd_serve(int argc, char **argv)
{
        _cleanup_free_ char *state_dir = NULL, *token = NULL, *metrics_token = NULL;
        struct serve_args a = { .listen = DEFAULT_LISTEN,
                                .metrics_top_sessions = 10,
                                .max_sessions = 64,
                                .pool_size = 2,
                                .stop_after_ms = 5 * 60 * 1000,
                                .delete_after_ms = 5ULL * 24 * 3600 * 1000,
                                .checkpoint_after_ms = 30 * 1000,
                                .max_stopped_bytes = 1ULL << 30 };
        struct airlock_error err = { { 0 } };
        struct chat_config chat = {};
        struct chat_gateway_config gateway = {};
        struct jail_features features;
        struct session_manager *mgr = NULL;
        struct openai *openai = NULL;
        struct e2b *e2b = NULL;
        struct tenant_registry *tenants = NULL;
        struct api_server *srv = NULL, *msrv = NULL;
        struct responses *responses = NULL;
        struct hub *hub = NULL;
        struct audit *audit = NULL;
        struct egress *egress = NULL;
        struct api_listen l;
        enum jail_isolation mode;
        const char *why = NULL, *env_token;
        sigset_t mask;
        rlim_t nofile_was;
        bool created = false;
        int r, sig = 0, status = EXIT_USAGE;

        serve_audit_defaults(&a.audit);
        if (parse_args(argc, argv, &a) < 0 || cli_hub_check("serve", a.mcp_config) < 0)
                return EXIT_USAGE;
        if (chat_config_resolve(a.llm_base_url, a.llm_model, a.llm_api_key, &chat) < 0)
                return EXIT_USAGE;
        gateway = (struct chat_gateway_config){
                .base_url = chat.base_url,
                .model = chat.model,
                .api_key = chat.api_key,
                .timeout_ms = a.llm_timeout_ms ? a.llm_timeout_ms : chat.timeout_ms,
                .max_rounds = a.chat_max_rounds ? a.chat_max_rounds : chat.max_rounds,
                .require_approval = a.chat_require_approval,
        };
        if (cli_isolation(a.isolation, &mode) < 0 || check_metrics_listen(&a) < 0)
                return EXIT_USAGE;
        if (serve_cluster_setup(a.node, a.peers) < 0)
                return EXIT_USAGE;
        if (api_listen_parse(a.listen, &l, &why) < 0) {
                fprintf(stderr, "airlock serve: --listen '%s': %s\n", a.listen, why);
                return EXIT_USAGE;
        }
        /* DESIGN.md section 3: without isolation the daemon would run anyone's code as
         * itself; only this machine may talk to it. */
        if (mode == JAIL_NONE && !api_listen_is_loopback(&l)) {
                fprintf(stderr,
                        "airlock serve: isolation 'none' runs code without a sandbox; it listens "
                        "on loopback (127.0.0.1, [::1], localhost) or a unix socket only, not "
                        "'%s'\n",
                        a.listen);
                return EXIT_USAGE;
        }

        if (a.state_dir) {
                state_dir = strdup(a.state_dir);
                if (!state_dir)
                        return EXIT_USAGE;
        } else if (api_state_dir_default(&state_dir) < 0) {
                fprintf(stderr, "airlock serve: no state directory: set --state-dir, "
                                "XDG_STATE_HOME or HOME\n");
                return EXIT_USAGE;
        }
        if (api_state_dir_make(state_dir, &err) < 0) {
                fprintf(stderr, "airlock serve: state directory: %s\n", err.msg);
                return EXIT_USAGE;
        }

        env_token = getenv("AIRLOCK_TOKEN");
        if (env_token && *env_token) {
                token = strdup(env_token);
                if (!token)
                        return EXIT_USAGE;
                if (strlen(token) < 16)
                        log_warn("AIRLOCK_TOKEN is shorter than 16 characters: easy to guess");
        } else {
                r = api_token_load_or_create(state_dir, &token, &created, &err);
                if (r < 0) {
                        fprintf(stderr, "airlock serve: %s\n", err.msg);
                        return EXIT_USAGE;
                }
                /* Under systemd (which sets INVOCATION_ID for every service) stderr goes to
                 * the journal, which more users may read than the 0600 token file. */
                if (created && getenv("INVOCATION_ID"))
                        fprintf(stderr,
                                "airlock: new API token written to %s/token (not printed: "
                                "this log goes to the journal)\n",
                                state_dir);
                else if (created)
                        fprintf(stderr, "airlock: new API token written to %s/token: %s\n",
                                state_dir, token);
        }
        if (load_metrics_token(&a, state_dir, &metrics_token) < 0)
                return EXIT_USAGE;

        /* Before anything can happen that the log should record. */
        if (serve_audit_open(&a.audit, state_dir, &audit) < 0)
                return EXIT_USAGE;

        r = cli_probe_mode("serve", mode, &features);
        print_probe(&features, mode);
        if (r < 0)
                goto out;
        probe_languages();
        nofile_was = raise_nofile();

        /* Blocked before any thread exists, so that every thread (MHD's, the manager's)
         * inherits the mask and sigwait() below is the only place these signals arrive. The
         * sandboxes reset their mask (jail/spawn.c). SIGPIPE: a client or runner that went
         * away is an EPIPE, not the daemon's death. */
        sigemptyset(&mask);
        sigaddset(&mask, SIGTERM);
        sigaddset(&mask, SIGINT);
        sigaddset(&mask, SIGHUP);
        (void) pthread_sigmask(SIG_BLOCK, &mask, NULL);
        (void) signal(SIGPIPE, SIG_IGN);

        /* After the mask: the servers' supervisor threads inherit it (the servers themselves
         * get a clean one). */
        if (cli_hub_start("serve", a.mcp_config, &hub) < 0)
                goto out;
        gateway.hub = hub;

        /* The egress proxy of profiles with network "allow" (docs/NETWORK.md). Its denylist
         * gets the daemon's own addresses once the servers are bound, below. */
        if (mode == JAIL_NAMESPACES) {
                r = egress_new(
                        &(struct egress_options){ .on_event = on_egress_event, .userdata = audit },
                        &egress, &err);
                if (r < 0) {
                        fprintf(stderr, "airlock serve: cannot start the egress proxy: %s\n",
                                err.msg);
                        goto out;
                }
        }

        r = session_manager_new(
                &(struct session_manager_config){ .features = &features,
                                                  .mode = mode,
                                                  .max_sessions = a.max_sessions,
                                                  .pool_size = a.pool_size,
                                                  .default_stop_after_ms = a.stop_after_ms,
                                                  .max_stop_after_ms = 24ULL * 3600 * 1000,
                                                  .delete_after_ms = a.delete_after_ms,
                                                  .checkpoint_after_ms = a.checkpoint_after_ms,
                                                  .max_stopped_bytes = a.max_stopped_bytes,
                                                  .max_session_memory = a.max_session_memory,
                                                  .daemon_cpu_weight = a.daemon_cpu_weight,
                                                  .fair_off = a.cpu_fairness_off,
                                                  .min_free_memory = a.min_free_memory,
                                                  .zygote_max_sessions = a.zygote_max_sessions,
                                                  .zygote_max_age_ms = a.zygote_max_age_ms,
                                                  .recent_executions = a.recent_executions,
                                                  .interrupt_grace_ms = 2000,
                                                  .state_dir = state_dir,
                                                  .hub = hub,
                                                  .audit = audit,
                                                  .egress = egress },
                &mgr, &err);
        if (r < 0) {
                fprintf(stderr, "airlock serve: cannot start sessions: %s\n", err.msg);
                goto out;
        }
        check_nofile(mgr, a.max_sessions, nofile_was);
        /* /v1/files and /v1/containers: uploads and their records under the state directory. */
        r = openai_new(&(struct openai_config){ .mgr = mgr,
                                                .state_dir = state_dir,
                                                .upload_max = a.max_upload },
                       &openai, &err);
        if (r < 0) {
                fprintf(stderr, "airlock serve: cannot open the file store: %s\n", err.msg);
                goto out;
        }
        /* The gateway's turns waiting for a client's tool results or approvals. */
        if (gateway.base_url && suspend_store_new(NULL, &gateway.suspended) < 0) {
                fprintf(stderr, "airlock serve: out of memory\n");
                goto out;
        }

        /* POST /v1/responses: its stored responses survive a restart in the state directory. */
        r = responses_new(
                &(struct responses_config){
                        .chat = &gateway, .mgr = mgr, .openai = openai, .state_dir = state_dir },
                &responses, &err);
        if (r < 0) {
                fprintf(stderr, "airlock serve: %s\n", err.msg);
                goto out;
        }

        /* /e2b: the E2B SDK's surface; its sandboxes' access tokens in the state directory. */
        r = e2b_new(state_dir, &e2b, &err);
        if (r < 0) {
                fprintf(stderr, "airlock serve: cannot open the E2B store: %s\n", err.msg);
                goto out;
        }

        /* Tenants' keys: `airlock tenants` may add them at any time, this daemon running or not. */
        r = tenant_registry_new(state_dir, &tenants, &err);
        if (r < 0) {
                fprintf(stderr, "airlock serve: cannot read the tenants: %s\n", err.msg);
                goto out;
        }

        /* A peer forwards with the Host it knows this node by (--peers): accepted here. */
        if (serve_cluster_self_addr() && a.n_allow_hosts < ALLOW_HOSTS_MAX)
                a.allow_hosts[a.n_allow_hosts++] = serve_cluster_self_addr();
        a.allow_hosts[a.n_allow_hosts] = NULL;
        r = api_server_new(
                &(struct api_config){ .listen = a.listen,
                                      .token = token,
                                      .allow_hosts = a.allow_hosts,
                                      .mgr = mgr,
                                      .chat = &gateway,
                                      .openai = openai,
                                      .responses = responses,
                                      .hub = hub,
                                      .e2b = e2b,
                                      .metrics_token = metrics_token,
                                      .metrics_top_sessions = a.metrics_top_sessions,
                                      .tenants = tenants,
                                      .audit = audit,
                                      .mode = mode,
                                      .max_connections = a.max_connections,
                                      .max_connections_per_client = a.max_connections_per_client,
                                      .request_timeout_ms = a.request_timeout_ms,
                                      .keepalive_timeout_ms = a.keepalive_timeout_ms,
                                      .trusted_proxies = a.trusted,
                                      .n_trusted_proxies = a.n_trusted },
                &srv, &err);
        if (r < 0) {
                fprintf(stderr, "airlock serve: %s\n", err.msg);
                goto out;
        }
        fprintf(stderr, "airlock: listening on %s\n", api_server_url(srv));
        if (a.metrics_listen) {
                r = api_server_new(
                        &(struct api_config){ .listen = a.metrics_listen,
                                              .allow_hosts = a.allow_hosts,
                                              .mgr = mgr,
                                              .mode = mode,
                                              .metrics_only = true,
                                              .metrics_top_sessions = a.metrics_top_sessions,
                                              .max_connections = 64,
                                              .max_connections_per_client = 16,
                                              .request_timeout_ms = a.request_timeout_ms },
                        &msrv, &err);
                if (r < 0) {
                        fprintf(stderr, "airlock serve: --metrics-listen: %s\n", err.msg);
                        goto out;
                }
                fprintf(stderr, "airlock: GET /metrics without a token on %s\n",
                        api_server_url(msrv));
        }
        if (egress && set_egress_denylist(egress, srv, msrv) < 0) {
                fprintf(stderr, "airlock serve: out of memory\n");
                goto out;
        }
        notify_ready(api_server_url(srv));
        if (gateway.base_url)
                fprintf(stderr,
                        "airlock: chat gateway at /v1/chat/completions and /v1/responses -> %s "
                        "(model %s, %u rounds%s)\n",
                        gateway.base_url, gateway.model ? gateway.model : "from the request",
                        gateway.max_rounds,
                        gateway.require_approval ? ", code needs approval" : "");
        fflush(stderr);

        for (;;) {
                if (sigwait(&mask, &sig) != 0)
                        continue;
                if (sig == SIGHUP) {
                        log_info("SIGHUP: reopening the audit log");
                        (void) audit_reopen(audit);
                        continue;
                }
                break;
        }
        fprintf(stderr, "airlock: %s received, shutting down\n",
                sig == SIGINT ? "SIGINT" : "SIGTERM");
        (void) notify_send("STOPPING=1\nSTATUS=stopping every session");
        /* A node of a cluster drains while it still answers: /readyz says so and creates are
         * 503, so that the front door sends them elsewhere while its sessions are saved. */
        if (node_self()) {
                json_t *stopped = NULL, *failed = NULL;

                /* Running cells are interrupted, as the shutdown below would: their sessions
                 * are saved too, and none is reported as failed for being busy. */
                if (session_manager_drain(mgr, true, &stopped, &failed) >= 0) {
                        json_decref(stopped);
                        json_decref(failed);
                }
        }

        api_server_quiesce(msrv);
        api_server_quiesce(srv);
        session_manager_shutdown(mgr);
        /* Cells stop within the interrupt grace period once their sessions are gone; let their
         * replies reach the clients before the connections are closed. */
        if (api_server_drain(srv, 5000) < 0)
                log_warn("requests still running after 5 s; closing their connections");
        srv = api_server_free(srv);
        msrv = api_server_free(msrv);
        status = 0;
out:
        api_server_free(srv);
        api_server_free(msrv);
        responses_free(responses);
        tenant_registry_free(tenants);
        e2b_free(e2b);
        openai_free(openai);
        session_manager_free(mgr);
        egress_free(egress); /* after the sessions: their sandboxes close their proxies */
        hub_free(hub);
        suspend_store_free(gateway.suspended);
        jail_features_done(&features);
        chat_config_done(&chat);
        audit_free(audit);
        if (token)
                explicit_bzero(token, strlen(token));
        if (metrics_token)
                explicit_bzero(metrics_token, strlen(metrics_token));
        if (status == 0)
                fprintf(stderr, "airlock: stopped\n");
        return status;
}
