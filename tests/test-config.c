/* SPDX-License-Identifier: MIT */
/*
 * snowidd's settings (daemon/config.c, daemon/config-table.c): the rows
 * against --help and against snowidd.conf(5) and snowidd(8), the defaults,
 * the older names, the store's checks given or not, and a layout whose time
 * bits run out refused before anything reaches the store.
 *
 * Usage: test-config SNOWIDD.CONF.5.SCD SNOWIDD.8.SCD
 */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <syslog.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "config-table.h"

static const char *conf_page, *daemon_page;

/* settings_load() on "snowidd --config /dev/null" and the flags given, up to
 * NULL; settings freed */
static int load(const struct settings_checks *checks, struct settings *s, ...)
{
        char *argv[32] = {"snowidd", "--config", "/dev/null"};
        int argc = 3;
        va_list ap;
        va_start(ap, s);
        for (char *a; (a = va_arg(ap, char *)) && argc < 31;)
                argv[argc++] = a;
        va_end(ap);
        return settings_load(s, checks, argc, argv);
}

static int load_flags(const char *first, ...)
{
        char *argv[32] = {"snowidd", "--config", "/dev/null", (char *)first};
        int argc = 4;
        va_list ap;
        va_start(ap, first);
        for (char *a; (a = va_arg(ap, char *)) && argc < 31;)
                argv[argc++] = a;
        va_end(ap);
        struct settings s;
        int r = settings_load(&s, NULL, argc, argv);
        settings_free(&s);
        return r;
}

/* The whole text of a file, or of what fn wrote to stdout. */
static char *slurp(FILE *f)
{
        size_t n = 0, cap = 1 << 16;
        char *buf = malloc(cap);
        assert_non_null(buf);
        for (size_t k; (k = fread(buf + n, 1, cap - 1 - n, f)) > 0;)
                if ((n += k) == cap - 1)
                        assert_non_null(buf = realloc(buf, cap *= 2));
        buf[n] = 0;
        return buf;
}

static char *read_page(const char *path)
{
        FILE *f = fopen(path, "re");
        if (!f)
                fail_msg("cannot read %s", path);
        char *text = slurp(f);
        fclose(f);
        return text;
}

static char *help_text(void)
{
        FILE *tmp = tmpfile();
        assert_non_null(tmp);
        fflush(stdout);
        int saved = dup(STDOUT_FILENO);
        dup2(fileno(tmp), STDOUT_FILENO);
        struct settings s;
        int r = load(NULL, &s, "--help", NULL);
        settings_free(&s);
        fflush(stdout);
        dup2(saved, STDOUT_FILENO);
        close(saved);
        assert_int_equal(r, 1);
        assert_int_equal(settings_exit_status(r), 0);
        rewind(tmp);
        char *text = slurp(tmp);
        fclose(tmp);
        return text;
}

/* The text from p to the next line that starts with stop (or the end),
 * whitespace runs made one space and the characters of drop left out. */
static char *entry(const char *p, const char *stop, const char *drop)
{
        const char *end = strstr(p + 1, stop);
        size_t len = end ? (size_t)(end - p) : strlen(p), n = 0;
        char *out = malloc(len + 1);
        assert_non_null(out);
        for (size_t i = 0; i < len; i++) {
                char c = p[i] == '\n' || p[i] == '\t' ? ' ' : p[i];
                if (strchr(drop, c) || (c == ' ' && n && out[n - 1] == ' '))
                        continue;
                out[n++] = c;
        }
        out[n] = 0;
        return out;
}

/* needle in hay, not followed by more of a word or number */
static bool has_word(const char *hay, const char *needle)
{
        size_t n = strlen(needle);
        for (const char *p = hay; (p = strstr(p, needle)); p++)
                if (!p[n] || !strchr("abcdefghijklmnopqrstuvwxyz0123456789", p[n]))
                        return true;
        return false;
}

static void test_defaults(void **state)
{
        (void)state;
        struct settings s;
        snowid_layout def;
        assert_int_equal(load(NULL, &s, NULL), 0);
        snowid_layout_default(&def);
        assert_int_equal(s.store, STORE_ETCD);
        assert_int_equal(s.n_etcd, 1);
        assert_string_equal(s.etcd[0], "http://127.0.0.1:2379");
        assert_string_equal(s.cluster, "default");
        assert_string_equal(s.instance, "default");
        assert_string_equal(s.region, "default");
        assert_string_equal(s.runtime_dir, "/run/snowid");
        assert_int_equal(s.lease_ttl_s, 10);
        assert_int_equal(s.renew_ms, 1000);
        assert_int_equal(s.window_s, 10);
        assert_int_equal(s.mark_step_s, 5);
        assert_int_equal(s.store_timeout_ms, 2000);
        assert_int_equal(s.step_back_ms, 1000);
        assert_int_equal(s.slew_us_per_s, 1000);
        assert_int_equal(s.lead_ms, 1);
        assert_int_equal(s.tsc_mode, TSC_MODE_AUTO);
        assert_int_equal(s.tsc_max_error_us, 200);
        assert_memory_equal(&s.layout, &def, sizeof(def));
        assert_false(s.layout_given);
        assert_false(s.range_given);
        assert_null(s.postgres);
        assert_null(s.http);
        assert_int_equal(s.http_max_count, 10000);
        assert_int_equal(s.http_threads, 2);
        assert_int_equal(s.http_token_ids, 0);
        assert_int_equal(s.http_token_requests, 0);
        assert_int_equal(s.http_address_ids, 1000000);
        assert_int_equal(s.http_address_requests, 0);
        assert_int_equal(s.http_connections, 1024);
        assert_int_equal(s.http_connections_per_address, 64);
        assert_int_equal(s.http_read_timeout_s, 10);
        assert_int_equal(s.log_level, LOG_INFO);
        assert_false(s.check_config);
        settings_free(&s);
}

/* Every row is an entry of --help with its default and older name, and
 * every entry a row. */
static void test_rows_help(void **state)
{
        (void)state;
        char *help = help_text(), want[256];
        size_t entries = 0;
        for (const char *p = help; (p = strstr(p, "\n  --")); p++)
                entries++;
        assert_int_equal(entries, settings_table_size);
        for (size_t i = 0; i < settings_table_size; i++) {
                const struct setting *row = &settings_table[i];
                snprintf(want, sizeof(want), "\n  --%s ", row->name);
                const char *p = strstr(help, want);
                if (!p)
                        fail_msg("--help has no entry for --%s", row->name);
                char *text = entry(p + 1, "\n  --", "");
                if (row->def) {
                        snprintf(want, sizeof(want), "(default %s", row->def);
                        if (!strstr(text, want))
                                fail_msg("--help: '%s' without '%s'", text, want);
                }
                if (row->alias) {
                        snprintf(want, sizeof(want), "%s is its older name", row->alias);
                        if (!strstr(text, want))
                                fail_msg("--help: '%s' without '%s'", text, want);
                }
                free(text);
        }
        free(help);
}

/* Every setting is documented in snowidd.conf(5), with its default and its
 * older name, and every setting documented there is a row; the flags that
 * are not settings are in snowidd(8). */
static void test_rows_man(void **state)
{
        (void)state;
        char *page = read_page(conf_page), *daemon = read_page(daemon_page), want[256];
        size_t documented = 0;
        /* terms: lines that start "*name* = ", some with two settings */
        for (const char *line = page; line; line = strchr(line + 1, '\n')) {
                const char *p = line + (*line == '\n'), *eol = strchrnul(p, '\n');
                for (const char *end; *p == '*' && (end = strstr(p + 1, "* = ")) && end < eol;) {
                        char name[64];
                        snprintf(name, sizeof(name), "%.*s", (int)(end - p - 1), p + 1);
                        const struct setting *row = setting_find(name);
                        if (!row || strcmp(row->name, name) || row->flags & SETTING_FLAG_ONLY)
                                fail_msg("snowidd.conf(5) documents '%s', not a setting", name);
                        documented++;
                        p = strstr(end, ", *");
                        p = p && p < eol ? p + 2 : "";
                }
        }
        size_t settings = 0;
        for (size_t i = 0; i < settings_table_size; i++) {
                const struct setting *row = &settings_table[i];
                if (row->flags & SETTING_FLAG_ONLY) {
                        snprintf(want, sizeof(want), "*--%s*", row->name);
                        if (!strstr(daemon, want))
                                fail_msg("snowidd(8) does not describe --%s", row->name);
                        continue;
                }
                settings++;
                snprintf(want, sizeof(want), "\n*%s* = ", row->name);
                const char *p = strstr(page, want);
                if (!p) {
                        snprintf(want, sizeof(want), ", *%s* = ", row->name);
                        p = strstr(page, want);
                }
                if (!p)
                        fail_msg("snowidd.conf(5) does not document %s", row->name);
                char *text = entry(p, "\n*", "*\\");
                if (row->def) {
                        snprintf(want, sizeof(want), "Default: %s", row->def);
                        if (!has_word(text, want))
                                fail_msg("snowidd.conf(5): '%s' without '%s'", text, want);
                }
                if (row->alias && (!strstr(text, row->alias) || !strstr(text, "older name")))
                        fail_msg("snowidd.conf(5): '%s' does not say %s is its older name", text,
                                 row->alias);
                free(text);
        }
        assert_int_equal(documented, settings);
        free(page);
        free(daemon);
}

/* An older name, as a flag and as a key, sets what the name sets; every
 * older name of the table is tried here. */
static void test_aliases(void **state)
{
        (void)state;
        static const struct {
                const char *alias, *value;
        } tried[] = {{"etcd-timeout", "3000"}, {"group", "0"}};
        for (size_t i = 0; i < settings_table_size; i++) {
                const struct setting *row = &settings_table[i];
                bool found = !row->alias;
                for (size_t k = 0; k < sizeof(tried) / sizeof(*tried); k++)
                        found |= row->alias && !strcmp(row->alias, tried[k].alias);
                if (!found)
                        fail_msg("the older name %s of %s is not tried", row->alias, row->name);
        }
        struct settings s;
        assert_int_equal(load(NULL, &s, "--etcd-timeout", "3000", NULL), 0);
        assert_int_equal(s.store_timeout_ms, 3000);
        settings_free(&s);
        assert_int_equal(load(NULL, &s, "--etcd-timeout=4000", NULL), 0);
        assert_int_equal(s.store_timeout_ms, 4000);
        settings_free(&s);
        assert_int_equal(load(NULL, &s, "--store-timeout", "5000", NULL), 0);
        assert_int_equal(s.store_timeout_ms, 5000);
        settings_free(&s);
        assert_int_equal(load(NULL, &s, "--group", "0", NULL), 0);
        assert_string_equal(s.allow_groups, "0");
        settings_free(&s);
        /* out of range under either name */
        assert_int_equal(load_flags("--etcd-timeout", "99", NULL), -EINVAL);
        assert_int_equal(load_flags("--store-timeout", "60001", NULL), -EINVAL);

        /* in a file: the older names, and the last line wins */
        char path[] = "/tmp/snowidd-conf-XXXXXX";
        int fd = mkstemp(path);
        assert_true(fd >= 0);
        const char text[] = "etcd-timeout = 3000\ngroup = 0\nstore-timeout = 2500\n";
        assert_int_equal(write(fd, text, sizeof(text) - 1), sizeof(text) - 1);
        close(fd);
        char *argv[] = {"snowidd", "--config", path, NULL};
        assert_int_equal(settings_load(&s, NULL, 3, argv), 0);
        assert_int_equal(s.store_timeout_ms, 2500);
        assert_string_equal(s.allow_groups, "0");
        settings_free(&s);
        unlink(path);
}

static uint64_t now_ms(void)
{
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* A layout whose time bits have run out, or run out within a year, is
 * refused by settings_load(), --check-config included. */
static void test_layout_runs_out(void **state)
{
        (void)state;
        const uint64_t day = 86400000, bits36 = UINT64_C(1) << 36;
        char epoch[32];
        /* 33 bits of ms from 2025-01-01 ran out in April 2025 */
        assert_int_equal(
                load_flags("--time-bits", "33", "--worker-bits", "10", "--seq-bits", "20", NULL),
                -EINVAL);
        assert_int_equal(load_flags("--check-config", "--time-bits", "33", "--worker-bits", "10",
                                    "--seq-bits", "20", NULL),
                         -EINVAL);
        assert_int_equal(settings_exit_status(-EINVAL), EX_CONFIG_);
        /* 2^35 ms is 397 days: 35 bits from yesterday last 396 days, taken */
        snprintf(epoch, sizeof(epoch), "%" PRIu64, now_ms() - day);
        assert_int_equal(load_flags("--epoch", epoch, "--time-bits", "35", "--worker-bits", "8",
                                    "--seq-bits", "20", NULL),
                         0);
        /* 36 bits that run out in 200 days: refused; in 400 days: taken */
        snprintf(epoch, sizeof(epoch), "%" PRIu64, now_ms() - bits36 + 200 * day);
        assert_int_equal(load_flags("--epoch", epoch, "--time-bits", "36", "--worker-bits", "10",
                                    "--seq-bits", "17", NULL),
                         -EINVAL);
        snprintf(epoch, sizeof(epoch), "%" PRIu64, now_ms() - bits36 + 400 * day);
        assert_int_equal(load_flags("--epoch", epoch, "--time-bits", "36", "--worker-bits", "10",
                                    "--seq-bits", "17", NULL),
                         0);
        /* 34 bits (199 days) never last a year, even from an epoch ahead */
        snprintf(epoch, sizeof(epoch), "%" PRIu64, now_ms() + day);
        assert_int_equal(load_flags("--epoch", epoch, "--time-bits", "34", "--worker-bits", "10",
                                    "--seq-bits", "19", NULL),
                         -EINVAL);
        /* the defaults given, and a layout given in the file */
        assert_int_equal(load_flags("--time-bits", "41", NULL), 0);
        char path[] = "/tmp/snowidd-conf-XXXXXX";
        int fd = mkstemp(path);
        assert_true(fd >= 0);
        const char text[] = "time-bits = 33\nworker-bits = 10\nseq-bits = 20\n";
        assert_int_equal(write(fd, text, sizeof(text) - 1), sizeof(text) - 1);
        close(fd);
        struct settings s;
        char *argv[] = {"snowidd", "--config", path, "--check-config", NULL};
        assert_int_equal(settings_load(&s, NULL, 4, argv), -EINVAL);
        settings_free(&s);
        unlink(path);
}

static int fake_ok(const char *conninfo, char *why, size_t n)
{
        (void)conninfo, (void)why, (void)n;
        return 0;
}

static int fake_refuses(const char *conninfo, char *why, size_t n)
{
        (void)conninfo;
        snprintf(why, n, "refused by the fake store");
        return -EINVAL;
}

/* postgres = is checked by the store's check: refused without it */
static void test_store_checks(void **state)
{
        (void)state;
        const struct settings_checks ok = {.postgres = fake_ok},
                                     refuses = {.postgres = fake_refuses};
        struct settings s;
        assert_int_equal(load(NULL, &s, "--store", "postgres", "--postgres", "host=x", NULL),
                         -EINVAL);
        settings_free(&s);
        assert_int_equal(load(&refuses, &s, "--store", "postgres", "--postgres", "host=x", NULL),
                         -EINVAL);
        settings_free(&s);
        assert_int_equal(load(&ok, &s, "--store", "postgres", "--postgres", "host=x", NULL), 0);
        assert_int_equal(s.store, STORE_POSTGRES);
        assert_string_equal(s.postgres, "host=x");
        settings_free(&s);
        assert_int_equal(load(&ok, &s, "--store", "postgres", NULL), -EINVAL);
        settings_free(&s);
}

/* Bad values, flags and combinations: a negative errno, exit 78 */
static void test_refused(void **state)
{
        (void)state;
        assert_int_equal(load_flags("--lease-ttl", "1", NULL), -EINVAL);
        assert_int_equal(load_flags("--lease-ttl", "+5", NULL), -EINVAL);
        assert_int_equal(load_flags("--window", "zero", NULL), -EINVAL);
        assert_int_equal(load_flags("--store", "mongo", NULL), -EINVAL);
        assert_int_equal(load_flags("--log-level", "loud", NULL), -EINVAL);
        assert_int_equal(load_flags("--etcd", "ftp://x", NULL), -EINVAL);
        assert_int_equal(load_flags("--instance", "a/b", NULL), -EINVAL);
        assert_int_equal(load_flags("--runtime-dir", "relative", NULL), -EINVAL);
        assert_int_equal(load_flags("--bogus", NULL), -EINVAL);
        assert_int_equal(load_flags("extra", NULL), -EINVAL);
        assert_int_equal(load_flags("--renew-interval", "9000", NULL), -EINVAL);
        assert_int_equal(load_flags("--slew", "5001", NULL), -EINVAL);
        assert_int_equal(load_flags("--slew", "5000", NULL), 0);
        assert_int_equal(load_flags("--time-bits", "40", NULL), -EINVAL);
        assert_int_equal(load_flags("--check-config", NULL), 1);
}

int main(int argc, char **argv)
{
        if (argc < 3) {
                fprintf(stderr, "usage: %s SNOWIDD.CONF.5.SCD SNOWIDD.8.SCD\n", argv[0]);
                return 2;
        }
        conf_page = argv[1];
        daemon_page = argv[2];
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_defaults),        cmocka_unit_test(test_rows_help),
                cmocka_unit_test(test_rows_man),        cmocka_unit_test(test_aliases),
                cmocka_unit_test(test_layout_runs_out), cmocka_unit_test(test_store_checks),
                cmocka_unit_test(test_refused),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
