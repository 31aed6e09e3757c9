/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "store.h"
#include "txn.h"

json_t *txn_key(const char *prefix, const char *what, int64_t n)
{
        return n < 0 ? store_b64("%s%s", prefix, what) : store_b64("%s%s%" PRId64, prefix, what, n);
}

json_t *txn_range(json_t *key, json_t *range_end, bool keys_only)
{
        json_t *r = json_pack("{s:{s:o}}", "request_range", "key", key);
        json_t *in = json_object_get(r, "request_range");
        if (range_end)
                json_object_set_new(in, "range_end", range_end);
        if (keys_only)
                json_object_set_new(in, "keys_only", json_true());
        return r;
}

json_t *txn_put(json_t *key, json_t *value, int64_t lease)
{
        json_t *r = json_pack("{s:{s:o, s:o}}", "request_put", "key", key, "value", value);
        if (lease) {
                char l[32];
                snprintf(l, sizeof(l), "%" PRId64, lease);
                json_object_set_new(json_object_get(r, "request_put"), "lease", json_string(l));
        }
        return r;
}

json_t *txn_mark(uint64_t v)
{
        return store_b64("%020" PRIu64, v);
}

json_t *txn_cmp(json_t *key, const char *target, const char *result, json_t *value, int64_t arg)
{
        static const struct {
                const char *target, *field;
        } fields[] = {{"VALUE", "value"},
                      {"CREATE", "create_revision"},
                      {"MOD", "mod_revision"},
                      {"LEASE", "lease"}};
        const char *field = "value";
        for (size_t i = 0; i < sizeof(fields) / sizeof(fields[0]); i++)
                if (!strcmp(target, fields[i].target))
                        field = fields[i].field;
        json_t *c = json_pack("{s:o, s:s, s:s}", "key", key, "target", target, "result", result);
        if (value)
                json_object_set_new(c, field, value);
        else {
                char a[24];
                snprintf(a, sizeof(a), "%" PRId64, arg);
                json_object_set_new(c, field, json_string(a));
        }
        return c;
}

json_t *txn_raise_floor(const char *prefix, uint64_t v)
{
        return json_pack("{s:{s:[o], s:[o]}}", "request_txn", "compare",
                         txn_cmp(txn_key(prefix, "floor", -1), "VALUE", "LESS", txn_mark(v), 0),
                         "success", txn_put(txn_key(prefix, "floor", -1), txn_mark(v), 0));
}

void txn_cluster_compares(json_t *compares, const char *prefix, const struct cluster_ident *c)
{
        char *b = b64_encode(c->fence, c->fence_len);
        json_array_append_new(compares, txn_cmp(txn_key(prefix, "fence", -1), "VALUE", "EQUAL",
                                                json_string(b ? b : ""), 0));
        free(b);
        json_array_append_new(compares, txn_cmp(txn_key(prefix, "layout", -1), "CREATE", "EQUAL",
                                                NULL, c->layout_rev));
}

void txn_cluster_reads(json_t *ops, const char *prefix)
{
        json_array_append_new(ops, txn_range(txn_key(prefix, "fence", -1), NULL, false));
        json_array_append_new(ops, txn_range(txn_key(prefix, "layout", -1), NULL, false));
}

json_t *txn_kvs(const json_t *root, size_t i)
{
        json_t *rr = json_object_get(json_array_get(json_object_get(root, "responses"), i),
                                     "response_range");
        json_t *kvs = json_object_get(rr, "kvs");
        return json_is_array(kvs) ? kvs : NULL;
}

void kv_clear(struct kv *kv)
{
        free(kv->key);
        free(kv->value);
        *kv = (struct kv){0};
}

int kv_parse(const json_t *j, struct kv *kv)
{
        size_t n;
        *kv = (struct kv){0};
        const char *k = json_string_value(json_object_get(j, "key"));
        const char *v = json_string_value(json_object_get(j, "value"));
        if (!k || !(kv->key = b64_decode(k, &n)))
                return -EBADMSG;
        kv->value = b64_decode(v ? v : "", &kv->value_len);
        if (!kv->value || store_int64(j, "lease", &kv->lease) < 0 ||
            store_int64(j, "mod_revision", &kv->mod_revision) < 0 ||
            store_int64(j, "create_revision", &kv->create_revision) < 0) {
                kv_clear(kv);
                return -EBADMSG;
        }
        return 0;
}

int txn_kv(const json_t *root, size_t i, struct kv *kv)
{
        *kv = (struct kv){0};
        json_t *rr = json_object_get(json_array_get(json_object_get(root, "responses"), i),
                                     "response_range");
        if (!json_is_object(rr))
                return -EBADMSG; /* not a range's answer at all */
        json_t *kvs = json_object_get(rr, "kvs");
        if (!json_is_array(kvs) || json_array_size(kvs) == 0)
                return 0; /* etcd leaves out an empty kvs */
        return kv_parse(json_array_get(kvs, 0), kv) < 0 ? -EBADMSG : 1;
}

int txn_cluster_same(const json_t *root, size_t i, const struct cluster_ident *c)
{
        struct kv f, l;
        int rf = txn_kv(root, i, &f), rl = txn_kv(root, i + 1, &l);
        int same = rf == 1 && rl == 1 && f.value_len == c->fence_len &&
                   !memcmp(f.value, c->fence, f.value_len) && l.create_revision == c->layout_rev;
        kv_clear(&f);
        kv_clear(&l);
        if (rf < 0 || rl < 0)
                return -EBADMSG;
        return same;
}
