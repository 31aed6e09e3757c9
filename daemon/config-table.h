/* SPDX-License-Identifier: MIT */
/*
 * snowidd's settings, one row each (config-table.c).  A row is a key of the
 * config file and a flag of the same name; settings_load() parses both with
 * the row's parser, --help is written from the rows, and tests/test-config.c
 * holds the rows against --help and snowidd.conf(5).
 */
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "config.h"

enum {
        SETTING_FLAG_ONLY = 1 << 0, /* a flag, not a key of the file (--config, --help) */
        SETTING_NO_VALUE = 1 << 1,  /* a flag that takes no value */
        SETTING_SECRET = 1 << 2,    /* the value is never printed (it may hold a password) */
        SETTING_LAYOUT = 1 << 3,    /* part of the layout: given, it sets layout_given */
};

struct setting_choice {
        const char *name;
        int value;
};

struct setting {
        const char *name;
        const char *alias; /* an older name, still accepted; NULL: none */
        const char *arg;   /* the value as --help shows it: SEC, MS, N, FILE... */
        const char *def;   /* the default, as the file would say it; NULL: none */
        const char *help;  /* --help's text, without the default */
        /* Sets the row's field from v: 0, or -EINVAL (-ENOMEM) and, unless
         * the row's own words say it (setting_why()), why. */
        int (*parse)(const struct setting *row, struct settings *s, const char *v, char *why,
                     size_t why_size);
        size_t offset;                        /* of the field in struct settings */
        uint64_t min, max;                    /* numbers */
        const char *unit;                     /* numbers: "seconds", ... */
        const struct setting_choice *choices; /* words, up to a NULL name */
        const char *why;                      /* other values: what is expected */
        unsigned flags;
};

extern const struct setting settings_table[];
extern const size_t settings_table_size;

/* The row named name, or whose older name it is; NULL if none. */
const struct setting *setting_find(const char *name);
/* A number of decimal digits alone, from min to max: 0, or -EINVAL/-ERANGE. */
int setting_number(const char *v, uint64_t min, uint64_t max, uint64_t *ret);
/* What the row expects, in words, for an error. */
void setting_why(const struct setting *row, char *why, size_t why_size);
