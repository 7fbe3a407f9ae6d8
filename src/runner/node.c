/* The javascript and typescript languages: one Node REPL per session, started with the first
 * javascript or typescript cell (a session that never runs JavaScript never pays for Node), in the
 * same sandbox as Python and bash, as a child REPL of the runner (repl.c). The REPL is
 * airlock_node.js, compiled into this binary and given to `node -e`. A busy loop after an await,
 * where Node cannot be interrupted, gets the REPL killed, and only its JavaScript variables are
 * lost. */
#include "runner.h"

#include "base/cleanup.h"
#include "base/util.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "node-js.h"

#define NODE_PATH "/usr/bin/node"

extern char **environ;

static size_t output_max = 1024 * 1024;
static uint64_t memory_bytes;

void node_configure(size_t max_output, uint64_t max_memory)
{
        output_max = max_output;
        memory_bytes = max_memory;
}

static int node_check(void)
{
        return access(NODE_PATH, X_OK) < 0 ? -ENOENT : 0;
}

_Noreturn static void node_child(void *arg)
{
        /* V8's heap may grow as far as the sandbox's memory: the cgroup's OOM kill, not V8's
         * own abort, ends a runaway allocation, as it does in Python. */
        char heap[64], outmax[64];
        char *argv[6] = { "node", "--expose-internals" };
        size_t argc = 2;

        (void) arg;
        if (memory_bytes > 0) {
                (void) snprintf(heap, sizeof(heap), "--max-old-space-size=%llu",
                                (unsigned long long) (memory_bytes >> 20) + 1);
                argv[argc++] = heap;
        }
        argv[argc++] = "-e";
        argv[argc++] = (char *) node_js_source;
        (void) snprintf(outmax, sizeof(outmax), "AIRLOCK_NODE_OUTPUT_MAX=%zu", output_max);
        if (putenv(outmax) < 0)
                _exit(127);
        execve(NODE_PATH, argv, environ);
        _exit(127);
}

static const struct repl_kind node_kind = {
        .program = "node",
        .language = "javascript",
        .vars = "JavaScript",
        .missing = "javascript needs Node.js (" NODE_PATH "), which is not installed in this "
                   "profile's root filesystem",
        .stop_hint = " (a busy loop after an await cannot be interrupted)",
        .check = node_check,
        .child = node_child,
};

static struct repl node = REPL_INIT(&node_kind);

bool node_has_state(void)
{
        return repl_is_running(&node);
}

json_t *node_run(const char *code, json_t *req)
{
        /* Every string of the answer is cut at output_max characters by the REPL; JSON may
         * spell a character in up to 12 bytes. */
        return repl_run(&node, NULL, code, req, 12 * 3 * output_max + 65536);
}
