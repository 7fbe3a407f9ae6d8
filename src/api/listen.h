/* The --listen address: "HOST:PORT" ("[::1]:8080" for IPv6) or "unix:/absolute/path". Pure
 * parsing; the server binds it. */
#pragma once

#include <stdbool.h>
#include <sys/un.h>

struct api_listen {
        bool is_unix;
        char path[sizeof(((struct sockaddr_un *) 0)->sun_path)]; /* unix socket path */
        char host[256];                                          /* without brackets */
        unsigned port;                                           /* 0 = any free port */
};

/* Parses spec. Returns 0, or -EINVAL with a reason in *ret_why (static string). */
int api_listen_parse(const char *spec, struct api_listen *ret, const char **ret_why);

/* True for a unix socket and for loopback hosts (127.0.0.0/8, ::1, "localhost"). */
bool api_listen_is_loopback(const struct api_listen *l);
