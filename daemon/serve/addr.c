/* SPDX-License-Identifier: MIT */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdint.h>
#include <string.h>

#include "addr.h"

/* A port: decimal digits only, 1 to 65535. */
static int parse_port(const char *s, uint16_t *ret)
{
        unsigned v = 0;
        if (!*s)
                return -EINVAL;
        for (; *s; s++) {
                if (*s < '0' || *s > '9')
                        return -EINVAL;
                v = v * 10 + (unsigned)(*s - '0');
                if (v > 65535)
                        return -EINVAL;
        }
        if (v == 0)
                return -EINVAL;
        *ret = (uint16_t)v;
        return 0;
}

int addr_parse_listen(const char *spec, void *ret, unsigned *ret_len)
{
        char host[128];
        const char *colon = strrchr(spec, ':');
        uint16_t port;
        if (!colon || (size_t)(colon - spec) >= sizeof(host) || parse_port(colon + 1, &port) < 0)
                return -EINVAL;
        memcpy(host, spec, (size_t)(colon - spec));
        host[colon - spec] = 0;
        if (host[0] == '[') {
                size_t n = strlen(host);
                if (n < 3 || host[n - 1] != ']')
                        return -EINVAL;
                host[n - 1] = 0;
                struct sockaddr_in6 *a = ret;
                memset(a, 0, sizeof(*a));
                a->sin6_family = AF_INET6;
                a->sin6_port = htons(port);
                if (inet_pton(AF_INET6, host + 1, &a->sin6_addr) != 1)
                        return -EINVAL;
                *ret_len = sizeof(*a);
                return 0;
        }
        struct sockaddr_in *a = ret;
        memset(a, 0, sizeof(*a));
        a->sin_family = AF_INET;
        a->sin_port = htons(port);
        if (inet_pton(AF_INET, host, &a->sin_addr) != 1)
                return -EINVAL;
        *ret_len = sizeof(*a);
        return 0;
}
