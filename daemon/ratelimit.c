/* SPDX-License-Identifier: MIT */
#include <ctype.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ratelimit.h"

#define NS_PER_S INT64_C(1000000000)

static int64_t interval_ns(struct rate r)
{
        return r.per_s ? NS_PER_S / r.per_s : 0;
}

/* GCRA: the bucket is a time, tat, at which it is full again.  Taking n
 * pushes tat n intervals later; it may run at most a burst (one second)
 * ahead of now.  Relaxed: the word guards nothing but itself, and the CAS
 * orders every charge of one bucket. */
int bucket_take(struct bucket *b, struct rate r, uint64_t n, int64_t now, int64_t *ret_wait)
{
        int64_t iv = interval_ns(r);
        if (!iv)
                return 0;
        int64_t cost = n > (uint64_t)(INT64_MAX / 4 / iv) ? INT64_MAX / 4 : (int64_t)n * iv;
        int64_t cur = atomic_load_explicit(&b->tat, memory_order_relaxed);
        for (;;) {
                int64_t base = cur > now ? cur : now;
                if (base > now && base + cost - now > NS_PER_S) {
                        /* owed: wait until it fits, or (larger than a
                         * burst) until the bucket is full */
                        *ret_wait = cost > NS_PER_S ? base - now : base + cost - now - NS_PER_S;
                        return -1;
                }
                if (atomic_compare_exchange_weak_explicit(
                            &b->tat, &cur, base + cost, memory_order_relaxed, memory_order_relaxed))
                        return 0;
        }
}

void bucket_refund(struct bucket *b, struct rate r, uint64_t n)
{
        int64_t iv = interval_ns(r);
        if (iv)
                atomic_fetch_sub_explicit(&b->tat, (int64_t)n * iv, memory_order_relaxed);
}

static int name_ok(const char *s)
{
        size_t n = strlen(s);
        if (!n || n > LIMIT_NAME_MAX)
                return 0;
        for (size_t i = 0; i < n; i++)
                if (!isalnum((unsigned char)s[i]) && s[i] != '_' && s[i] != '-' && s[i] != '.')
                        return 0;
        return 1;
}

static int parse_rate(const char *v, struct rate *ret)
{
        char *end;
        if (!isdigit((unsigned char)*v))
                return -EINVAL;
        errno = 0;
        unsigned long long x = strtoull(v, &end, 10);
        if (errno || *end || x > LIMIT_RATE_MAX)
                return -EINVAL;
        ret->per_s = (uint32_t)x;
        return 0;
}

void tokens_free(struct token *t, unsigned n)
{
        if (!t)
                return;
        for (unsigned i = 0; i < n; i++)
                if (t[i].secret) {
                        explicit_bzero(t[i].secret, strlen(t[i].secret));
                        free(t[i].secret);
                }
        free(t);
}

static int parse_line(char *line, struct token *t, struct rate def_ids, struct rate def_requests,
                      char *err, size_t errlen)
{
        char *field[5], *save = NULL;
        unsigned n = 0;
        for (char *f = strtok_r(line, " \t", &save); f; f = strtok_r(NULL, " \t", &save)) {
                if (n == 5) {
                        snprintf(err, errlen, "more than NAME SECRET ids=N requests=N");
                        return -EINVAL;
                }
                field[n++] = f;
        }
        const char *name = n == 1 ? "default" : field[0], *secret = n == 1 ? field[0] : field[1];
        if (!name_ok(name)) {
                snprintf(err, errlen, "a name is 1 to 64 of A-Z a-z 0-9 _ - .");
                return -EINVAL;
        }
        snprintf(t->name, sizeof(t->name), "%s", name);
        t->ids = def_ids;
        t->requests = def_requests;
        for (unsigned i = 2; i < n; i++) {
                struct rate *r = !strncmp(field[i], "ids=", 4)        ? &t->ids
                                 : !strncmp(field[i], "requests=", 9) ? &t->requests
                                                                      : NULL;
                if (!r || parse_rate(strchr(field[i], '=') + 1, r) < 0) {
                        snprintf(err, errlen, "'%.40s': ids=N or requests=N, N per second, 0 to %u",
                                 field[i], LIMIT_RATE_MAX);
                        return -EINVAL;
                }
        }
        t->secret = strdup(secret);
        if (!t->secret) {
                snprintf(err, errlen, "out of memory");
                return -ENOMEM;
        }
        return 0;
}

int tokens_load(const char *path, struct rate def_ids, struct rate def_requests, struct token **ret,
                unsigned *ret_n, char *err, size_t errlen)
{
        FILE *f = fopen(path, "re");
        if (!f) {
                snprintf(err, errlen, "cannot read http-token-file %s: %s", path, strerror(errno));
                return -EINVAL;
        }
        struct token *t = calloc(LIMIT_TOKENS_MAX, sizeof(*t));
        char line[1024], why[160];
        unsigned n = 0, lineno = 0;
        int r = t ? 0 : -ENOMEM;
        while (r == 0 && fgets(line, sizeof(line), f)) {
                lineno++;
                if (!strchr(line, '\n') && !feof(f)) {
                        snprintf(why, sizeof(why), "line too long");
                        r = -EINVAL;
                        break;
                }
                line[strcspn(line, "\r\n")] = 0;
                char *p = line + strspn(line, " \t");
                if (!*p || *p == '#')
                        continue;
                if (n == LIMIT_TOKENS_MAX) {
                        snprintf(why, sizeof(why), "more than %d tokens", LIMIT_TOKENS_MAX);
                        r = -EINVAL;
                        break;
                }
                r = parse_line(p, &t[n], def_ids, def_requests, why, sizeof(why));
                if (r < 0)
                        break;
                for (unsigned i = 0; i < n; i++)
                        if (!strcmp(t[i].name, t[n].name) || !strcmp(t[i].secret, t[n].secret)) {
                                snprintf(why, sizeof(why),
                                         "token '%s' given twice (its name or its "
                                         "secret)",
                                         t[n].name);
                                r = -EINVAL;
                        }
                n++;
        }
        if (r == 0 && ferror(f)) {
                snprintf(why, sizeof(why), "read error");
                r = -EINVAL;
        }
        explicit_bzero(line, sizeof(line));
        fclose(f);
        if (r == 0 && n == 0) {
                snprintf(err, errlen, "http-token-file %s has no token", path);
                r = -EINVAL;
        } else if (r == -ENOMEM && !t)
                snprintf(err, errlen, "out of memory");
        else if (r < 0)
                snprintf(err, errlen, "http-token-file %s:%u: %s", path, lineno, why);
        if (r < 0) {
                tokens_free(t, n);
                return r;
        }
        *ret = t;
        *ret_n = n;
        return 0;
}

/* Constant time in the length of the secret. */
static int secret_eq(const char *given, const char *want)
{
        size_t n = strlen(want), g = strnlen(given, n + 1);
        unsigned char d = g != n;
        for (size_t i = 0; i < n; i++)
                d |= (unsigned char)(want[i] ^ (i < g ? given[i] : 0));
        return d == 0;
}

struct token *tokens_find(struct token *t, unsigned n, const char *given)
{
        struct token *found = NULL;
        /* every secret compared, so the time says nothing of which matched */
        for (unsigned i = 0; i < n; i++)
                if (secret_eq(given, t[i].secret) && !found)
                        found = &t[i];
        return found;
}

static uint64_t mix(uint64_t x)
{
        x ^= x >> 33;
        x *= UINT64_C(0xff51afd7ed558ccd);
        x ^= x >> 33;
        return x;
}

uint64_t addr_key(const struct sockaddr *sa)
{
        uint64_t k = 0;
        if (sa->sa_family == AF_INET) {
                const struct sockaddr_in *a = (const void *)sa;
                memcpy(&k, &a->sin_addr, 4);
                return k | UINT64_C(4) << 56;
        }
        if (sa->sa_family == AF_INET6) {
                const struct sockaddr_in6 *a = (const void *)sa;
                if (IN6_IS_ADDR_V4MAPPED(&a->sin6_addr)) {
                        memcpy(&k, a->sin6_addr.s6_addr + 12, 4);
                        return k | UINT64_C(4) << 56;
                }
                /* the /64, hashed into 56 bits under its own tag: never
                 * equal to an IPv4 key */
                memcpy(&k, a->sin6_addr.s6_addr, 8);
                return (mix(k) & ~(UINT64_C(0xff) << 56)) | UINT64_C(6) << 56;
        }
        return 1;
}

static int slot_idle(struct addr_slot *s, int64_t now)
{
        return atomic_load_explicit(&s->ids.tat, memory_order_relaxed) <= now &&
               atomic_load_explicit(&s->requests.tat, memory_order_relaxed) <= now;
}

/* Relaxed throughout: a slot taken over under a race may charge one request
 * to the wrong address; it never blocks, and never lets a bucket go below
 * full. */
struct addr_slot *addr_slot_get(struct addr_table *t, uint64_t key, int64_t now)
{
        uint64_t h = mix(key);
        for (unsigned i = 0; i < LIMIT_ADDR_PROBES; i++) {
                struct addr_slot *s = &t->slot[(h + i) & (LIMIT_ADDR_SLOTS - 1)];
                uint64_t k = atomic_load_explicit(&s->key, memory_order_relaxed);
                if (k == key)
                        return s;
        }
        for (unsigned i = 0; i < LIMIT_ADDR_PROBES; i++) {
                struct addr_slot *s = &t->slot[(h + i) & (LIMIT_ADDR_SLOTS - 1)];
                uint64_t k = atomic_load_explicit(&s->key, memory_order_relaxed);
                if ((k == 0 || slot_idle(s, now)) &&
                    atomic_compare_exchange_strong_explicit(&s->key, &k, key, memory_order_relaxed,
                                                            memory_order_relaxed))
                        return s;
                if (k == key)
                        return s;
        }
        return &t->slot[LIMIT_ADDR_SLOTS];
}
