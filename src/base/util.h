/* Small leaf helpers: full reads and writes, reading small files, parsing sizes and durations. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* Writes all len bytes, retrying on EINTR and short writes. Returns 0 or -errno. */
int write_full(int fd, const void *buf, size_t len);

/* Reads exactly len bytes. Returns 0, -EPIPE on EOF before len bytes, or -errno. */
int read_full(int fd, void *buf, size_t len);

/* Reads at most max-1 bytes of the file at dirfd/path into buf and NUL-terminates it.
 * Returns the number of bytes read or -errno. */
ssize_t read_small_file_at(int dirfd, const char *path, char *buf, size_t max);
/* The same for an open fd, read from offset 0 whatever its position (a cgroup or proc file
 * read this way again is generated anew). Returns the length or -errno. */
ssize_t pread_small(int fd, char *buf, size_t max);

/* Writes value to the existing file at dirfd/path (no O_CREAT). Returns 0 or -errno. */
int write_file_at(int dirfd, const char *path, const char *value);

/* Parses a byte size: a plain number of bytes, or a number with a unit: K/KiB, M/MiB, G/GiB,
 * T/TiB (powers of 1024) or KB, MB, GB, TB (powers of 1000), case-insensitive, with an optional
 * space. Returns 0, -EINVAL on malformed input, -ERANGE on overflow. */
int parse_size(const char *s, uint64_t *ret_bytes);

/* Parses a duration in seconds, with an optional fraction and an optional unit suffix "s",
 * "ms" or "m". Returns 0, -EINVAL on malformed or negative input, -ERANGE when too large. */
int parse_duration_ms(const char *s, uint64_t *ret_ms);

/* Fills buf with len bytes of getrandom(2) (flags: 0 or GRND_NONBLOCK), retrying on EINTR and
 * short reads. Returns 0 or -errno (no weak fallback: callers make keys and ids with it). */
int random_bytes(void *buf, size_t len, unsigned flags);

/* Writes 2 * n random lowercase hex digits (n bytes of random_bytes()) and a NUL to buf, which
 * must hold 2 * n + 1 bytes. Returns 0 or -errno. */
int random_hex(char *buf, size_t n);

/* Monotonic clock in nanoseconds. */
uint64_t now_ns(void);

/* Whether this process could open n more file descriptors now: opens them (an eventfd and
 * n - 1 duplicates) and closes them again. Returns 0, -EMFILE (or -ENFILE) when it could not,
 * or -errno. */
int fd_room(unsigned n);

/* Returns true when fd refers to a terminal. */
bool fd_is_tty(int fd);

/* A copy of the NULL-terminated string vector v (caller frees with strv_free), or NULL when
 * out of memory. */
char **strv_copy(char *const *v);
