/* SPDX-License-Identifier: MIT */
/*
 * A worker number as the store holds it: plain data, shared by the store's
 * verbs (verbs.h) and the choice of a number to claim (rules/choose.h).
 */
#pragma once

#include <stdbool.h>
#include <stdint.h>

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
