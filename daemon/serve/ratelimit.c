/* SPDX-License-Identifier: MIT */
#include <ctype.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

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
        int64_t cur = READ_ONCE(b->tat);
        for (;;) {
                int64_t base = cur > now ? cur : now;
                if (base > now && base + cost - now > NS_PER_S) {
                        /* owed: wait until it fits, or (larger than a
                         * burst) until the bucket is full */
                        *ret_wait = cost > NS_PER_S ? base - now : base + cost - now - NS_PER_S;
                        return -1;
                }
                if (cas_weak_relaxed(b->tat, &cur, base + cost))
                        return 0;
        }
}

void bucket_refund(struct bucket *b, struct rate r, uint64_t n)
{
        int64_t iv = interval_ns(r);
        if (iv)
                fetch_sub_relaxed(b->tat, (int64_t)n * iv);
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

#define ROTL(x, b) (((x) << (b)) | ((x) >> (64 - (b))))

static void sip_round(uint64_t v[4])
{
        v[0] += v[1], v[1] = ROTL(v[1], 13), v[1] ^= v[0], v[0] = ROTL(v[0], 32);
        v[2] += v[3], v[3] = ROTL(v[3], 16), v[3] ^= v[2];
        v[0] += v[3], v[3] = ROTL(v[3], 21), v[3] ^= v[0];
        v[2] += v[1], v[1] = ROTL(v[1], 17), v[1] ^= v[2], v[2] = ROTL(v[2], 32);
}

uint64_t addr_hash(const struct addr_hash *h, uint64_t x)
{
        uint64_t v[4] = {h->k0 ^ UINT64_C(0x736f6d6570736575), h->k1 ^ UINT64_C(0x646f72616e646f6d),
                         h->k0 ^ UINT64_C(0x6c7967656e657261),
                         h->k1 ^ UINT64_C(0x7465646279746573)};
        /* the message block, then the final one: its length, 8, in the top byte */
        uint64_t m[2] = {x, UINT64_C(8) << 56};
        for (int i = 0; i < 2; i++) {
                v[3] ^= m[i];
                sip_round(v);
                sip_round(v);
                v[0] ^= m[i];
        }
        v[2] ^= 0xff;
        for (int i = 0; i < 4; i++)
                sip_round(v);
        return v[0] ^ v[1] ^ v[2] ^ v[3];
}

int addr_hash_init(struct addr_hash *h)
{
        uint64_t k[2];
        ssize_t n = getrandom(k, sizeof(k), 0);
        if (n != (ssize_t)sizeof(k))
                return n < 0 ? -errno : -EIO;
        h->k0 = k[0];
        h->k1 = k[1];
        return 0;
}

int addr_table_init(struct addr_table *t)
{
        return addr_hash_init(&t->hash);
}

static int64_t load(_Atomic int64_t *w)
{
        return READ_ONCE(*w);
}

static int64_t owed_until(struct addr_slot *s)
{
        int64_t a = load(&s->ids.tat), b = load(&s->requests.tat);
        return a > b ? a : b;
}

static struct addr_slot *shared_of(struct addr_table *t, uint64_t h)
{
        return &t->shared[(h >> 40) & (LIMIT_ADDR_SHARED - 1)];
}

static void raise_to(struct bucket *b, int64_t tat)
{
        int64_t cur = load(&b->tat);
        while (cur < tat && !cas_weak_relaxed(b->tat, &cur, tat))
                ;
}

/* s, just taken from old (0: free) for the key of hash h: what old owes goes
 * to its shared slot, and s starts owing what the newcomer's shared slot
 * owes */
static void hand_over(struct addr_table *t, struct addr_slot *s, uint64_t old, uint64_t h,
                      int64_t now)
{
        if (old && owed_until(s) > now) {
                struct addr_slot *o = shared_of(t, addr_hash(&t->hash, old));
                raise_to(&o->ids, load(&s->ids.tat));
                raise_to(&o->requests, load(&s->requests.tat));
        }
        /* at least now: full, and held from now on */
        struct addr_slot *mine = shared_of(t, h);
        int64_t ids = load(&mine->ids.tat), requests = load(&mine->requests.tat);
        WRITE_ONCE(s->ids.tat, ids > now ? ids : now);
        WRITE_ONCE(s->requests.tat, requests > now ? requests : now);
        WRITE_ONCE(s->refused, 0);
}

/* How readily a held slot is given up: 3 free, 2 its address went quiet, 1
 * its address floods, 0 kept; among equals, the quiet one quiet longest, the
 * flooding one owing most. */
struct pick {
        struct addr_slot *s;
        uint64_t key;
        int rank;
        int64_t order;
        unsigned load; /* slots of its set held by addresses that pay their way */
};

static struct pick rate_slot(struct addr_slot *s, int64_t now)
{
        struct pick p = {.s = s, .key = READ_ONCE(s->key)};
        int64_t until = owed_until(s), refused = load(&s->refused);
        if (!p.key)
                p.rank = 3;
        else if (until <= now - LIMIT_ADDR_HOLD_NS)
                p.rank = 2, p.order = now - until;
        else if (refused && refused > now - LIMIT_ADDR_FLOOD_NS)
                p.rank = 1, p.order = until;
        return p;
}

static int better(const struct pick *a, const struct pick *b)
{
        if (a->rank != b->rank)
                return a->rank > b->rank;
        if (a->load != b->load)
                return a->load < b->load; /* the emptier set: two choices */
        return a->order > b->order;
}

static void sets_of(uint64_t h, size_t set[2])
{
        set[0] = h & (LIMIT_ADDR_SETS - 1);
        set[1] = (h >> 20) & (LIMIT_ADDR_SETS - 1);
        if (set[1] == set[0])
                set[1] ^= 1;
}

void addr_sets(const struct addr_table *t, uint64_t key, size_t ret_set[2])
{
        sets_of(addr_hash(&t->hash, key), ret_set);
}

/* Relaxed throughout: a slot changing hands under a race may charge a
 * request in flight to the wrong address, or lose its charge; it never
 * blocks. */
struct addr_slot *addr_slot_get(struct addr_table *t, uint64_t key, int64_t now)
{
        uint64_t h = addr_hash(&t->hash, key);
        size_t set[2];
        sets_of(h, set);
        for (int i = 0; i < 2; i++)
                for (size_t w = 0; w < LIMIT_ADDR_WAYS; w++) {
                        struct addr_slot *s = &t->slot[set[i] * LIMIT_ADDR_WAYS + w];
                        if (READ_ONCE(s->key) == key)
                                return s;
                }
        struct pick best = {.rank = -1};
        for (int i = 0; i < 2; i++) {
                struct pick p[LIMIT_ADDR_WAYS];
                unsigned held = 0;
                for (size_t w = 0; w < LIMIT_ADDR_WAYS; w++) {
                        p[w] = rate_slot(&t->slot[set[i] * LIMIT_ADDR_WAYS + w], now);
                        held += p[w].rank == 0;
                }
                for (size_t w = 0; w < LIMIT_ADDR_WAYS; w++) {
                        p[w].load = held;
                        if (p[w].rank > 0 && better(&p[w], &best))
                                best = p[w];
                }
        }
        if (best.rank > 0) {
                uint64_t k = best.key;
                if (cas_relaxed(best.s->key, &k, key)) {
                        hand_over(t, best.s, best.key, h, now);
                        return best.s;
                }
                if (k == key)
                        return best.s;
        }
        return shared_of(t, h);
}

int addr_take(struct addr_slot *s, struct bucket *b, struct rate r, uint64_t n, int64_t now,
              int64_t *ret_wait)
{
        if (bucket_take(b, r, n, now, ret_wait) == 0)
                return 0;
        WRITE_ONCE(s->refused, now);
        return -1;
}

static size_t count_at(const struct conn_counts *c, uint64_t key)
{
        size_t i = addr_hash(&c->hash, key) & c->mask;
        while (c->e[i].key && c->e[i].key != key)
                i = (i + 1) & c->mask;
        return i;
}

int conn_counts_init(struct conn_counts *c, unsigned max_keys)
{
        size_t n = 16;
        while (n < 2 * (size_t)max_keys)
                n *= 2;
        int r = addr_hash_init(&c->hash);
        if (r < 0)
                return r;
        c->e = calloc(n, sizeof(*c->e));
        if (!c->e)
                return -ENOMEM;
        c->mask = n - 1;
        c->used = 0;
        c->total = 0;
        return 0;
}

void conn_counts_free(struct conn_counts *c)
{
        free(c->e);
        c->e = NULL;
}

unsigned conn_counts_get(const struct conn_counts *c, uint64_t key)
{
        return c->e[count_at(c, key)].n;
}

int conn_counts_add(struct conn_counts *c, uint64_t key, unsigned cap)
{
        size_t i = count_at(c, key);
        /* a new key never takes the last empty entry, which ends every search */
        if (c->e[i].n >= cap || (!c->e[i].key && c->used + 1 > c->mask))
                return -EBUSY;
        c->used += !c->e[i].key;
        c->e[i].key = key;
        c->e[i].n++;
        c->total++;
        return 0;
}

void conn_counts_del(struct conn_counts *c, uint64_t key)
{
        size_t i = count_at(c, key);
        if (!c->e[i].key)
                return;
        c->total--;
        if (--c->e[i].n)
                return;
        /* emptied: the entries after it that searched past it move back */
        c->used--;
        for (size_t j = (i + 1) & c->mask; c->e[j].key; j = (j + 1) & c->mask) {
                size_t home = addr_hash(&c->hash, c->e[j].key) & c->mask;
                /* j stays if its home lies cyclically in (i, j] */
                if (i <= j ? (home > i && home <= j) : (home > i || home <= j))
                        continue;
                c->e[i] = c->e[j];
                i = j;
        }
        c->e[i] = (struct conn_count){0};
}

unsigned conn_share(unsigned pool, size_t addresses, unsigned cap)
{
        size_t s = addresses ? pool / addresses : pool;
        if (s < 1)
                s = 1;
        return s < cap ? (unsigned)s : cap;
}

enum conn_admit conn_admit(const struct conn_counts *c, uint64_t key, unsigned pool, unsigned cap)
{
        unsigned mine = conn_counts_get(c, key);
        if (mine >= cap)
                return CONN_REFUSE;
        if (c->total < pool)
                return CONN_KEEP;
        /* the addresses competing: those holding any, and key */
        if (mine >= conn_share(pool, c->used + !mine, cap))
                return CONN_REFUSE;
        return CONN_MAKE_WAY;
}

long conn_victim(const struct conn_view *v, size_t n, unsigned mine)
{
        long best = -1;
        for (size_t i = 0; i < n; i++) {
                if (v[i].idle_since <= 0 || v[i].held <= mine)
                        continue;
                if (best < 0 || v[i].held > v[best].held ||
                    (v[i].held == v[best].held && v[i].idle_since < v[best].idle_since))
                        best = (long)i;
        }
        return best;
}
