/* Scope-bound cleanup helpers: a guarded local is released when it goes out of scope, so every
 * early return is correct. Ownership leaves a guarded local only through TAKE_PTR()/TAKE_FD(). */
#pragma once

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#define _cleanup_(f) __attribute__((cleanup(f)))

static inline void freep(void *p)
{
        free(*(void **) p);
}

static inline void closep(int *fd)
{
        if (*fd >= 0) {
                int saved = errno;
                (void) close(*fd);
                errno = saved;
        }
}

static inline void fclosep(FILE **f)
{
        if (*f)
                (void) fclose(*f);
}

/* Frees a NULL-terminated vector of strings and the vector itself. */
static inline void strv_free(char **v)
{
        if (!v)
                return;
        for (char **p = v; *p; p++)
                free(*p);
        free(v);
}

static inline void strv_freep(char ***v)
{
        strv_free(*v);
}

#define _cleanup_free_ _cleanup_(freep)
#define _cleanup_close_ _cleanup_(closep)
#define _cleanup_fclose_ _cleanup_(fclosep)
#define _cleanup_strv_free_ _cleanup_(strv_freep)

#define TAKE_PTR(p)                                                                                \
        ({                                                                                         \
                typeof(p) _ptr_ = (p);                                                             \
                (p) = NULL;                                                                        \
                _ptr_;                                                                             \
        })

#define TAKE_FD(fd)                                                                                \
        ({                                                                                         \
                int _fd_ = (fd);                                                                   \
                (fd) = -EBADF;                                                                     \
                _fd_;                                                                              \
        })

#define ELEMENTSOF(a) (sizeof(a) / sizeof((a)[0]))

/* Closes fd if valid and returns -EBADF, for `fd = safe_close_fd(fd);`. */
static inline int safe_close_fd(int fd)
{
        if (fd >= 0) {
                int saved = errno;
                (void) close(fd);
                errno = saved;
        }
        return -EBADF;
}
