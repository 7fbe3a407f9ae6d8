/* Parsing --listen (see listen.h). Kept apart from the server so that the loopback rule of
 * isolation "none" is a pure, tested function. */
#include "listen.h"

#include <arpa/inet.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

int api_listen_parse(const char *spec, struct api_listen *ret, const char **ret_why)
{
        struct api_listen out = { 0 };
        const char *colon, *host, *port_s;
        size_t host_len;
        char *end;
        unsigned long port;

        if (strncmp(spec, "unix:", 5) == 0) {
                const char *path = spec + 5;
                if (path[0] != '/') {
                        *ret_why = "a unix socket path must be absolute (unix:/run/airlock.sock)";
                        return -EINVAL;
                }
                if (strlen(path) >= sizeof(out.path)) {
                        *ret_why = "the unix socket path is longer than 107 bytes";
                        return -EINVAL;
                }
                out.is_unix = true;
                strcpy(out.path, path);
                *ret = out;
                return 0;
        }

        if (spec[0] == '[') {
                const char *close = strchr(spec, ']');
                if (!close || close[1] != ':') {
                        *ret_why = "expected [IPV6]:PORT";
                        return -EINVAL;
                }
                host = spec + 1;
                host_len = (size_t) (close - host);
                port_s = close + 2;
        } else {
                colon = strrchr(spec, ':');
                if (!colon) {
                        *ret_why = "expected HOST:PORT (e.g. 127.0.0.1:8080) or unix:/PATH";
                        return -EINVAL;
                }
                if (memchr(spec, ':', (size_t) (colon - spec))) {
                        *ret_why = "write an IPv6 address in brackets: [::1]:8080";
                        return -EINVAL;
                }
                host = spec;
                host_len = (size_t) (colon - spec);
                port_s = colon + 1;
        }
        if (host_len == 0 || host_len >= sizeof(out.host)) {
                *ret_why = "the host is empty or too long (use 0.0.0.0 for every address)";
                return -EINVAL;
        }
        errno = 0;
        port = strtoul(port_s, &end, 10);
        if (!*port_s || *end || errno || port > 65535 || port_s[0] == '-' || port_s[0] == '+') {
                *ret_why = "the port must be a number from 0 to 65535";
                return -EINVAL;
        }
        memcpy(out.host, host, host_len);
        out.host[host_len] = '\0';
        out.port = (unsigned) port;
        *ret = out;
        return 0;
}

bool api_listen_is_loopback(const struct api_listen *l)
{
        struct in_addr a4;
        struct in6_addr a6;

        if (l->is_unix)
                return true;
        if (strcasecmp(l->host, "localhost") == 0)
                return true;
        if (inet_pton(AF_INET, l->host, &a4) == 1)
                return (ntohl(a4.s_addr) >> 24) == 127;
        if (inet_pton(AF_INET6, l->host, &a6) == 1) {
                if (IN6_IS_ADDR_LOOPBACK(&a6))
                        return true;
                return IN6_IS_ADDR_V4MAPPED(&a6) && a6.s6_addr[12] == 127;
        }
        return false;
}
