/* SPDX-License-Identifier: MIT */
/*
 * A trace of a run, one line per step, in the language model/replay.c
 * reads: recorded when the environment's SNOWID_TRACE names a file,
 * appended to it (one file per instance: a restarted daemon goes on in
 * it; lines of two daemons at once cannot be told apart).
 *
 *   @rule4_confirmed 1 3 4 = 0      a decision of the rules (rules.h), its
 *                                   inputs and what it gave
 *   !claimed 7 1200 4200            what the holder did with them: the
 *   !publish 7 1200 4200            store acknowledged, the segment shows
 *
 * docs/testing.md says how traces are checked.
 */
#pragma once

#include <stdint.h>

/* Starts the trace if SNOWID_TRACE is set (program: who records it).
 * 0: started, or none asked for; -errno: the file cannot be opened. */
int trace_start(const char *program);

/* One of the holder's steps, with its values (nothing if no trace):
 *   claiming W START       a claim of W from START sent (rule3_claim_start's)
 *   claimed W START MARK   the store acknowledged the claim of worker W
 *                          from START, its mark written at MARK
 *   marked W MARK          the store acknowledged W's mark at MARK or more
 *   publish W START DEADLINE   the segment shows W from START to DEADLINE
 *   extend W DEADLINE      the segment's deadline for W raised
 *   dropped W              W is no longer extended (lost, given up, or
 *                          another number published in its place) */
void trace_step(const char *what, unsigned n, const int64_t *values);
#define TRACE_STEP(what, ...)                                                                      \
        trace_step(what, sizeof((const int64_t[]){__VA_ARGS__}) / sizeof(int64_t),                 \
                   (const int64_t[]){__VA_ARGS__})
