/* run_shell: one command in the session's persistent bash, in the same sandbox and /work as
 * run_python. */
#include "tools-internal.h"

static int run_shell(struct toolbox *tb, json_t *args, struct tool_result *res)
{
        return tools_run_code(tb, "bash", json_string_value(json_object_get(args, "command")),
                              tools_timeout_ms(args), res);
}

const struct tool tool_run_shell = {
        .name = "run_shell",
        .title = "Run shell command",
        .description =
                "Run a bash command in the same sandbox as run_python (same /work directory and "
                "files). The shell persists between calls: the working directory, exported "
                "variables and functions stay. Returns stdout, stderr and the exit code. There "
                "is no network access and no root; it cannot install packages from the internet.",
        .input_schema = "{\"type\": \"object\","
                        " \"properties\": {"
                        "  \"command\": {\"type\": \"string\", \"minLength\": 1,"
                        "   \"description\": \"The bash command or script to run.\"},"
                        "  \"timeout_s\": {\"type\": \"number\", \"exclusiveMinimum\": 0,"
                        " \"maximum\": 3600,"
                        "   \"description\": \"Wall-clock limit in seconds (default: the "
                        "sandbox profile's). The command gets SIGINT when it runs longer.\"}},"
                        " \"required\": [\"command\"], \"additionalProperties\": false}",
        .annotations = { .read_only = false,
                         .destructive = true,
                         .idempotent = false,
                         .open_world = false },
        .needs_session = true,
        .runs_code = true,
        .handler = run_shell,
};
