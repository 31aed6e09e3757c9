/* SPDX-License-Identifier: MIT */
/*
 * Scope-bound cleanup (the cleanup attribute of GCC and clang): a variable
 * declared _cleanup_(f) gets f(&variable) however its block is left, so a
 * function with several exits frees what it holds in one place.  take_fd()
 * and take_ptr() hand a resource on, leaving the variable empty (nothing to
 * free).  For the paths that hold a resource across several exits, not for
 * every variable.
 */
#pragma once

#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <unistd.h>

#define _cleanup_(f) __attribute__((cleanup(f)))

/* Closes *fd unless it is negative; errno is kept, for a "return -errno"
 * that runs first. */
static inline void closep(int *fd)
{
        if (*fd >= 0) {
                int saved = errno;
                close(*fd);
                errno = saved;
        }
}

/* free(*p), for a variable of any pointer type. */
static inline void freep(void *p)
{
        free(*(void **)p);
}

/* FUNCp(TYPE **p): FUNC(*p) unless *p is NULL, for _cleanup_(FUNCp). */
#define DEFINE_POINTER_CLEANUP(type, func)                                                         \
        static inline void func##p(type **p)                                                       \
        {                                                                                          \
                if (*p)                                                                            \
                        func(*p);                                                                  \
        }

static inline int take_fd(int *fd)
{
        int r = *fd;
        *fd = -1;
        return r;
}

static inline void *take_ptr(void *p)
{
        void *r = *(void **)p;
        *(void **)p = NULL;
        return r;
}
