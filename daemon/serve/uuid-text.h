/* SPDX-License-Identifier: MIT */
/*
 * A UUID's text form, 8-4-4-4-12 hex digits (RFC 9562 section 4), for
 * snowidd's HTTP API, the command and the tests.  libsnowid hands out the 16
 * bytes and nothing else: a caller storing them in a uuid column wants bytes,
 * and text is a few lines on any side.
 */
#pragma once

#include <errno.h>
#include <stdint.h>
#include <string.h>

#define UUID_TEXT_LEN 36

/* Writes 36 lowercase characters and a NUL; returns the NUL's address. */
static inline char *uuid_to_text(const uint8_t u[16], char out[UUID_TEXT_LEN + 1])
{
        static const char hex[] = "0123456789abcdef";
        char *p = out;
        for (int i = 0; i < 16; i++) {
                if (i == 4 || i == 6 || i == 8 || i == 10)
                        *p++ = '-';
                *p++ = hex[u[i] >> 4];
                *p++ = hex[u[i] & 15];
        }
        *p = 0;
        return p;
}

static inline int uuid_hex_digit(char c)
{
        if (c >= '0' && c <= '9')
                return c - '0';
        if (c >= 'a' && c <= 'f')
                return c - 'a' + 10;
        if (c >= 'A' && c <= 'F')
                return c - 'A' + 10;
        return -1;
}

/* Exactly 8-4-4-4-12 hex digits (either case) in len bytes; -EINVAL for
 * anything else; ret untouched on failure. */
static inline int uuid_from_text(const char *s, size_t len, uint8_t ret[16])
{
        uint8_t u[16];
        size_t k = 0;

        if (len != UUID_TEXT_LEN)
                return -EINVAL;
        for (int i = 0; i < 16; i++) {
                if (i == 4 || i == 6 || i == 8 || i == 10) {
                        if (s[k++] != '-')
                                return -EINVAL;
                }
                int a = uuid_hex_digit(s[k]), b = uuid_hex_digit(s[k + 1]);
                if (a < 0 || b < 0)
                        return -EINVAL;
                u[i] = (uint8_t)(a << 4 | b);
                k += 2;
        }
        memcpy(ret, u, sizeof(u));
        return 0;
}

/* Whether s looks like a UUID rather than a decimal ID: a dash where the
 * first one goes.  Tells a caller which parser's error to report. */
static inline int uuid_text_like(const char *s, size_t len)
{
        return len > 8 && s[8] == '-';
}
