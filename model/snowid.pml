/*
 * snowid.pml: a model of snowid's protocol, as daemon/holder.c, shm/publish.c
 * and libclient/next.c implement it (docs/design.md, "Why two hosts never
 * make the same ID", rules 8-14), with the fences of docs/fences.md (rules
 * 1-6, numbered alike in docs/design.md).
 *
 *   etcd      one linearizable store (etcd, or PostgreSQL, which applies
 *             the same transactions one at a time under a row lock, leases
 *             on its own clock: docs/postgres.md): workers/<n> (a lease and a holder
 *             token), hwm/<n> (the mark) and its mod revision (0: absent),
 *             floor, fence (a token and claims_above), the revision, leases.
 *             Requests are applied atomically, whenever etcd gets to them:
 *             an answer may be lost (the daemon timed out) while the request
 *             is applied later, after the daemon's later requests.  Any live
 *             lease may expire at any moment (STEADY: only leases no daemon
 *             keeps alive).  LOSS=0 (the fault configurations, to stay small):
 *             no answer is lost, a daemon waits for each; requests are still
 *             applied late, after other requests, expiries and faults.  Every transaction compares the fence token the
 *             daemon read (rule 1); every mark write raises the floor (rule
 *             2).  The revision counts the writes of marks and of the fence
 *             (a lease's expiry and workers/<n> alone do not bump it: fewer
 *             bumps only hide restores from rule 5, the cautious side).
 *   faults    DELS: an operator deletes a mark (hwm/<n> absent) at any
 *             moment.  RESTORE: a snapshot of etcd's whole state (workers/,
 *             hwm/, floor, leases alive, revision; the fence is the first
 *             one, since the only fence comes after) is taken at any moment;
 *             later etcd reverts to it (its leases alive again, requests in
 *             flight still applied afterwards), and `snowid fence` writes a
 *             new token and claims_above = max(floor, every mark, every
 *             deadline any daemon published or may still publish): the last
 *             term is the ASSUMPTION of docs/fences.md (no host's deadline is
 *             more than ahead + window past the fencing host's clock),
 *             modelled as the fence knowing every mark etcd ever acknowledged
 *             before it, restored away or not (a ghost): a daemon may publish
 *             a deadline after the fence from an answer it got before.  The fence
 *             comes at once (GAP=0: the procedure is followed, no daemon
 *             reaches the restored cluster before the fence) or at any later
 *             moment (GAP=1).  LOWFENCE: the assumption broken, claims_above
 *             = max(floor, every mark); with STEADY the restore is one that
 *             re-raising alone must cover (the holders in the snapshot are
 *             the holders now, alive and keeping their leases).
 *   daemons   one per host: read the fence, grant, scan (any free number),
 *             claim (one attempt per lease; a number with no mark starts
 *             above the floor and compares floor < start, every claim starts
 *             above claims_above: rule 3), settle a claim whose answer never
 *             came, publish (the generation protocol), renew with the
 *             guarded mark; on a read-back of its own claim with the mark
 *             absent or below the acknowledged one, re-raise it (CAS on the
 *             mod revision) before anything else; give a number up (a lost
 *             lease, a lost claim, MOVES: a move to a fresh number at any
 *             point) only once etcd confirmed its mark >= the deadline
 *             published for it, raising it if needed (rule 4); a revision
 *             lower than one seen on an earlier answer: act on nothing, wait
 *             for a new fence (rule 5); a new fence token: re-raise every
 *             number published, then claim again (rule 6).  Crash and restart
 *             at chosen points (a crash mid-switch leaves gen odd; the new
 *             process remembers nothing it published); a stall past the
 *             lease is any interleaving in which it waits.
 *   clients   C per host, sharing the host's segment: read gen, read worker
 *             and deadline, take a counter value, check it, re-read gen.
 *   clocks    every `now` (daemon or client; a client reads the vDSO or the
 *             TSC clock that snowidd calibrates) is chosen freely in 0..T-1 at
 *             each use: clocks stepping back and forward, and hosts that
 *             disagree, are all covered.  Sequence bits are 0: one value per
 *             ms, which keeps the counter's semantics (values only grow).
 *
 * Left out: the layout key and rule 7 (a lost layout), a deleted floor or
 * fence key, cluster IDs (rule 5 is modelled by revisions only), the slack
 * of rule 3 (SLACK, 0 by default: it only spares failed claims), the
 * "published in the last hour" horizon (a daemon re-raises every number it
 * published), more than one restore or fence, the daemon's own log/healthz
 * reports, batches, and the daemon remembering its deadlines across a crash
 * (the fence's assumption covers a crashed daemon's clients).
 *
 * Properties, asserted at each ID a client makes:
 *   - no ID is made twice (a ghost set of every ID);
 *   - its time is at most the mark etcd holds for its worker right then, if
 *     no mark was deleted or restored yet; and always at most the highest
 *     mark etcd ever acknowledged for that worker (a ghost);
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
 *   6 a lowered mark abandoned: no re-raise, a number given up unconfirmed
 *   7 a claim of a number with no mark starts at max(now, 1), floor ignored
 *   8 no fence compare, no revision check: a restored cluster is extended
 *   9 claims after a fence ignore claims_above
 *  10 an experiment, not a code mutant: the within-client check expects a
 *     decrease; its failure shows the check is evaluated on pairs of IDs of
 *     one client.  (A switch that does not follow the old counter is no
 *     decrease in the 'move' bounds: a fresh number starts above the floor.)
 */
#ifndef MUTANT
#define MUTANT 0
#endif

#define H 2       /* hosts */
#ifndef C
#define C 2       /* clients per host (check.sh runs C=1 in CI; see README) */
#endif
#ifndef N
#define N 1       /* worker numbers */
#endif
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
#ifndef DELS
#define DELS 0    /* marks deleted by an operator */
#endif
#ifndef RESTORE
#define RESTORE 0 /* 1: one snapshot, one restore, one fence */
#endif
#ifndef GAP
#define GAP 0     /* 1: requests may reach the restored cluster before the fence */
#endif
#ifndef LOWFENCE
#define LOWFENCE 0 /* 1: claims_above = max(floor, marks): the assumption broken */
#endif
#ifndef STEADY
#define STEADY 0  /* 1: a lease a daemon keeps alive never expires; the restore
                   * keeps the holders of the snapshot (see above) */
#endif
#ifndef MOVES
#define MOVES 0   /* moves to a fresh number, per daemon */
#endif
#ifndef CTRIES
#define CTRIES 2  /* attempts to confirm a mark before giving a number up */
#endif
#ifndef SLACK
#define SLACK 0
#endif
#define FAULTS (DELS > 0 || RESTORE)
#ifndef LOSS
#define LOSS 1    /* 0: no answer is ever lost (a daemon waits for each) */
#endif
#define P 3       /* requests in flight */
#define LINES 2   /* counter lines per segment (64 in the code; 2 reuses them sooner) */

#define R_CLAIM 1
#define R_EXTEND 2
#define R_RAISE 3

/* ---- etcd ---- */
byte owner[N];      /* lease holding workers/<n>; 0: absent */
byte otok[N];       /* workers/<n>'s value: the claim attempt's token */
byte hwm[N];        /* the mark (0 when absent) */
byte hrev[N];       /* hwm/<n>'s mod revision; 0: absent */
byte floor;         /* rule 2 */
byte ftok = 1;      /* the fence's token */
byte cabove;        /* the fence's claims_above */
byte erev = 1;      /* the revision: layout, fence and floor written at 1 */
bool alive[LMAX + 1];
byte nlease = 1;
byte ntok = 1;

#if RESTORE
byte phase;         /* 0, 1 snapshot taken, 2 restored, 3 fenced */
byte s_owner[N];
byte s_otok[N];
byte s_hwm[N];
byte s_hrev[N];
byte s_floor;
byte s_erev;
bool s_alive[LMAX + 1];
#endif
#if STEADY
byte curL[H];       /* the lease each daemon keeps alive */
#endif
#if FAULTS
byte faults;        /* ghost: deletions and restores so far */
byte hmax[N];       /* ghost: the highest mark ever acknowledged */
#endif
#if DELS > 0
byte dels;
#endif

typedef Req {
        byte kind;   /* 0: free slot */
        byte host;
        byte hold;   /* the daemon's holding that sent it */
        bool orphan; /* its sender gave up waiting: the answer is lost */
        byte n;
        byte lease;
        byte tok;
        byte v;      /* the mark it writes */
        byte rev;    /* claim, raise: hwm/<n>'s mod revision as read */
        byte ft;     /* the fence token the daemon read */
}
Req req[P];

/* one answer slot per host */
byte ans[H];        /* 0 none, 1 succeeded, 2 failed */
bool ans_ours[H];   /* read back: workers/<n> has our lease and token */
byte ans_hwm[H];    /* read back: the stored mark */
byte ans_hrev[H];   /* read back: its mod revision (0: absent) */
byte ans_ft[H];     /* read back: the fence token */
#if RESTORE
byte ans_rev[H];    /* header.revision */
#endif
byte hold[H];       /* the daemon's current holding */

/* ---- segments ---- */
byte gen[H];
byte sworker[H];
byte sdead[H];
byte line[H * LINES];
byte epoch[H];      /* ghost: bumped by a switch that does not follow */

/* ---- ghosts ---- */
bool used[N * T];

#if MUTANT == 8
#define FENCE_OK(i) (1)
#define NEWFENCE(h) (0) /* nor does the daemon look at the fence on answers */
#else
#define FENCE_OK(i) (ftok == req[i].ft)
#define NEWFENCE(h) (ans_ft[h] != myft)
#endif

/* rule 3: a claim of a number with no mark compares floor < start */
#if MUTANT == 7
#define FLOOR_OK(i) (1)
#else
#define FLOOR_OK(i) (req[i].rev != 0 || floor + W < req[i].v)
#endif

/* a mark write: the mark, its revision, the floor (rule 2) */
inline put_mark(n, val) {
        hwm[n] = val;
        erev++;
        hrev[n] = erev;
        if :: floor < val -> floor = val :: else -> skip fi;
#if FAULTS
        if :: hmax[n] < val -> hmax[n] = val :: else -> skip fi
#endif
}

inline apply(i) {
        byte n;
        byte res;
        n = req[i].n;
        res = 2;
        if
        :: req[i].kind == R_CLAIM ->
                if
                :: FENCE_OK(i) && owner[n] == 0 && hrev[n] == req[i].rev && alive[req[i].lease] &&
                   FLOOR_OK(i) ->
                        owner[n] = req[i].lease;
                        otok[n] = req[i].tok;
                        put_mark(n, req[i].v);
                        res = 1
                :: else -> skip
                fi
        :: req[i].kind == R_EXTEND ->
                if
#if MUTANT == 4
                :: owner[n] == req[i].lease && otok[n] == req[i].tok && FENCE_OK(i) ->
#else
                :: owner[n] == req[i].lease && otok[n] == req[i].tok && FENCE_OK(i) &&
                   hrev[n] != 0 && hwm[n] < req[i].v -> /* an absent value compares false */
#endif
                        put_mark(n, req[i].v);
                        res = 1
                :: else -> skip
                fi
        :: req[i].kind == R_RAISE ->
                if
                :: FENCE_OK(i) && hrev[n] == req[i].rev ->
                        put_mark(n, req[i].v);
                        res = 1
                :: else -> skip
                fi
        fi;
        if
        :: !req[i].orphan && hold[req[i].host] == req[i].hold ->
                ans[req[i].host] = res;
                ans_ours[req[i].host] = (owner[n] == req[i].lease && otok[n] == req[i].tok);
                ans_hwm[req[i].host] = hwm[n];
#if FAULTS
                ans_hrev[req[i].host] = hrev[n];
#else
                ans_hrev[req[i].host] = (hrev[n] != 0); /* all a build without faults uses */
#endif
                ans_ft[req[i].host] = ftok;
#if RESTORE
                ans_rev[req[i].host] = erev
#endif
        :: else -> skip
        fi;
        /* a free slot holds nothing: dead values would only multiply states */
        req[i].kind = 0;
        req[i].host = 0;
        req[i].hold = 0;
        req[i].orphan = 0;
        req[i].n = 0;
        req[i].lease = 0;
        req[i].tok = 0;
        req[i].v = 0;
        req[i].rev = 0;
        req[i].ft = 0;
        n = 0;
        res = 0
}

inline expire(l) {
        alive[l] = 0;
        if
        :: owner[0] == l -> owner[0] = 0; otok[0] = 0
        :: else -> skip
        fi;
#if N > 1
        if
        :: owner[1] == l -> owner[1] = 0; otok[1] = 0
        :: else -> skip
        fi
#endif
}

#if STEADY
#define MAY_EXPIRE(l) (curL[0] != l && curL[1] != l)
#else
#define MAY_EXPIRE(l) (1)
#endif

#if DELS > 0
/* an operator deletes hwm/<n> */
inline delete_mark(n) {
        dels++;
        faults++;
        hwm[n] = 0;
        hrev[n] = 0;
        erev++
}
#endif

#if RESTORE
inline snapshot() {
        s_owner[0] = owner[0]; s_otok[0] = otok[0]; s_hwm[0] = hwm[0]; s_hrev[0] = hrev[0];
#if N > 1
        s_owner[1] = owner[1]; s_otok[1] = otok[1]; s_hwm[1] = hwm[1]; s_hrev[1] = hrev[1];
#endif
        s_floor = floor;
        s_erev = erev;
        s_alive[1] = alive[1]; s_alive[2] = alive[2];
#if LMAX > 2
        s_alive[3] = alive[3];
#endif
#if LMAX > 3
        s_alive[4] = alive[4];
#endif
#if LMAX > 4
        s_alive[5] = alive[5];
#endif
        phase = 1
}

inline restore() {
        owner[0] = s_owner[0]; otok[0] = s_otok[0]; hwm[0] = s_hwm[0]; hrev[0] = s_hrev[0];
#if N > 1
        owner[1] = s_owner[1]; otok[1] = s_otok[1]; hwm[1] = s_hwm[1]; hrev[1] = s_hrev[1];
#endif
        floor = s_floor;
        erev = s_erev;
        alive[1] = s_alive[1]; alive[2] = s_alive[2];
#if LMAX > 2
        alive[3] = s_alive[3];
#endif
#if LMAX > 3
        alive[4] = s_alive[4];
#endif
#if LMAX > 4
        alive[5] = s_alive[5];
#endif
        /* the snapshot is spent: zero it, it only multiplies states now */
        s_owner[0] = 0; s_otok[0] = 0; s_hwm[0] = 0; s_hrev[0] = 0;
#if N > 1
        s_owner[1] = 0; s_otok[1] = 0; s_hwm[1] = 0; s_hrev[1] = 0;
#endif
        s_floor = 0; s_erev = 0;
        s_alive[1] = 0; s_alive[2] = 0;
#if LMAX > 2
        s_alive[3] = 0;
#endif
#if LMAX > 3
        s_alive[4] = 0;
#endif
#if LMAX > 4
        s_alive[5] = 0;
#endif
        faults++;
        phase = 2
}

/* snowid fence: a new token, claims_above (see the ASSUMPTION above) */
inline fence() {
        ftok = 2;
        cabove = floor;
        if :: cabove < hwm[0] -> cabove = hwm[0] :: else -> skip fi;
#if N > 1
        if :: cabove < hwm[1] -> cabove = hwm[1] :: else -> skip fi;
#endif
#if !LOWFENCE
        /* the ASSUMPTION: at or above every deadline published, or still to
         * be published from an answer etcd gave before the fence: every mark
         * etcd ever acknowledged, restored away or not (a ghost) */
        if :: cabove < hmax[0] -> cabove = hmax[0] :: else -> skip fi;
#if N > 1
        if :: cabove < hmax[1] -> cabove = hmax[1] :: else -> skip fi;
#endif
#endif
        erev++;
        phase = 3
}

#if STEADY
/* the restore STEADY allows: each number's holder in the snapshot is its
 * holder now, under the same claim */
#if N > 1
#define RESTORE_OK (s_owner[0] != 0 && owner[0] == s_owner[0] && otok[0] == s_otok[0] && \
                    s_owner[1] != 0 && owner[1] == s_owner[1] && otok[1] == s_otok[1])
#else
#define RESTORE_OK (s_owner[0] != 0 && owner[0] == s_owner[0] && otok[0] == s_otok[0])
#endif
#else
#define RESTORE_OK (1)
#endif
#endif

proctype Etcd() {
end:    do
        :: atomic { req[0].kind != 0 -> apply(0) }
        :: atomic { req[1].kind != 0 -> apply(1) }
        :: atomic { req[2].kind != 0 -> apply(2) }
        :: atomic { alive[1] && MAY_EXPIRE(1) -> expire(1) }
        :: atomic { alive[2] && MAY_EXPIRE(2) -> expire(2) }
#if LMAX > 2
        :: atomic { alive[3] && MAY_EXPIRE(3) -> expire(3) }
#endif
#if LMAX > 3
        :: atomic { alive[4] && MAY_EXPIRE(4) -> expire(4) }
#endif
#if LMAX > 4
        :: atomic { alive[5] && MAY_EXPIRE(5) -> expire(5) }
#endif
#if DELS > 0
        :: atomic { dels < DELS && hrev[0] != 0 -> delete_mark(0) }
#if N > 1
        :: atomic { dels < DELS && hrev[1] != 0 -> delete_mark(1) }
#endif
#endif
#if RESTORE
        :: atomic { phase == 0 -> snapshot() }
#if GAP
        :: atomic { phase == 1 && RESTORE_OK -> restore() }
        :: atomic { phase == 2 -> fence() }
#else
        :: atomic { phase == 1 && RESTORE_OK -> restore(); fence() }
#endif
#endif
        od
}

/* revoke: etcd deletes the lease and the keys attached to it */
inline revoke(l) {
        atomic { if :: alive[l] -> expire(l) :: else -> skip fi }
}

/* puts a request in a free slot (waiting for one), and clears the answer */
inline send(h, k, num, l, t, val, r, slot) {
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
                req[slot].n = num;
                req[slot].lease = l;
                req[slot].tok = t;
                req[slot].v = val;
                req[slot].rev = r;
                req[slot].ft = myft;
                ans[h] = 0
        }
}

/* waits for the answer, or gives up (the timeout): a request given up on
 * may still be applied later, and its answer is then lost */
inline await(h, slot) {
        if
        :: atomic { ans[h] != 0 -> skip }
#if LOSS
        :: atomic {
                if
                :: req[slot].kind != 0 && req[slot].host == h && req[slot].hold == hold[h] ->
                        req[slot].orphan = 1
                :: else -> skip
                fi;
                ans[h] = 0
           }
#endif
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
        d_step {
                ans[h] = 0; ans_ours[h] = 0; ans_hwm[h] = 0; ans_hrev[h] = 0; ans_ft[h] = 0;
#if RESTORE
                ans_rev[h] = 0
#endif
        }
}

/* rule 5: a revision lower than one seen: act on nothing, wait for the fence */
#if RESTORE && MUTANT != 8
inline revcheck(h) {
        if
        :: ans_rev[h] < seen -> forget_answer(h); goto restored
        :: else -> seen = ans_rev[h]
        fi
}
#define REVCHECK(h) revcheck(h);
#else
#define REVCHECK(h)
#endif

inline crash_point() {
        if
        :: h == 0 && crashes < CRASHES -> crashes++; goto crashed
        :: skip
        fi
}

/* what a daemon published: the deadline, for rule 6 */
inline published(num, d) {
#if RESTORE
        if :: pubd[num] < d + 1 -> pubd[num] = d + 1 :: else -> skip fi
#else
        skip
#endif
}

proctype Daemon(byte h) {
        byte L, n, start, mark, V, srev, shwm, sfl, sca, tok, slot, now, acked, renewals, f, s, li, crashes;
        byte attempts, myft, moves, cn, cd, crev, cval, ctries, ret, i;
#if RESTORE
        byte seen;
        byte pubd[N];   /* deadline + 1 published for each number; 0: none */
#endif

        myft = ftok;    /* a daemon starts by reading the fence */
new_lease:
        /* grant */
        atomic {
                if
                :: nlease > LMAX -> goto done
                :: else -> L = nlease; nlease++; alive[L] = 1; hold[h]++; attempts = 0;
#if STEADY
                        curL[h] = L
#endif
                fi
        }
scan:
        /* read the fence, a free number, its mark, the floor; pick a start */
        atomic {
                if
                :: ftok != myft -> goto refence
                :: else -> skip
                fi;
                if
                :: owner[0] == 0 -> n = 0
#if N > 1
                :: owner[1] == 0 -> n = 1
#endif
                :: else -> revoke(L); goto new_lease /* all taken: a new lease, later */
                fi;
                shwm = hwm[n]; srev = hrev[n]; sfl = floor; sca = cabove;
                pick_time(now);
                start = now;
#if MUTANT != 3
                if
                :: srev != 0 -> if :: start <= shwm -> start = shwm + 1 :: else -> skip fi
#if MUTANT == 7
                :: else -> if :: start < 1 -> start = 1 :: else -> skip fi
#else
                :: else -> if :: start <= sfl + SLACK -> start = sfl + SLACK + 1 :: else -> skip fi
#endif
                fi;
#if MUTANT != 9
                if :: start <= sca -> start = sca + 1 :: else -> skip fi;
#endif
#endif
                now = 0; shwm = 0; sfl = 0; sca = 0
        }
        /* claim: one attempt per lease */
        if
        :: start + W >= T -> revoke(L); goto done /* past the modelled time */
        :: else -> mark = start + W
        fi;
        atomic { tok = ntok; ntok++; attempts++ };
        send(h, R_CLAIM, n, L, tok, mark, srev, slot);
        srev = 0;
        crash_point();
        await(h, slot);
        slot = 0;
        if
        :: ans[h] != 0 && NEWFENCE(h) -> forget_answer(h); goto refence
        :: ans[h] == 1 && !NEWFENCE(h) -> REVCHECK(h) forget_answer(h); goto held
        :: ans[h] == 2 && !NEWFENCE(h) ->
                REVCHECK(h)
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
                :: owner[n] == L -> goto held /* adopts the last attempt's start and mark */
                :: else -> skip
                fi
        }
#else
        atomic {
                if
                :: ftok != myft -> goto refence
                :: ftok == myft && owner[n] == L && otok[n] == tok && hwm[n] == mark -> goto held
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
                sworker[h] = n;
                sdead[h] = mark;
                published(n, mark);
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
                        atomic { sdead[h] = V; published(n, V) } /* before etcd acknowledged it */
#endif
                        send(h, R_EXTEND, n, L, tok, V, 0, slot);
                        crash_point();
                        await(h, slot);
                        slot = 0;
                        if
                        :: ans[h] == 0 -> skip
                        :: ans[h] != 0 && NEWFENCE(h) -> forget_answer(h); goto refence
                        :: ans[h] != 0 && !NEWFENCE(h) ->
                                REVCHECK(h)
                                if
                                :: ans[h] == 1 || (ans_ours[h] && ans_hrev[h] != 0 && ans_hwm[h] >= V) ->
                                        forget_answer(h);
                                        acked = V;
                                        atomic {
                                                if :: sdead[h] < V -> sdead[h] = V :: else -> skip fi;
                                                published(n, V)
                                        }
                                :: ans[h] == 2 && ans_ours[h] && (ans_hrev[h] == 0 || ans_hwm[h] < acked) ->
#if MUTANT == 6
                                        forget_answer(h);
                                        revoke(L); goto new_lease /* abandoned */
#else
                                        /* rule 4: our claim, the mark absent or lowered: write it back */
                                        crev = ans_hrev[h];
                                        forget_answer(h);
                                        send(h, R_RAISE, n, 0, 0, acked, crev, slot);
                                        crev = 0;
                                        await(h, slot);
                                        slot = 0;
                                        if
                                        :: ans[h] != 0 && NEWFENCE(h) -> forget_answer(h); goto refence
                                        :: else -> skip
                                        fi;
#if RESTORE && MUTANT != 8
                                        if
                                        :: ans[h] != 0 -> revcheck(h)
                                        :: else -> skip
                                        fi;
#endif
                                        forget_answer(h) /* the next renewal reads it back again */
#endif
                                :: ans[h] == 2 && ans_ours[h] && ans_hrev[h] != 0 && ans_hwm[h] >= acked && ans_hwm[h] < V ->
                                        forget_answer(h) /* not reached: such a renewal succeeds */
                                :: ans[h] == 2 && !ans_ours[h] ->
                                        forget_answer(h);
                                        d_step { cn = n; cd = acked }; goto giveup /* lost */
                                fi
                        fi;
                        V = 0
                fi
        :: atomic { !alive[L] -> cn = n; cd = acked }; goto giveup /* keepalive: the lease is gone */
#if MOVES > 0
        :: atomic { moves < MOVES -> moves++; cn = n; cd = acked }; goto giveup /* a move to a fresh number */
#endif
        :: renewals >= RENEWALS -> break
        od;
        goto done;

giveup:
        /* rule 4: number cn is given up only once etcd confirmed its mark at
         * or above cd, the deadline published for it.  Without deletions or
         * restores a mark never falls below an acknowledged value, so the
         * confirmation is immediate: it is left out of those builds. */
#if FAULTS && MUTANT != 6
confirm:
        atomic {
                if
                :: ftok != myft -> goto refence /* rule 6 raises it */
                :: ftok == myft && hrev[cn] != 0 && hwm[cn] >= cd -> goto confirmed
                :: ftok == myft && !(hrev[cn] != 0 && hwm[cn] >= cd) && ctries >= CTRIES ->
                        goto done /* never confirmed: never given up; the daemon stays */
                :: ftok == myft && !(hrev[cn] != 0 && hwm[cn] >= cd) && ctries < CTRIES ->
                        crev = hrev[cn]; ctries++
                fi
        }
        send(h, R_RAISE, cn, 0, 0, cd, crev, slot);
        crev = 0;
        await(h, slot);
        slot = 0;
        if
        :: ans[h] == 1 -> forget_answer(h); goto confirmed
        :: else -> forget_answer(h); goto confirm
        fi;
confirmed:
#else
confirm:
#endif
        atomic {
                ctries = 0; cn = 0; cd = 0;
                if
                :: ret == 0 -> revoke(L); goto new_lease
                :: else -> ret = 0; goto refence_next
                fi
        }

refence:
        /* rule 6: a new fence: re-raise every number published, then claim
         * again; rule 1: nothing else from the answer that showed it */
        atomic {
                myft = ftok;
#if RESTORE
                seen = erev;
#endif
                i = 0
        }
#if RESTORE && MUTANT != 6
refence_loop:
        if
        :: i >= N -> revoke(L); goto new_lease
        :: i < N && pubd[i] == 0 -> i++; goto refence_loop
        :: i < N && pubd[i] != 0 -> cn = i; cd = pubd[i] - 1; ret = 1; goto confirm
        fi;
refence_next:
        i++;
        goto refence_loop;
#else
refence_next:
        revoke(L);
        goto new_lease;
#endif

#if RESTORE
restored:
        /* rule 5: says `restored`, stops extending, waits for the fence */
        atomic { ftok != myft -> skip };
        goto refence;
#endif

crashed:
        /* a new daemon process: its holdings are new; the old lease is left
         * to expire; requests in flight may still be applied */
        skip;
        d_step {
                hold[h]++;
                L = 0; n = 0; start = 0; mark = 0; V = 0; tok = 0; slot = 0; acked = 0; renewals = 0;
                ans[h] = 0; ans_ours[h] = 0; ans_hwm[h] = 0; ans_hrev[h] = 0; ans_ft[h] = 0;
                myft = ftok;
#if RESTORE
                ans_rev[h] = 0;
                seen = 0;
                pubd[0] = 0;
#if N > 1
                pubd[1] = 0;
#endif
#endif
#if STEADY
                curL[h] = 0;
#endif
                moves = 0
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
#if FAULTS
                                                assert(faults != 0 || x <= hwm[w]);
                                                assert(x <= hmax[w]);
#else
                                                assert(x <= hwm[w]);
#endif
                                                if
                                                :: have && lep == epoch[h] ->
#if MUTANT == 10
                                                        assert(x < lastx || (x == lastx && w < lastw))
#else
                                                        assert(x > lastx || (x == lastx && w > lastw))
#endif
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
