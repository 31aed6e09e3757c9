/*
 * snowid.pml: a model of snowid's protocol, as daemon/holder.c, shm/publish.c
 * and libclient/next.c implement it (../shared/DESIGN.md).
 *
 *   etcd      one linearizable store: workers/<n> (a lease and a holder
 *             token), hwm/<n> (the mark) and its mod revision, leases.
 *             Requests are applied atomically, whenever etcd gets to them:
 *             an answer may be lost (the daemon timed out) while the request
 *             is applied later, after the daemon's later requests.  Any live
 *             lease may expire at any moment.
 *   daemons   one per host: grant, scan, claim (one attempt per lease),
 *             settle a claim whose answer never came, publish (the
 *             generation protocol), renew with the guarded mark; crash and
 *             restart at chosen points (a crash mid-switch leaves gen odd);
 *             a stall past the lease is any interleaving in which it waits.
 *   clients   C per host, sharing the host's segment: read gen, read worker
 *             and deadline, take a counter value, check it, re-read gen.
 *   clocks    every `now` (daemon or client) is chosen freely in 0..T-1 at
 *             each use: clocks stepping back and forward, and hosts that
 *             disagree, are all covered.  Sequence bits are 0: one value per
 *             ms, which keeps the counter's semantics (values only grow).
 *
 * Properties, asserted at each ID a client makes:
 *   - no ID is made twice (a ghost set of every ID);
 *   - its time is at most the mark etcd holds for its worker right then;
 *   - within one client IDs strictly increase, unless the host switched
 *     without following its old counter (the code's one documented case).
 *
 * MUTANT (spin -DMUTANT=k) breaks one rule; model/check.sh expects each to
 * fail:
 *   1 publish the deadline when the renewal is sent, not when acknowledged
 *   2 the client skips its second read of gen
 *   3 a claimed number starts at now instead of max(now, hwm + 1)
 *   4 the renewal is guarded only on the lease (not on "stored mark < V")
 *   5 several claim attempts under one lease, the read-back adopting the last
 */
#ifndef MUTANT
#define MUTANT 0
#endif

#define H 2       /* hosts */
#ifndef C
#define C 2       /* clients per host (check.sh runs C=1 in CI; see README) */
#endif
#define N 1       /* worker numbers: both hosts contend for one */
#ifndef T
#define T 5       /* ID times 0..T-1 */
#endif
#ifndef W
#define W 2       /* window: mark = now + W */
#endif
#ifndef LMAX
#define LMAX 3    /* leases granted in all */
#endif
#ifndef IDS
#define IDS 2     /* IDs each client makes */
#endif
#ifndef TRIES
#define TRIES 2   /* calls each client makes (a call may fail or be dropped) */
#endif
#ifndef CRASHES
#define CRASHES 1 /* crashes of daemon 0 */
#endif
#ifndef RENEWALS
#define RENEWALS 2 /* renewals each holding sends */
#endif
#define P 3       /* requests in flight */
#define LINES 2   /* counter lines per segment (64 in the code; 2 reuses them sooner) */

#define R_CLAIM 1
#define R_EXTEND 2

/* ---- etcd ---- */
byte owner[N];      /* lease holding workers/<n>; 0: absent */
byte otok[N];       /* workers/<n>'s value: the claim attempt's token */
byte hwm[N];        /* the mark; 0: absent */
byte hrev[N];       /* hwm/<n>'s mod revision */
bool alive[LMAX + 1];
byte nlease = 1;
byte ntok = 1;

typedef Req {
        byte kind;   /* 0: free slot */
        byte host;
        byte hold;   /* the daemon's holding that sent it */
        bool orphan; /* its sender gave up waiting: the answer is lost */
        byte lease;
        byte tok;
        byte v;      /* the mark it writes */
        byte rev;    /* claim: hwm/<n>'s revision when scanned */
}
Req req[P];

/* one answer slot per host */
byte ans[H];        /* 0 none, 1 succeeded, 2 failed */
bool ans_ours[H];   /* read back: workers/<n> has our lease and token */
byte ans_hwm[H];    /* read back: the stored mark */
byte hold[H];       /* the daemon's current holding */

/* ---- segments ---- */
byte gen[H];
byte sworker[H];
byte sdead[H];
byte line[H * LINES];
byte epoch[H];      /* ghost: bumped by a switch that does not follow */

/* ---- ghosts ---- */
bool used[N * T];

inline apply(i) {
        byte n = 0; /* N == 1 */
        byte res = 2;
        if
        :: req[i].kind == R_CLAIM ->
                if
                :: owner[n] == 0 && hrev[n] == req[i].rev && alive[req[i].lease] ->
                        owner[n] = req[i].lease;
                        otok[n] = req[i].tok;
                        hwm[n] = req[i].v;
                        hrev[n]++;
                        res = 1
                :: else -> skip
                fi
        :: req[i].kind == R_EXTEND ->
                if
#if MUTANT == 4
                :: owner[n] == req[i].lease && otok[n] == req[i].tok ->
#else
                :: owner[n] == req[i].lease && otok[n] == req[i].tok && hwm[n] < req[i].v ->
#endif
                        hwm[n] = req[i].v;
                        hrev[n]++;
                        res = 1
                :: else -> skip
                fi
        fi;
        if
        :: !req[i].orphan && hold[req[i].host] == req[i].hold ->
                ans[req[i].host] = res;
                ans_ours[req[i].host] = (owner[n] == req[i].lease && otok[n] == req[i].tok);
                ans_hwm[req[i].host] = hwm[n]
        :: else -> skip
        fi;
        /* a free slot holds nothing: dead values would only multiply states */
        req[i].kind = 0;
        req[i].host = 0;
        req[i].hold = 0;
        req[i].orphan = 0;
        req[i].lease = 0;
        req[i].tok = 0;
        req[i].v = 0;
        req[i].rev = 0;
        n = 0;
        res = 0
}

inline expire(l) {
        alive[l] = 0;
        if
        :: owner[0] == l -> owner[0] = 0; otok[0] = 0
        :: else -> skip
        fi
}

proctype Etcd() {
end:    do
        :: atomic { req[0].kind != 0 -> apply(0) }
        :: atomic { req[1].kind != 0 -> apply(1) }
        :: atomic { req[2].kind != 0 -> apply(2) }
        :: atomic { alive[1] -> expire(1) }
        :: atomic { alive[2] -> expire(2) }
#if LMAX > 2
        :: atomic { alive[3] -> expire(3) }
#endif
        od
}

/* revoke: etcd deletes the lease and the keys attached to it */
inline revoke(l) {
        atomic { if :: alive[l] -> expire(l) :: else -> skip fi }
}

/* puts a request in a free slot (waiting for one), and clears the answer */
inline send(h, k, l, t, val, r, slot) {
        atomic {
                (req[0].kind == 0 || req[1].kind == 0 || req[2].kind == 0);
                if
                :: req[0].kind == 0 -> slot = 0
                :: req[0].kind != 0 && req[1].kind == 0 -> slot = 1
                :: req[0].kind != 0 && req[1].kind != 0 -> slot = 2
                fi;
                req[slot].kind = k;
                req[slot].host = h;
                req[slot].hold = hold[h];
                req[slot].orphan = 0;
                req[slot].lease = l;
                req[slot].tok = t;
                req[slot].v = val;
                req[slot].rev = r;
                ans[h] = 0
        }
}

/* waits for the answer, or gives up (the timeout): a request given up on
 * may still be applied later, and its answer is then lost */
inline await(h, slot) {
        if
        :: atomic { ans[h] != 0 -> skip }
        :: atomic {
                if
                :: req[slot].kind != 0 && req[slot].host == h && req[slot].hold == hold[h] ->
                        req[slot].orphan = 1
                :: else -> skip
                fi;
                ans[h] = 0
           }
        fi
}

/* a time, chosen freely, in one step (select() would take one step a value) */
inline pick_time(v) {
        if
        :: v = 0
        :: v = 1
        :: v = 2
#if T > 3
        :: v = 3
#endif
#if T > 4
        :: v = 4
#endif
#if T > 5
        :: v = 5
#endif
        fi
}

inline forget_answer(h) {
        d_step { ans[h] = 0; ans_ours[h] = 0; ans_hwm[h] = 0 }
}

inline crash_point() {
        if
        :: h == 0 && crashes < CRASHES -> crashes++; goto crashed
        :: skip
        fi
}

proctype Daemon(byte h) {
        byte L, start, mark, V, srev, shwm, tok, slot, now, acked, renewals, f, s, li, crashes;
        byte attempts;

new_lease:
        /* grant */
        atomic {
                if
                :: nlease > LMAX -> goto done
                :: else -> L = nlease; nlease++; alive[L] = 1; hold[h]++; attempts = 0
                fi
        }
scan:
        atomic {
                if
                :: owner[0] != 0 -> revoke(L); goto new_lease /* taken: a new lease, later */
                :: else -> shwm = hwm[0]; srev = hrev[0]
                fi
        }
        /* claim: one attempt per lease */
        atomic { pick_time(now) };
#if MUTANT == 3
        start = now;
        now = 0;
#else
        if
        :: now > shwm -> start = now
        :: else -> start = shwm + 1
        fi;
#endif
        now = 0;
        if
        :: start + W >= T -> revoke(L); goto done /* past the modelled time */
        :: else -> mark = start + W
        fi;
        atomic { tok = ntok; ntok++; attempts++ };
        send(h, R_CLAIM, L, tok, mark, srev, slot);
        srev = 0;
        shwm = 0;
        crash_point();
        await(h, slot);
        slot = 0;
        if
        :: ans[h] == 1 -> forget_answer(h); goto held
        :: ans[h] == 2 ->
                forget_answer(h);
#if MUTANT == 5
                if :: attempts < 2 -> goto scan :: else -> skip fi;
#endif
                revoke(L); goto new_lease
        :: ans[h] == 0 -> skip /* no answer: settle by reading back */
        fi;
#if MUTANT == 5
        /* another attempt under the same lease, before settling */
        if :: attempts < 2 -> goto scan :: else -> skip fi;
        atomic {
                if
                :: owner[0] == L -> goto held /* adopts the last attempt's start and mark */
                :: else -> skip
                fi
        }
#else
        atomic {
                if
                :: owner[0] == L && otok[0] == tok && hwm[0] == mark -> goto held
                :: else -> skip
                fi
        }
#endif
        revoke(L);
        goto new_lease;

held:
        /* publish: the generation protocol of shm_pub_switch() */
        atomic {
                if
                :: gen[h] % 2 == 0 -> gen[h]++
                :: else -> skip /* a crashed daemon left it odd: finish that switch */
                fi
        }
        crash_point();
        atomic {
                /* follow the old live counter, if the deadline allows; then the
                 * new line, worker and deadline, all while gen is odd */
                f = line[h * LINES + ((gen[h] - 1) / 2) % LINES];
                s = start;
                if
                :: f + 1 > s && f + 1 <= mark -> s = f + 1
                :: f + 1 > s && f + 1 > mark -> epoch[h]++
                :: else -> skip
                fi;
                li = h * LINES + ((gen[h] + 1) / 2) % LINES;
                if :: line[li] < s -> line[li] = s :: else -> skip fi;
                sworker[h] = 0;
                sdead[h] = mark;
                f = 0;
                s = 0;
                li = 0
        }
        gen[h]++;
        acked = mark;
        renewals = 0;

        /* renew: the guarded extension of the mark */
        do
        :: renewals < RENEWALS ->
                renewals++;
                atomic { pick_time(now); V = now + W; now = 0 };
                if
                :: V >= T || V <= acked -> skip
                :: else ->
#if MUTANT == 1
                        sdead[h] = V; /* published before etcd acknowledged it */
#endif
                        send(h, R_EXTEND, L, tok, V, 0, slot);
                        crash_point();
                        await(h, slot);
                        slot = 0;
                        if
                        :: ans[h] == 1 || (ans[h] == 2 && ans_ours[h] && ans_hwm[h] >= V) ->
                                forget_answer(h);
                                acked = V;
                                if :: sdead[h] < V -> sdead[h] = V :: else -> skip fi
                        :: ans[h] == 2 && !(ans_ours[h] && ans_hwm[h] >= V) ->
                                forget_answer(h);
                                goto new_lease /* lost: the segment runs out */
                        :: ans[h] == 0 -> skip
                        fi;
                        V = 0
                fi
        :: atomic { !alive[L] -> skip }; goto new_lease /* keepalive: the lease is gone */
        :: renewals >= RENEWALS -> break
        od;
        goto done;

crashed:
        /* a new daemon process: its holdings are new; the old lease is left
         * to expire; requests in flight may still be applied */
        skip;
        d_step {
                hold[h]++;
                L = 0; start = 0; mark = 0; V = 0; tok = 0; slot = 0; acked = 0; renewals = 0;
                ans[h] = 0; ans_ours[h] = 0; ans_hwm[h] = 0
        };
        goto new_lease;
done:
        skip
}

proctype Client(byte h; byte c) {
        byte g, w, d, x, now, k, li, lastx, lastw, lep, tries;
        bool have;
        do
        :: k < IDS && tries < TRIES ->
                tries++;
                /* an odd gen: a switch; the client waits (next.c's wait_switch) */
                atomic { gen[h] % 2 == 0 -> g = gen[h] };
                if
                :: false -> skip
                :: else ->
                        atomic { w = sworker[h]; d = sdead[h] };
                        li = h * LINES + (g / 2) % LINES;
                        /* CAS to now, or fetch_add: the value taken is max(counter, now);
                         * a counter already past the deadline is not touched (next.c) */
                        atomic {
                                pick_time(now);
                                if
                                :: line[li] > d -> x = T
                                :: line[li] <= d && line[li] > now -> x = line[li]; line[li] = x + 1
                                :: line[li] <= d && line[li] <= now -> x = now; line[li] = x + 1
                                fi;
                                now = 0;
                                li = 0
                        }
                        if
                        :: x > d -> skip /* past the deadline: not used */
                        :: else ->
#if MUTANT != 2
                                if
                                :: gen[h] != g -> skip /* dropped */
                                :: else ->
#endif
                                        atomic {
                                                assert(!used[w * T + x]);
                                                used[w * T + x] = 1;
                                                assert(x <= hwm[w]);
                                                if
                                                :: have && lep == epoch[h] ->
                                                        assert(x > lastx || (x == lastx && w > lastw))
                                                :: else -> skip
                                                fi;
                                                have = 1;
                                                lastx = x;
                                                lastw = w;
                                                lep = epoch[h];
                                                k++
                                        }
#if MUTANT != 2
                                fi
#endif
                        fi
                fi;
                d_step { g = 0; w = 0; d = 0; x = 0 }
        :: else -> break
        od
}

init {
        atomic {
                gen[0] = 1; /* nothing published yet */
                gen[1] = 1;
                run Etcd();
                run Daemon(0);
                run Daemon(1);
                run Client(0, 0);
                run Client(1, 0);
#if C == 2
                run Client(0, 1);
                run Client(1, 1)
#endif
        }
}
