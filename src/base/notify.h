/* The service manager's readiness protocol (sd_notify(3)) without libsystemd: one datagram of
 * "KEY=VALUE\n" lines to the unix socket named by $NOTIFY_SOCKET, as systemd's Type=notify
 * expects. Outside systemd (no $NOTIFY_SOCKET) it does nothing. */
#pragma once

/* Sends state (e.g. "READY=1\nSTATUS=listening on ...") to $NOTIFY_SOCKET: a path, or an
 * abstract socket written "@name". Returns 1 when sent, 0 when $NOTIFY_SOCKET is unset or
 * empty, -EINVAL when it names no unix socket address (relative, or too long), or -errno. */
int notify_send(const char *state);
