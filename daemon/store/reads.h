/* SPDX-License-Identifier: MIT */
/*
 * What the store's verbs read (verbs.h): a worker number, a region's record,
 * the cluster.  Plain data, shared by the verbs and the pure decisions made
 * on them (rules/choose.h, rules/verdict.h).
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cluster-ident.h"
#include "snowid.h"

/* A number's two keys as read: workers/<n> (its holder) and hwm/<n> (its
 * mark). */
struct store_number {
        bool held;        /* workers/<n> is there */
        int64_t lease;    /* under this lease */
        bool value_is;    /* its value is the one the request named */
        bool marked;      /* hwm/<n> is there */
        bool mark_valid;  /* and holds a mark */
        uint64_t mark;    /* its value, if valid */
        int64_t mark_rev; /* its mod revision; 0: absent */
        bool malformed;   /* the answer about it could not be read */
};

/* The numbers of a scan: every number [0, workers), or a sample. */
struct store_scan {
        bool ok, succeeded;
        int same;
        int floor_read; /* 1 read and valid, 0 absent or not a mark, -1 unknown */
        uint64_t floor;
        uint64_t workers;             /* numbers[] has this many */
        struct store_number *numbers; /* numbers not read: as if held; NULL: none read */
};

/* A claim's answer (store_claim()). */
struct store_claimed {
        bool no_answer; /* none, or a 5xx: it may or may not be applied */
        bool ok, succeeded;
        int64_t revision; /* of the claim's writes */
        int same;
        /* failed: hwm/<own_worker> as read (own_read: the answer has it) */
        bool own_read;
        struct store_number own;
};

/* A number read: its two keys (value_is against value), with the fence
 * and layout. */
struct store_read {
        bool ok, succeeded;
        int same;
        struct store_number n;
};

/* A mark extension's answer (store_extend()). */
struct store_extended {
        bool ok, succeeded;
        int64_t revision;
        int same;
        struct store_number n;
};

/* A raise's answer (store_raise()). */
struct store_raised {
        bool ok, succeeded, put;
        int same;
        struct store_number n;
};

/* A region's record under ranges/: the region it names (NULL: the key is
 * not a record's), and its value as stored. */
struct store_record {
        const char *region;
        const char *key;
        const char *value;
        size_t value_len;
};

/* The cluster as read: the layout, fence and floor (each 1 read and valid,
 * 0 absent, -1 there but not valid); while there is no layout, whether it
 * was ever used; the regions' records; whether a witness is there; and the
 * mark of this daemon's own number, if asked for. */
struct store_cluster {
        bool ok;
        bool malformed; /* the layout, fence or floor could not be read */
        int layout;
        snowid_layout l;
        char layout_text[208]; /* its value, cut, for a log when not valid */
        int64_t layout_rev;    /* its create revision */
        int fence;
        struct cluster_ident c;
        int floor;
        uint64_t floor_value;
        bool held;       /* a number is held (read while there is no layout) */
        bool marks_zero; /* every mark read is 0 (idem) */
        bool witnessed;
        /* the host making the cluster (the key `creating`; read with the
         * rest, so that a host waiting for another's creation reads the
         * cluster itself): 1 there, with its value and mod revision, 0
         * absent, -1 not read */
        int creating;
        char creating_value[128];
        int64_t creating_rev;
        size_t n_records;
        const struct store_record *records;
        int64_t records_rev; /* what store_record_range() compares: the records as read */
        bool own_read;       /* own_mark_rev: the mod revision of hwm/<own_worker> */
        int32_t own_worker;
        int64_t own_mark_rev;
};
