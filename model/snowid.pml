/*
 * snowid.pml: a model of snowid's protocol, as daemon/core/ (acquire.c, hold.c,
 * raise.c, create.c, known.c), shm/publish.c, libclient/next.c
 * and daemon/core/fencing.c (`snowid fence`) implement it
 * (docs/design.md, "Why two hosts never make the same ID", rules 8-14),
 * with the fences of docs/fences.md (rules 1-6, numbered alike in
 * docs/design.md).  This model's names for parts of those rules:
 *   R-A  rules 5 and 6: a fence names the cluster ID it was written on; an
 *        answer from another cluster ID is acted on for nothing
 *   R-B  rule 5: every answer's revision against the highest seen
 *   R-C  rule 5: this daemon's own acknowledged writes read back forgotten
 *   R-D  rule 5: a lease unknown before its TTL could have run out
 *   R-E  rule 4: a stop confirms the mark before it revokes the lease
 *   R-F  "what each rule guarantees": the fence's clock bound, and the lead
 *        of the fence it replaces
 *
 *   etcd      one linearizable store (etcd, or PostgreSQL, which applies
 *             the same transactions one at a time under a row lock, leases
 *             on its own clock: docs/postgres.md): workers/<n> (a lease and
 *             a holder token), hwm/<n> (the mark) and its mod revision (0:
 *             absent), floor, fence (a token, claims_above and the cluster
 *             ID it was written on), the revision, the cluster ID, leases.
 *             Requests are applied atomically, whenever etcd gets to them:
 *             an answer may be lost (the daemon timed out) while the request
 *             is applied later, after the daemon's later requests.  LOSS=0
 *             (the fault configurations, to stay small): no answer is lost,
 *             a daemon waits for each; requests are still applied late,
 *             after other requests, expiries and faults.  Every transaction
 *             compares the fence token the daemon read (rule 1); every mark
 *             write raises the floor (rule 2).  Every answer carries
 *             header.cluster_id and header.revision.  The revision counts
 *             the writes of marks and of the fence, and deletions.
 *   leases    a lease expires only once its daemon stopped keeping it
 *             alive for a TTL: a stall (STALLS per daemon, at any moment,
 *             STALL0=0: never daemon 0), a crash, a stop, or a revocation.
 *             Any lease so left may expire at any moment.  (Without
 *             restores or lowered marks, any lease may expire at any moment:
 *             a superset.)  A daemon knows
 *             whether its TTL could have run out (its own monotonic clock):
 *             a lease etcd says is unknown while it could not is a restore
 *             (R-D), not an expiry.
 *   faults    DELS: an operator deletes a mark at any moment.  LOWERS: an
 *             operator writes a mark lower than the highest acknowledged (a
 *             script, a key put back from a backup, also where it was
 *             deleted), the floor untouched: only while daemon 0 holds the
 *             number and keeps its lease (STALL0=0, CRASHES=0), and not
 *             after etcd confirmed it for giving the number up (from there
 *             the number is as good as free).  A mark lowered under a number
 *             nobody holds, or whose holder then stalls or crashes, is
 *             covered by no rule (docs/fences.md; expected failure
 *             'lowstall' in model/check.sh).  RESTORE: a
 *             snapshot of etcd's state (workers/, hwm/, floor, leases alive,
 *             revision) is taken at any moment; later etcd reverts to it
 *             (requests in flight still applied afterwards).  NEWID=1 (the
 *             procedure, R-A): the restored cluster has a new cluster ID;
 *             NEWID=0: the token kept (with GAP=0 the procedure's other
 *             form, the members fenced before any daemon reaches them; with
 *             GAP=1 the operator forgot both: the expected failures).
 *             REFILL: after a restore, other clients' writes bring the
 *             revision back to the highest it ever was, so that "revision
 *             went back" alone stops firing.  Then `snowid fence` writes a
 *             new token, the cluster ID it wrote on, and claims_above =
 *             max(claims_above, floor, every mark, wall + AHEAD + W +
 *             LEADPREV) (R-F), at once (GAP=0) or at any later moment
 *             (GAP=1: requests and daemon starts reach the restored cluster
 *             before the fence).  EMPTYSNAP: the snapshot is taken before
 *             the cluster's first write, so the restore leaves no cluster;
 *             a daemon that starts on it makes the cluster anew above the
 *             clock bound, claims_above = floor = wall + AHEAD + W (R-H),
 *             unless a witness is there (rule 7: it halts until a fence),
 *             and a daemon that knew the cluster halts on the one made
 *             anew.  LOSTFENCE: the snapshot predates the fence whose lead
 *             (LEADPREV) hosts run, so the fence cannot read that lead from
 *             the store: it adds it only from a witness or the operator
 *             (LOSTLEAD, --lost-lead), and without either it refuses: it
 *             waits (R-G).  A daemon halted on a cluster it knew (rule 5)
 *             first writes a witness (rule 7): its highest deadline and the
 *             fence it knew, which the fence claims above.  WITFIRST: the
 *             cluster is made anew only once every holder left its
 *             witness.
 *   clocks    every `now` (daemon or client) is chosen freely in 0..T-1 at
 *             each use: clocks stepping back and forward, and hosts that
 *             disagree, are all covered.  `wall` is the fencing host's wall
 *             clock in ID time, a ghost that only grows.  The ASSUMPTION of
 *             docs/fences.md (no host's deadline more than ahead + window
 *             past it, LEADPREV more while a previous fence's lead may not
 *             have slewed back) is modelled as: a mark etcd acknowledges
 *             happens at a wall time at or past mark - AHEAD - W - LEADPREV
 *             (the wall clock catches up with it).  HOSTAHEAD: host 0 runs
 *             past that bound (its marks move no wall clock); only its
 *             re-raising (rule 6), the settle pause and its stop (R-E)
 *             cover it, and only while it is alive (STALL0=0).  Sequence
 *             bits are 0: one value per ms, which keeps the counter's
 *             semantics (values only grow).
 *   daemons   one per host: read the fence (its token and cluster ID)
 *             and the answer's cluster ID (a daemon starting on a cluster
 *             other than its fence's halts), grant, scan (any free number),
 *             claim (RETRY=1: a lease carries a new attempt after the
 *             store refused the last outright, as the code's does while
 *             half its TTL is left; RETRY=0: one, as once that has
 *             passed; start = max(now, hwm + 1,
 *             claims_above + 1, own last deadline + 1), a number with no
 *             mark starts above the floor and compares floor < start: rule
 *             3), settle a claim whose answer never came, publish (the
 *             generation protocol), renew with the guarded mark, keepalive.
 *             Every answer, scan, read-back and keepalive is checked: a
 *             cluster ID other than its fence's (R-A) or a revision lower
 *             than the highest seen (R-B, rule 5): act on nothing, halt
 *             until a fence names the cluster it answers from.  A renewal
 *             read-back of its own mark with a mod revision below the one
 *             etcd acknowledged, or of its workers/<n> gone while its lease
 *             is alive (R-C), or a lease unknown before its TTL could have
 *             run out (R-D): restored, as well.  A renewal read-back with
 *             the mark absent or below the acknowledged value: re-raise it
 *             (CAS on the mod revision) before anything else (rule 4).  A
 *             number is given up (a lost lease, a lost claim, MOVES, a stop)
 *             only once etcd confirmed its mark >= the deadline published
 *             for it, raising it if needed (rule 4); a stop (STOPS, SIGTERM)
 *             that cannot confirm does not revoke (R-E).  SIDE=1 (without
 *             restores and crashes): in the daemon's order, the give-up's
 *             confirmation runs beside the next grant, scan and claim, in a
 *             process of its own (a raiser, one raise at a time), and keeps
 *             the lease alive until it is confirmed; a stop waits for it.
 *             Without SIDE the daemon confirms first, then claims.
 *             KAFLIGHT=1: the keepalive runs beside the extension and the
 *             raise of a held number, as the daemon's do: the keepalive's
 *             answer that the lease is gone may come while either is in
 *             flight, and is acted on at once; the request in flight is
 *             still applied whenever the store gets to it, its answer not
 *             looked at (as a lost one, in configurations where no other
 *             answer is lost).  A new fence: re-
 *             raise every number published (rule 6), then wait the settle
 *             pause (no claim until every other daemon that is alive has
 *             adopted it and re-raised its own), then claim again.  Crash
 *             and restart at chosen points (a crash mid-switch leaves gen
 *             odd; the new process remembers nothing it published).
 *   clients   C per host, sharing the host's segment: read gen, read worker
 *             and deadline, take a counter value, check it, re-read gen.
 *
 * Decisions of daemon/rules/ the model does not make (tests/check-rules.py
 * reads this list): rules not made here: rule5_lease_until (a lease's
 * time is KEPT(h), with no clock for it); rule5_taken_back (the model
 * revokes no lease early, so a lease unknown early is always a restore
 * here, with no read-back to tell).
 *
 * Left out: the layout key and rule 7 (a lost layout: IDs of two layouts
 * are not modelled), a deleted floor or fence key, the slack of rule 3
 * (SLACK, 0 by default: it only spares failed claims), the "published in
 * the last hour" horizon, more than one restore (a second one is the
 * LEADPREV configuration: hosts ahead by the first fence's lead, and the
 * fence adding it), the daemon's own log/healthz reports, batches, and the
 * daemon remembering its deadlines across a crash (the fence's assumption
 * covers a crashed daemon's clients).
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
 * fail in a configuration where the model passes:
 *   1 rule 1: no fence compare, and the fence in answers not looked at
 *   2 rule 2: a mark write does not raise the floor
 *   3 rule 3: a claimed number starts at now, not max(now, hwm + 1)
 *   4 rule 3: a number with no mark starts at max(now, 1), floor ignored
 *   5 rule 3: claims after a fence ignore claims_above
 *   6 rule 3: the claim start ignores this daemon's own last deadline
 *   7 rule 4: a renewal that reads back its mark absent or low does not
 *     raise it: the number is abandoned (revoked, claimed again)
 *   8 rule 4: a number given up without its mark confirmed
 *   9 rule 5 (R-B): revisions are not compared
 *  10 rule 6: a new fence: the numbers published are not re-raised
 *  11 rule 6: no settle pause after a new fence
 *  12 R-A: the cluster ID of answers is not compared
 *  13 R-C: forgotten own writes are not looked for
 *  14 R-D: a lease unknown before its TTL ran out is taken as expired
 *  15 R-E: a stop revokes its lease without confirming the mark
 *  16 R-F: claims_above without the clock bound: max(floor, marks)
 *  17 R-F: claims_above without the lead of the previous fence
 *  18 rule 10: the deadline published when the renewal is sent
 *  19 rule 12: the client skips its second read of gen
 *  20 rule 11: the renewal is guarded only on the lease (not "mark < V")
 *  21 rule 9: another claim attempt under the lease after one whose
 *     answer never came, the read-back adopting the last
 *  23 R-H: a cluster made anew claims above 0, not above the clock bound
 *  24 rule 7: a daemon makes the cluster on a store that holds a witness
 *  25 rule 7: the fence ignores what witnesses say (deadline, lost lead)
 *  26 R-G: the fence does not refuse a restored store without a witness
 *     or --lost-lead
 *  27 rule 4 (SIDE): a number given up keeps its lease alive no longer
 *     while its mark is confirmed
 *  22 an experiment, not a code mutant: the within-client check expects a
 *     decrease; its failure shows the check is evaluated on pairs of IDs of
 *     one client.
 */
#ifndef MUTANT
#define MUTANT 0
#endif

#define H 2       /* hosts */
#ifndef C
#define C 2       /* clients per host (check.sh runs C=1 in CI; see docs/model.md) */
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
#ifndef LOWERS
#define LOWERS 0  /* marks lowered by an operator (a script, a key put back from a backup) */
#endif
#ifndef RESTORE
#define RESTORE 0 /* 1: one snapshot, one restore, one fence */
#endif
#ifndef GAP
#define GAP 0     /* 1: requests may reach the restored cluster before the fence */
#endif
#ifndef NEWID
#define NEWID 1   /* 1: a restored cluster has a new cluster ID (R-A) */
#endif
#ifndef REFILL
#define REFILL 1  /* 1: after a restore the revision climbs back (other writes) */
#endif
#ifndef AHEAD
#define AHEAD 0   /* snowid fence --ahead, in model ms */
#endif
#ifndef LEADPREV
#define LEADPREV 0 /* a previous fence's lead, not yet slewed back */
#endif
#ifndef HOSTAHEAD
#define HOSTAHEAD 0 /* 1: host 0's deadlines may run past the clock bound */
#endif
#ifndef EMPTYSNAP
#define EMPTYSNAP 0 /* 1: the snapshot holds no cluster (taken before it was made) */
#endif
#ifndef LOSTFENCE
#define LOSTFENCE 0 /* 1: the snapshot predates the fence whose lead is LEADPREV */
#endif
#ifndef LOSTLEAD
#define LOSTLEAD 0 /* 1: the operator passes that lead (snowid fence --lost-lead) */
#endif
#ifndef WITFIRST
#define WITFIRST 0 /* 1: a daemon makes the cluster only after every holder left its witness */
#endif
#ifndef STALLS
#define STALLS 1  /* stalls of a daemon past its lease TTL */
#endif
#ifndef STALL0
#define STALL0 1  /* 0: daemon 0 never stalls */
#endif
#ifndef STOPS
#define STOPS 0   /* stops (SIGTERM) of daemon 0 */
#endif
#ifndef STOPAFTER
#define STOPAFTER 0 /* 1: the stop comes only after the fence */
#endif
#ifndef MOVES
#define MOVES 0   /* moves to a fresh number, per daemon */
#endif
#ifndef CTRIES
#define CTRIES 2  /* attempts to confirm a mark before giving a number up */
#endif
#ifndef RETRY
#define RETRY 0   /* 1: a claim refused outright is followed by another under its lease */
#endif
#ifndef SIDE
#define SIDE 0    /* 1: the raise that gives a number up runs beside the next acquisition */
#endif
#ifndef KAFLIGHT
#define KAFLIGHT 0 /* 1: a keepalive's answer may come while an extension or raise is in flight */
#endif
#if SIDE && (RESTORE || CRASHES > 0)
#error SIDE is modelled without restores and crashes
#endif
#if SIDE
#define HA (2 * H) /* answer slots: each daemon's, then each one's raiser's */
#else
#define HA H
#endif
#ifndef SLACK
#define SLACK 0
#endif
#define FAULTS (DELS > 0 || RESTORE || LOWERS > 0)
/* leases expire only once their daemon stops keeping them alive (a stall,
 * a crash, a stop, a revocation): with restores and with lowered marks.
 * Elsewhere any lease may expire at any moment, a superset. */
#define STALLING (RESTORE || LOWERS > 0)
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
byte fcid = 1;      /* the cluster ID the fence was written on (R-A) */
byte cabove;        /* the fence's claims_above */
byte erev = 1;      /* the revision: layout, fence and floor written at 1 */
byte ecid = 1;      /* header.cluster_id */
bool alive[LMAX + 1];
byte nlease = 1;
byte ntok = 1;
byte curL[H];       /* the lease each daemon keeps alive; 0: none */
byte stalls[H];
byte adopted[H];    /* the fence token each daemon adopted and re-raised for */
byte wall;          /* ghost: the fencing host's wall clock, in ID time */
#if EMPTYSNAP || LOSTFENCE
byte wit;           /* rule 7: the highest deadline + 1 any witness gives */
bool witd;          /* a witness was written */
bool fmade;         /* the fence is one a daemon made the cluster with */
#endif

#if RESTORE
byte phase;         /* 0, 1 snapshot taken, 2 restored, 3 fenced */
byte s_owner[N];
byte s_otok[N];
byte s_hwm[N];
byte s_hrev[N];
byte s_floor;
byte s_erev;
bool s_alive[LMAX + 1];
#if REFILL
byte rmax;          /* ghost: the highest revision etcd ever reached */
bool refilled;
#endif
#endif
#if FAULTS
byte faults;        /* ghost: deletions and restores so far */
byte hmax[N];       /* ghost: the highest mark ever acknowledged */
#endif
#if DELS > 0
byte dels;
#endif
#if LOWERS > 0
byte lowers;
bool giving0;       /* ghost: daemon 0 is confirming a mark to give its number up */
bool gone0;         /* ghost: etcd confirmed it: from here the number is as good as free */
#define GONE0(h) if :: h == 0 -> gone0 = 1 :: else -> skip fi
#define GIVING0(h) if :: h == 0 -> giving0 = 1 :: else -> skip fi
#define HOLD0(h) if :: h == 0 -> giving0 = 0; gone0 = 0 :: else -> skip fi
#else
#define GONE0(h) skip
#define GIVING0(h) skip
#define HOLD0(h) skip
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
byte ans[HA];        /* 0 none, 1 succeeded, 2 failed */
bool ans_ours[HA];   /* read back: workers/<n> has our lease and token */
byte ans_hwm[HA];    /* read back: the stored mark */
byte ans_hrev[HA];   /* read back: its mod revision (0: absent) */
byte ans_ft[HA];     /* read back: the fence token */
byte ans_rev[HA];    /* header.revision */
byte ans_cid[HA];    /* header.cluster_id */
byte hold[HA];       /* the daemon's current holding */
#if SIDE
byte rq_n[H], rq_d[H], rq_L[H]; /* the raise handed to daemon h's raiser */
bool rq_on[H];
byte rkeep[H];      /* the lease daemon h keeps alive for its raise; 0: none */
#if MUTANT == 27
#define RKEPT(l) (0)
#else
#define RKEPT(l) (rkeep[0] == (l) || rkeep[1] == (l))
#endif
#define STALL_RKEEP(h) rkeep[h] = 0
#else
#define RKEPT(l) (0)
#define STALL_RKEEP(h) skip
#endif

/* ---- segments ---- */
byte gen[H];
byte sworker[H];
byte sdead[H];
byte line[H * LINES];
byte epoch[H];      /* ghost: bumped by a switch that does not follow */

/* ---- ghosts ---- */
bool used[N * T];

#if MUTANT == 1
#define FENCE_OK(i) (1)
#define NEWFENCE(h) (0) /* nor does the daemon look at the fence on answers */
#else
#define FENCE_OK(i) (ftok == req[i].ft)
#define NEWFENCE(h) (ans_ft[h] != myft)
#endif

/* rule 3: a claim of a number with no mark compares floor < start
 * (rules: rule3_mark) */
#if MUTANT == 4
#define FLOOR_OK(i) (1)
#else
#define FLOOR_OK(i) (req[i].rev != 0 || floor + W < req[i].v)
#endif

/* R-A and R-B: an answer from a cluster other than the fence's, or with a
 * revision below the highest seen, is acted on for nothing (rules:
 * rule5_answer) */
#if MUTANT == 12
#define CID_BAD(c) (0)
#else
#define CID_BAD(c) ((c) != mycid)
#endif
#if MUTANT == 9
#define REV_BAD(r) (0)
#else
#define REV_BAD(r) ((r) < seen)
#endif
#if RESTORE
#define ANS_STALE(h) (CID_BAD(ans_cid[h]) || REV_BAD(ans_rev[h]))
#define READ_STALE (CID_BAD(ecid) || REV_BAD(erev))
#else
/* without restores neither ever differs: left out, to stay small */
#define ANS_STALE(h) (0)
#define READ_STALE (0)
#endif

/* a revision bumped; the highest one kept for REFILL */
inline bump() {
        erev++;
#if RESTORE && REFILL
        if :: rmax < erev -> rmax = erev :: else -> skip fi
#endif
}

/* a mark write: the mark, its revision, the floor (rule 2); the wall clock
 * is at least mark - AHEAD - W - LEADPREV then (the ASSUMPTION), unless the
 * host runs past the bound (HOSTAHEAD, host 0) */
inline put_mark(n, val, hst) {
        hwm[n] = val;
        bump();
        hrev[n] = erev;
#if MUTANT != 2
        if :: floor < val -> floor = val :: else -> skip fi;
#endif
        if
        :: (!HOSTAHEAD || hst != 0) && wall + AHEAD + W + LEADPREV < val ->
                wall = val - AHEAD - W - LEADPREV
        :: else -> skip
        fi;
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
                        put_mark(n, req[i].v, req[i].host);
                        res = 1
                :: else -> skip
                fi
        :: req[i].kind == R_EXTEND ->
                if
#if MUTANT == 20
                :: owner[n] == req[i].lease && otok[n] == req[i].tok && FENCE_OK(i) ->
#else
                :: owner[n] == req[i].lease && otok[n] == req[i].tok && FENCE_OK(i) &&
                   hrev[n] != 0 && hwm[n] < req[i].v -> /* an absent value compares false */
#endif
                        put_mark(n, req[i].v, req[i].host);
                        res = 1
                :: else -> skip
                fi
        :: req[i].kind == R_RAISE ->
                if
                :: FENCE_OK(i) && hrev[n] == req[i].rev ->
                        put_mark(n, req[i].v, req[i].host);
#if LOWERS > 0
                        if :: req[i].host == 0 && giving0 -> gone0 = 1 :: else -> skip fi;
#endif
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
                ans_ft[req[i].host] = ftok
#if RESTORE
                ;
                ans_rev[req[i].host] = erev;
                ans_cid[req[i].host] = ecid
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

/* a lease expires only once no daemon keeps it alive; without restores a
 * daemon cannot tell an expiry from a forgotten lease, nor needs to (R-D):
 * there any lease may expire at any moment, a superset of the stalls */
#if STALLING
#define MAY_EXPIRE(l) (curL[0] != l && curL[1] != l && !RKEPT(l))
#define KEPT(h) (curL[h] == L)
#else
#define MAY_EXPIRE(l) (1)
#define KEPT(h) (0)
#endif

#if RESTORE && STOPAFTER
#define STOP_OK (phase == 3)
#else
#define STOP_OK (1)
#endif

#if DELS > 0
/* an operator deletes hwm/<n> */
inline delete_mark(n) {
        dels++;
        faults++;
        hwm[n] = 0;
        hrev[n] = 0;
        bump()
}
#endif

#if LOWERS > 0
/* an operator writes hwm/<n> lower than the highest mark acknowledged (a
 * script, or the key put back from a backup, also where it was deleted);
 * the floor is left as it is.  Only a number daemon 0 holds and keeps
 * alive: a lowered mark is covered while its holder lives and gives the
 * number up itself (rule 4); a holder that stalls or crashes first, or a
 * mark lowered under a number nobody holds, is not covered by any rule
 * (docs/fences.md) */
#define LBOUND(n) (hrev[n] != 0 -> hwm[n] : hmax[n])
#define LOWER_OK(n) (lowers < LOWERS && curL[0] != 0 && owner[n] == curL[0] && !gone0 && LBOUND(n) > 0)
inline lower_mark(n) {
        lowers++;
        faults++;
        if
        :: hwm[n] = 0
        :: LBOUND(n) > 1 -> hwm[n] = 1
#if T > 2
        :: LBOUND(n) > 2 -> hwm[n] = 2
#endif
#if T > 3
        :: LBOUND(n) > 3 -> hwm[n] = 3
#endif
        fi;
        bump();
        hrev[n] = erev
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
#if NEWID
        ecid = 2;   /* the procedure: a new --initial-cluster-token */
#endif
#if EMPTYSNAP
        ftok = 0; fcid = 0; cabove = 0; /* no cluster: no fence either */
#endif
        faults++;
        phase = 2
}

/* What the fence knows of the previous fence's lead: the store holds that
 * fence, unless the restore lost it (LOSTFENCE) or the cluster with it
 * (EMPTYSNAP); then only a witness of it (rule 7) or the operator
 * (--lost-lead) says it.  Without either, on a restored store, the fence
 * refuses: it waits (R-G).  What is left of a lead is LEADPREV, not slewed
 * (rules: rule6_lead_left); the refusal is rules: rule7_fence_refuses */
#if EMPTYSNAP || LOSTFENCE
#define LEAD_LEFT 0                    /* the store holds no fence of that lead */
#if MUTANT == 17
#define WIT_LEAD 0
#else
#define WIT_LEAD (witd * LEADPREV)     /* a witness's fence's lead, not slewed */
#endif
#if MUTANT == 26
#define FENCE_MAY (1)
#else
#define FENCE_MAY (LOSTLEAD || witd || (EMPTYSNAP && ftok != 0))
#endif
/* the store restored without the fence it knew: a cluster made anew holds a
 * fence of its own */
#define FENCELESS (!(EMPTYSNAP && ftok != 0))
#else
#if MUTANT == 17
#define LEAD_LEFT 0
#else
#define LEAD_LEFT LEADPREV             /* the stored fence's lead, not slewed */
#endif
#define WIT_LEAD 0
#define FENCE_MAY (1)
#define FENCELESS (0)
#endif
#define LOST_LEAD (LOSTLEAD * LEADPREV) /* --lost-lead */
/* the largest lead that may be left (rules: rule6_fence_lead) */
#if MUTANT == 25
#define FENCE_LEAD (LOST_LEAD > LEAD_LEFT -> LOST_LEAD : LEAD_LEFT)
#else
#define FENCE_LEAD (LOST_LEAD > LEAD_LEFT && LOST_LEAD > WIT_LEAD -> LOST_LEAD : \
                    (LEAD_LEFT > WIT_LEAD -> LEAD_LEFT : WIT_LEAD))
#endif
#if EMPTYSNAP || LOSTFENCE
#define WIT_DEADLINE wit
#define WITNESSED witd
#else
#define WIT_DEADLINE 0
#define WITNESSED 0
#endif

/* snowid fence (R-F): a new token, the cluster ID it writes on, and
 * claims_above = max(claims_above, floor, every mark, wall + ahead + window
 * + the lead that may be left, every witness's deadline) (rules:
 * rule6_clock_bound, rule6_fence_lead, rule6_fence_above).  Each decision
 * is noted for model/replay.c. */
inline fence() {
        printf("@rule7_fence_refuses %d %d %d = 0\n", FENCELESS, WITNESSED, LOSTLEAD);
#if !(EMPTYSNAP || LOSTFENCE)
        printf("@rule6_lead_left %d = %d\n", LEADPREV, LEAD_LEFT);
#endif
        printf("@rule6_fence_above %d %d %d %d %d %d %d %d", wall + AHEAD + W, LEAD_LEFT, WIT_LEAD,
               WIT_DEADLINE, LOST_LEAD, cabove, floor, (N > 1 && hwm[N - 1] > hwm[0] -> hwm[N - 1] : hwm[0]));
        ftok = 2;
        fcid = ecid;
#if EMPTYSNAP || LOSTFENCE
        fmade = 0;
        /* rule 7: above every witness's deadline */
#if MUTANT != 25
        if :: cabove < wit -> cabove = wit :: else -> skip fi;
#endif
#endif
        if :: cabove < floor -> cabove = floor :: else -> skip fi;
        if :: cabove < hwm[0] -> cabove = hwm[0] :: else -> skip fi;
#if N > 1
        if :: cabove < hwm[1] -> cabove = hwm[1] :: else -> skip fi;
#endif
#if MUTANT != 16
        if
        :: cabove < wall + AHEAD + W + FENCE_LEAD -> cabove = wall + AHEAD + W + FENCE_LEAD
        :: else -> skip
        fi;
#endif
        printf(" = %d\n", cabove);
        bump();
        phase = 3
}
#endif

#if EMPTYSNAP
/* a daemon makes the cluster on a store that holds none (rule 7: only
 * without a witness), above the clock bound a fence claims above (R-F)
 * (rules: rule7_made_above) */
#if MUTANT == 23
#define MADE_ABOVE 0
#else
#define MADE_ABOVE (wall + AHEAD + W)
#endif
inline make_cluster() {
        printf("@rule7_made_above %d %d %d = %d\n", AHEAD, wall, W, MADE_ABOVE);
        ftok = 3; fcid = ecid; fmade = 1;
        if :: cabove < MADE_ABOVE -> cabove = MADE_ABOVE :: else -> skip fi;
        if :: floor < cabove -> floor = cabove :: else -> skip fi;
        bump()
}
#endif
#if EMPTYSNAP || LOSTFENCE
/* rule 7: a daemon halted on a cluster it knew writes down its highest
 * deadline and the fence it knew (the lead of a fence the store lost) */
inline witness() {
        if
        :: myft != 0 ->
                witd = 1;
                if :: wit < pubd[0] -> wit = pubd[0] :: else -> skip fi;
#if N > 1
                if :: wit < pubd[1] -> wit = pubd[1] :: else -> skip fi
#endif
        :: else -> skip
        fi
}
#define FMADE fmade
#else
#define FMADE 0
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
#if STALLING
        /* a daemon stalls past its TTL: its lease may expire from now on */
#if STALL0
        :: atomic { stalls[0] < STALLS && curL[0] != 0 -> curL[0] = 0; STALL_RKEEP(0); stalls[0]++ }
#endif
        :: atomic { stalls[1] < STALLS && curL[1] != 0 -> curL[1] = 0; STALL_RKEEP(1); stalls[1]++ }
#endif
#if DELS > 0
        :: atomic { dels < DELS && hrev[0] != 0 -> delete_mark(0) }
#if N > 1
        :: atomic { dels < DELS && hrev[1] != 0 -> delete_mark(1) }
#endif
#endif
#if LOWERS > 0
        :: atomic { LOWER_OK(0) -> lower_mark(0) }
#if N > 1
        :: atomic { LOWER_OK(1) -> lower_mark(1) }
#endif
#endif
#if RESTORE
#if EMPTYSNAP
        /* before the cluster's first write: a snapshot that holds none of it */
        :: atomic { phase == 0 && erev == 1 -> snapshot() }
#else
        :: atomic { phase == 0 -> snapshot() }
#endif
#if GAP
        :: atomic { phase == 1 -> restore() }
        :: atomic { phase == 2 && FENCE_MAY -> fence() }
#else
        :: atomic { phase == 1 -> restore(); if :: FENCE_MAY -> fence() :: else -> skip fi }
        :: atomic { phase == 2 && FENCE_MAY -> fence() }
#endif
#if REFILL
        /* other clients' writes: the revision back at the highest it was */
        :: atomic { phase >= 2 && !refilled && erev < rmax -> erev = rmax; refilled = 1 }
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

/* a request whose answer will not be looked at: still applied later (if
 * not yet), its answer then lost */
inline abandon(h, slot) {
        if
        :: req[slot].kind != 0 && req[slot].host == h && req[slot].hold == hold[h] ->
                req[slot].orphan = 1
        :: else -> skip
        fi;
        ans[h] = 0
}

/* waits for the answer, or gives up (the timeout): a request given up on
 * may still be applied later, and its answer is then lost */
inline await(h, slot) {
        if
        :: atomic { ans[h] != 0 -> skip }
#if LOSS
        :: atomic { abandon(h, slot) }
#endif
        fi
}

/* await() for a held number's extension or raise; KAFLIGHT: or, the
 * keepalive beside it answering first that the lease is gone, the
 * keepalive's answer acted on (goto keepalive), the request's not */
#if KAFLIGHT
#define AWAIT_HELD(h, slot) \
        if \
        :: await(h, slot) \
        :: atomic { ans[h] == 0 && !alive[L] -> abandon(h, slot); kalost = 0 }; slot = 0; V = 0; goto keepalive \
        fi
#else
#define AWAIT_HELD(h, slot) await(h, slot)
#endif

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

/* R-C: the renewal read back its own mark with a mod revision below the one
 * etcd acknowledged for its last write of it: that write was forgotten
 * (rules: rule5_forgotten) */
#if RESTORE && MUTANT != 13
#define OWN_FORGOTTEN(h) (ans_hrev[h] != 0 && ans_hrev[h] < ackrev)
#else
#define OWN_FORGOTTEN(h) (0)
#endif
/* Notes for model/replay.c: rule 5's decision on an answer (the cluster
 * and revision it carries, against the cluster known and the highest
 * revision seen: 1 went back), on what a read found (the same, read
 * at once), and on a failed extension's read of its own mark (its mod
 * revision against the one acknowledged for this daemon's last write: 1
 * forgotten) */
#if RESTORE
#define NOTE_ANSWER(h) \
        if \
        :: ans[h] != 0 -> \
                printf("@rule5_answer %d %d %d %d = %d\n", mycid, ans_cid[h], seen, ans_rev[h], ANS_STALE(h)) \
        :: else -> skip \
        fi
#define NOTE_FOREIGN printf("@rule5_foreign_fence %d %d = %d\n", mycid, ecid, CID_BAD(ecid))
#define NOTE_READ printf("@rule5_answer %d %d %d %d = %d\n", mycid, ecid, seen, erev, READ_STALE)
#define NOTE_FORGOTTEN(h) \
        if \
        :: ans[h] == 2 && ans_ours[h] -> \
                printf("@rule5_forgotten %d %d = %d\n", ackrev, ans_hrev[h], OWN_FORGOTTEN(h)) \
        :: else -> skip \
        fi
#else
#define NOTE_ANSWER(h) skip
#define NOTE_READ skip
#define NOTE_FOREIGN skip
#define NOTE_FORGOTTEN(h) skip
#endif
inline forget_answer(h) {
        d_step {
                NOTE_ANSWER(h);
                ans[h] = 0; ans_ours[h] = 0; ans_hwm[h] = 0; ans_hrev[h] = 0; ans_ft[h] = 0;
                ans_rev[h] = 0; ans_cid[h] = 0
        }
}

/* rule 4's decision whether number cn's mark, as the store holds it now,
 * confirms cn's deadline cd (r: 1 it does, 0 not) */
#define CONFIRMED(r) printf("@rule4_confirmed %d %d %d = %d\n", hrev[cn] != 0, hwm[cn], cd, r)

/* forget_answer(h) for a mark extension's answer, noting what rule 4 made
 * of it (rules: rule4_extension; r: 0 extended, 1 not ours, 2 raise it):
 * model/replay.c replays each such line on the C decision */
inline forget_extension(h, r) {
        d_step {
                NOTE_ANSWER(h);
                NOTE_FORGOTTEN(h);
                printf("@rule4_extension %d %d %d %d = %d\n", ans[h] == 1, ans_ours[h],
                       (ans_hrev[h] != 0 -> ans_hwm[h] : 0), V, r);
                ans[h] = 0; ans_ours[h] = 0; ans_hwm[h] = 0; ans_hrev[h] = 0; ans_ft[h] = 0;
                ans_rev[h] = 0; ans_cid[h] = 0
        }
}

/* an answer acted on: its revision is the highest seen (R-B) */
#if RESTORE
inline heard(h) {
        if :: seen < ans_rev[h] -> seen = ans_rev[h] :: else -> skip fi
}
inline heard_now() {
        if :: seen < erev -> seen = erev :: else -> skip fi
}
#else
/* without restores revisions never go back: nothing to keep */
#define heard(h) skip
#define heard_now() skip
#endif

inline crash_point() {
        if
        :: h == 0 && crashes < CRASHES -> crashes++; goto crashed
        :: skip
        fi
}

/* The daemon's steps, as a trace of the daemon notes them (daemon/trace.h):
 * "<h>:!claimed n start mark" and so on, tagged with the daemon; the
 * claim start's decision is tagged too.  model/check.sh checks each
 * daemon's steps of a random run with model/replay.c, as a real trace. */
#define STEP_CLAIMING(a, b) printf("%d:!claiming %d %d\n", h, a, b)
#define STEP_CLAIMED(a, b, c) printf("%d:!claimed %d %d %d\n", h, a, b, c)
#define STEP_PUBLISH(a, b, c) printf("%d:!publish %d %d %d\n", h, a, b, c)
#define STEP_MARKED(a, b) printf("%d:!marked %d %d\n", h, a, b)
#define STEP_EXTEND(a, b) printf("%d:!extend %d %d\n", h, a, b)
#define STEP_DROPPED(a) printf("%d:!dropped %d\n", h, a)

/* what a daemon published: the deadline, for rule 3's own term and rule 6 */
#if FAULTS
inline published(num, d) {
        if :: pubd[num] < d + 1 -> pubd[num] = d + 1 :: else -> skip fi
}
#else
/* without faults a mark never falls below a deadline: rule 3's own term
 * and rule 6 need nothing kept */
#define published(num, d) skip
#endif

/* rule 6: a daemon that starts (or restarts) under a fence other than the
 * one its cluster was made with waits the settle pause as one that saw it
 * made (rules: rule6_settle_left_ms, where an old fence leaves no pause;
 * here the pause ends as soon as the other daemon adopted the fence or
 * holds no lease) */
#if RESTORE && MUTANT != 11
#define START_PAUSE if :: ftok != 1 && !FMADE -> pause = 1 :: else -> skip fi
#else
#define START_PAUSE skip
#endif

/* a daemon that starts on a store without the cluster makes it, unless a
 * witness shows the store forgot it (rule 7: then it halts until a
 * fence); WITFIRST: only once every holder has left its witness (rules:
 * rule7_may_make) */
#if EMPTYSNAP
#if MUTANT == 24
#define WIT_BLOCKS (0)
#else
#define WIT_BLOCKS (witd)
#endif
#define NOTE_MAKE(r) printf("@rule7_may_make %d %d = %d\n", ftok == 0, witd, r)
#define START_CREATE \
        if \
        :: ftok == 0 && WIT_BLOCKS -> NOTE_MAKE(0); goto restored \
        :: ftok == 0 && !WIT_BLOCKS && (!WITFIRST || witd || curL[1 - h] == 0) -> \
                NOTE_MAKE(1); make_cluster() \
        :: ftok != 0 -> skip \
        fi
#else
#define START_CREATE skip
#endif

#if RESTORE
#define ACKREV(r) ackrev = (r)
#define SEEN_START seen = erev
#define PUBD_ON 1
#else
/* only a restore forgets an acknowledged write: nothing to keep */
#define ACKREV(r) skip
#define SEEN_START skip
#endif

proctype Daemon(byte h) {
        byte L, n, start, mark, V, srev, shwm, sfl, sca, tok, slot, now, acked, renewals, f, s, li, crashes;
        byte attempts, myft, mycid, seen, ackrev, moves, cn, cd, crev, ctries, ret, i, stops;
        bool quit, pause, kalost;
        byte pubd[N];   /* deadline + 1 published for each number; 0: none */

        /* a daemon starts by reading the fence (its token and cluster ID)
         * and the cluster ID of the answer: another one is a restore not
         * yet fenced (R-A; rules: rule5_foreign_fence) */
        atomic {
                START_CREATE;
                myft = ftok; mycid = fcid; SEEN_START; START_PAUSE;
                NOTE_FOREIGN;
                if :: CID_BAD(ecid) -> goto restored :: else -> skip fi
        }
new_lease:
#if MUTANT != 11
        /* rule 6's settle pause: after a new fence, no claim until every
         * other daemon that is alive has adopted it and re-raised its marks
         * (rules: rule6_settle_ms, as long as the other daemon needs) */
        if
        :: pause -> atomic { adopted[1 - h] == ftok || curL[1 - h] == 0 -> pause = 0 }
        :: else -> skip
        fi;
#else
        pause = 0;
#endif
        /* grant */
        atomic {
                NOTE_READ;
                if
                :: READ_STALE -> goto restored
                :: !READ_STALE && nlease > LMAX -> goto done
                :: !READ_STALE && nlease <= LMAX ->
                        heard_now();
                        L = nlease; nlease++; alive[L] = 1; hold[h]++; attempts = 0; curL[h] = L;
                        HOLD0(h)
                fi
        }
scan:
        /* read the fence, a free number, its mark, the floor; pick a start */
        atomic {
                NOTE_READ;
                if
                :: READ_STALE -> goto restored
                :: else -> heard_now()
                fi;
                if
                :: ftok != myft -> goto refence
                :: else -> skip
                fi;
                if
                :: owner[0] == 0 -> n = 0
#if N > 1
                :: owner[1] == 0 -> n = 1
#endif
#if RETRY
                :: else -> goto scan /* all taken: read again under the lease */
#else
                :: else -> revoke(L); goto new_lease /* all taken: a new lease, later */
#endif
                fi;
                shwm = hwm[n]; srev = hrev[n]; sfl = floor; sca = cabove;
                pick_time(now);
                /* rules: rule3_claim_start */
                start = now;
                if
#if MUTANT == 3
                :: srev != 0 -> skip
#else
                :: srev != 0 -> if :: start <= shwm -> start = shwm + 1 :: else -> skip fi
#endif
#if MUTANT == 4
                :: else -> if :: start < 1 -> start = 1 :: else -> skip fi
#else
                :: else -> if :: start <= sfl + SLACK -> start = sfl + SLACK + 1 :: else -> skip fi
#endif
                fi;
#if MUTANT != 5
                if :: start <= sca -> start = sca + 1 :: else -> skip fi;
#endif
#if MUTANT != 6
                /* above the last deadline this daemon published for n */
                if :: start < pubd[n] -> start = pubd[n] :: else -> skip fi;
#endif
                printf("%d:@rule3_claim_start %d %d %d %d %d %d %d = %d\n", h, SLACK, now, srev != 0,
                       shwm, sfl, sca, pubd[n], start);
                STEP_CLAIMING(n, start);
                now = 0; shwm = 0; sfl = 0; sca = 0
        }
        /* claim: a lease carries no attempt after one whose answer never came */
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
        :: ans[h] != 0 && ANS_STALE(h) -> forget_answer(h); goto restored
        :: ans[h] != 0 && !ANS_STALE(h) && NEWFENCE(h) -> forget_answer(h); goto refence
        :: ans[h] == 1 && !ANS_STALE(h) && !NEWFENCE(h) ->
                heard(h); ACKREV(ans_hrev[h]); forget_answer(h); goto held
        :: ans[h] == 2 && !ANS_STALE(h) && !NEWFENCE(h) ->
                heard(h);
                forget_answer(h);
                /* refused outright, so nothing written: the lease carries
                 * the next attempt (rule 9; the code allows 4 while half
                 * the lease's TTL is left, RETRY=1 the model 2; RETRY=0,
                 * the code's way once that half has passed, a subset) */
#if RETRY || MUTANT == 21
                if :: attempts < 2 -> goto scan :: else -> skip fi;
#endif
                revoke(L); goto new_lease
        :: ans[h] == 0 -> skip /* no answer: settle by reading back */
        fi;
#if MUTANT == 21
        /* another attempt under the same lease, before settling */
        if :: attempts < 2 -> goto scan :: else -> skip fi;
        atomic {
                if
                :: owner[n] == L -> ACKREV(hrev[n]); goto held /* adopts the last attempt's start and mark */
                :: else -> skip
                fi
        }
#else
        atomic {
                NOTE_READ;
                if
                :: READ_STALE -> goto restored
                :: !READ_STALE && ftok != myft -> goto refence
                :: !READ_STALE && ftok == myft && owner[n] == L && otok[n] == tok && hwm[n] == mark ->
                        heard_now(); ACKREV(hrev[n]); goto held
                :: else -> heard_now()
                fi
        }
#endif
        revoke(L);
        goto new_lease;

held:
        /* publish: the generation protocol of shm_pub_switch() */
        atomic {
                STEP_CLAIMED(n, start, mark);
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
                STEP_PUBLISH(n, start, mark);
                published(n, mark);
                f = 0;
                s = 0;
                li = 0
        }
        gen[h]++;
        acked = mark;
        renewals = 0;

renew:
        /* renew: the guarded extension of the mark, and the keepalive */
        do
        :: renewals < RENEWALS ->
                renewals++;
                atomic { pick_time(now); V = now + W; now = 0 };
                if
                :: V >= T || V <= acked -> skip
                :: else ->
#if MUTANT == 18
                        atomic { sdead[h] = V; STEP_EXTEND(n, V); published(n, V) } /* before etcd acknowledged it */
#endif
                        send(h, R_EXTEND, n, L, tok, V, 0, slot);
                        crash_point();
                        AWAIT_HELD(h, slot);
                        slot = 0;
                        if
                        :: ans[h] == 0 -> skip
                        :: ans[h] != 0 && ANS_STALE(h) -> forget_answer(h); goto restored
                        :: ans[h] != 0 && !ANS_STALE(h) && NEWFENCE(h) -> forget_answer(h); goto refence
                        :: ans[h] != 0 && !ANS_STALE(h) && !NEWFENCE(h) ->
                                heard(h);
                                if
                                :: ans[h] == 1 || (ans_ours[h] && ans_hrev[h] != 0 && !OWN_FORGOTTEN(h) && ans_hwm[h] >= V) ->
                                        ACKREV(ans_hrev[h]);
                                        forget_extension(h, 0);
                                        acked = V;
                                        atomic {
                                                STEP_MARKED(n, V);
                                                if :: sdead[h] < V -> sdead[h] = V :: else -> skip fi;
                                                STEP_EXTEND(n, sdead[h]);
                                                published(n, V)
                                        }
                                :: ans[h] == 2 && ans_ours[h] && OWN_FORGOTTEN(h) ->
                                        /* R-C: our last write of the mark is gone */
                                        atomic { NOTE_FORGOTTEN(h); forget_answer(h) }; goto restored
                                :: ans[h] == 2 && ans_ours[h] && !OWN_FORGOTTEN(h) && (ans_hrev[h] == 0 || ans_hwm[h] < acked) ->
#if MUTANT == 7
                                        forget_extension(h, 1);
                                        revoke(L); goto new_lease /* abandoned */
#else
                                        /* rule 4: our claim, the mark absent or lowered: write it back
                                         * (rules: rule4_extension) */
                                        crev = ans_hrev[h];
                                        forget_extension(h, 2);
                                        send(h, R_RAISE, n, 0, 0, acked, crev, slot);
                                        crev = 0;
                                        AWAIT_HELD(h, slot);
                                        slot = 0;
                                        if
                                        :: ans[h] != 0 && ANS_STALE(h) -> forget_answer(h); goto restored
                                        :: ans[h] != 0 && !ANS_STALE(h) && NEWFENCE(h) -> forget_answer(h); goto refence
                                        :: ans[h] == 1 && !ANS_STALE(h) && !NEWFENCE(h) -> heard(h); ACKREV(ans_hrev[h])
                                        :: ans[h] == 2 && !ANS_STALE(h) && !NEWFENCE(h) -> heard(h)
                                        :: ans[h] == 0 -> skip
                                        fi;
                                        forget_answer(h) /* the next renewal reads it back again */
#endif
                                :: ans[h] == 2 && ans_ours[h] && !OWN_FORGOTTEN(h) && ans_hrev[h] != 0 && ans_hwm[h] >= acked && ans_hwm[h] < V ->
                                        forget_answer(h) /* not reached: such a renewal succeeds */
                                :: ans[h] == 2 && !ans_ours[h] ->
                                        forget_extension(h, 1);
                                        kalost = 1; goto keepalive /* is the lease alive? */
                                fi
                        fi;
                        V = 0
                fi
        :: atomic { !alive[L] -> kalost = 0 }; goto keepalive
#if MOVES > 0
        :: atomic { moves < MOVES -> moves++; cn = n; cd = acked; STEP_DROPPED(n) }; goto giveup /* a move to a fresh number */
#endif
#if STOPS > 0
        :: atomic { h == 0 && stops < STOPS && STOP_OK ->
                stops++; quit = 1; cn = n; cd = acked; STEP_DROPPED(n) }; goto stop
#endif
        :: renewals >= RENEWALS -> break
        od;
        goto done;

keepalive:
        /* a keepalive's answer: the lease etcd knows, or not (R-C, R-D) */
        atomic {
                NOTE_READ;
                if
                :: READ_STALE -> goto restored
                :: else -> heard_now()
                fi;
                if
                :: alive[L] && !kalost -> goto renew /* not reached: asked only when gone */
#if MUTANT == 13
                :: alive[L] && kalost -> kalost = 0; cn = n; cd = acked; STEP_DROPPED(n); goto giveup
#else
                :: alive[L] && kalost -> kalost = 0; goto restored /* R-C: workers/<n> gone, lease alive */
#endif
#if MUTANT == 14
                :: !alive[L] && KEPT(h) -> kalost = 0; cn = n; cd = acked; STEP_DROPPED(n); goto giveup
#else
                :: !alive[L] && KEPT(h) -> kalost = 0; goto restored /* R-D: it could not have expired (rules: rule5_lease_answer) */
#endif
                :: !alive[L] && !KEPT(h) -> kalost = 0; cn = n; cd = acked; STEP_DROPPED(n); goto giveup /* lost */
                fi
        }

stop:
        /* SIGTERM (R-E): confirm the mark, then revoke; never confirmed: the
         * lease is left to expire */
#if MUTANT == 15
        atomic { CONFIRMED(1); revoke(L); curL[h] = 0 };
        goto end_exit;
#else
        goto giveup;
#endif

giveup:
#if SIDE
        /* the daemon's order: the raise that confirms cn's mark runs beside
         * the next acquisition (marks_raise()), keeps the lease alive and
         * revokes it once confirmed (rule 4) */
        atomic {
                rq_on[h] == 0 && rkeep[h] == 0 ->
                rq_n[h] = cn; rq_d[h] = cd; rq_L[h] = L; rq_on[h] = 1;
                if :: curL[h] == L -> rkeep[h] = L :: else -> skip fi; /* not if stalled */
                curL[h] = 0; cn = 0; cd = 0; L = 0
        };
        if
        :: quit -> atomic { rq_on[h] == 0 -> rkeep[h] = 0; goto end_exit } /* a stop waits for its raises */
        :: else -> goto new_lease
        fi;
#endif
        /* rule 4: number cn is given up only once etcd confirmed its mark at
         * or above cd, the deadline published for it (rules:
         * rule4_confirmed: CONFIRMED notes each decision).  Without deletions or
         * restores a mark never falls below an acknowledged value, so the
         * confirmation is immediate: it is left out of those builds. */
#if FAULTS && MUTANT != 8
confirm:
        atomic {
                GIVING0(h);
                NOTE_READ;
                if
                :: READ_STALE -> goto restored
                :: else -> heard_now()
                fi;
                if
                :: ftok != myft -> goto refence /* rule 6 raises it */
                :: ftok == myft && hrev[cn] != 0 && hwm[cn] >= cd ->
                        CONFIRMED(1); GONE0(h); goto confirmed
                :: ftok == myft && !(hrev[cn] != 0 && hwm[cn] >= cd) && ctries >= CTRIES ->
                        CONFIRMED(0); goto unconfirmed
                :: ftok == myft && !(hrev[cn] != 0 && hwm[cn] >= cd) && ctries < CTRIES ->
                        CONFIRMED(0); crev = hrev[cn]; ctries++
                fi
        }
        send(h, R_RAISE, cn, 0, 0, cd, crev, slot);
        crev = 0;
        await(h, slot);
        slot = 0;
        if
        :: ans[h] != 0 && ANS_STALE(h) -> forget_answer(h); goto restored
        :: ans[h] == 1 && !ANS_STALE(h) -> heard(h); forget_answer(h); goto confirmed
        :: ans[h] == 2 && !ANS_STALE(h) -> heard(h); forget_answer(h); goto confirm
        :: ans[h] == 0 -> goto confirm
        fi;
confirmed:
#else
confirm:
#endif
        atomic {
#if !(FAULTS && MUTANT != 8)
                CONFIRMED(1); /* given up at once: what the store holds then */
#endif
                ctries = 0; cn = 0; cd = 0;
                if
                :: ret != 0 -> ret = 0; goto refence_next
                :: ret == 0 && quit -> revoke(L); curL[h] = 0; goto end_exit /* a stop */
                :: ret == 0 && !quit -> revoke(L); goto new_lease
                fi
        }
unconfirmed:
        /* never confirmed: never given up; the daemon stays, or a stop exits
         * leaving the lease to expire (R-E) */
        atomic {
                ctries = 0; cn = 0; cd = 0; ret = 0;
                if
                :: quit -> curL[h] = 0; goto end_exit
                :: else -> goto done
                fi
        }

refence:
        /* rule 6: a fence naming this cluster (rules: rule6_fence_read, the
         * model's fences only grow): re-raise every number published (rules:
         * rule6_reraise), then claim again after the settle pause; rule 1:
         * nothing else from the answer that showed it */
        atomic {
                myft = ftok;
                mycid = fcid;
                SEEN_START;
                i = 0
        }
#if RESTORE
        /* a deadline at or below claims_above needs no raise: every claim
         * starts above it (rules: rule6_reraise) */
#if MUTANT == 10
#define RERAISE(i) (0)
#else
#define RERAISE(i) (pubd[i] - 1 > cabove)
#endif
#define NOTE_RERAISE(i, r) printf("@rule6_reraise %d %d = %d\n", pubd[i] - 1, cabove, r)
refence_loop:
        if
        :: i >= N -> goto refenced
        :: i < N && pubd[i] == 0 -> i++; goto refence_loop
        :: i < N && pubd[i] != 0 && !RERAISE(i) -> atomic { NOTE_RERAISE(i, 0); i++ }; goto refence_loop
        :: i < N && pubd[i] != 0 && RERAISE(i) ->
                atomic { NOTE_RERAISE(i, 1); cn = i; cd = pubd[i] - 1; ret = 1 }; goto confirm
        fi;
refence_next:
        i++;
        goto refence_loop;
#else
refence_next:
#endif
refenced:
        atomic {
                adopted[h] = ftok; pause = 1; i = 0;
                revoke(L);
                if
                :: quit -> curL[h] = 0; goto end_exit
                :: else -> skip
                fi
        }
        goto new_lease;

restored:
        /* rule 5: says `restored`, stops extending, waits for a fence that
         * names the cluster etcd answers from (not one a daemon made the
         * cluster anew with: rule 7) */
#if EMPTYSNAP || LOSTFENCE
        atomic { witness() };
#endif
        atomic { ftok != myft && fcid == ecid && !FMADE -> skip };
        goto refence;

crashed:
        /* a new daemon process: its holdings are new; the old lease is left
         * to expire; requests in flight may still be applied */
        skip;
        atomic {
                printf("%d:# snowidd (model): a new daemon process\n", h);
                hold[h]++;
                L = 0; n = 0; start = 0; mark = 0; V = 0; tok = 0; slot = 0; acked = 0; renewals = 0;
                ans[h] = 0; ans_ours[h] = 0; ans_hwm[h] = 0; ans_hrev[h] = 0; ans_ft[h] = 0;
                ans_rev[h] = 0; ans_cid[h] = 0;
                curL[h] = 0;
                pubd[0] = 0;
#if N > 1
                pubd[1] = 0;
#endif
                moves = 0; ackrev = 0; pause = 0; quit = 0;
                myft = 0; START_CREATE;
                myft = ftok; mycid = fcid; SEEN_START; START_PAUSE;
                if :: CID_BAD(ecid) -> goto restored :: else -> skip fi
        };
        goto new_lease;
done:
#if RESTORE
        /* a daemon that runs on: a new fence reaches it at a renewal, and it
         * re-raises what it published */
end_wait:
        atomic { ftok != myft && fcid == ecid -> quit = 1 };
        goto refence;
#endif
end_exit:
        skip
}
#if SIDE
/* The raise that gives daemon h's number up, beside its next acquisition
 * (rule 4, as at giveup: confirmed, or raised and read again; never
 * confirmed: the lease is left to expire).  One at a time per daemon. */
proctype Raiser(byte h) {
        byte cn, cd, L, crev, ctries, slot, myft, me;
        me = h + H; /* its answer slot */
end_idle:
        atomic { rq_on[h] && rq_L[h] != 0 -> cn = rq_n[h]; cd = rq_d[h]; L = rq_L[h]; rq_L[h] = 0; myft = ftok };
confirm:
        atomic {
                if
                :: hrev[cn] != 0 && hwm[cn] >= cd -> CONFIRMED(1); goto confirmed
                :: !(hrev[cn] != 0 && hwm[cn] >= cd) && ctries >= CTRIES -> CONFIRMED(0); goto unconfirmed
                :: !(hrev[cn] != 0 && hwm[cn] >= cd) && ctries < CTRIES ->
                        CONFIRMED(0); crev = hrev[cn]; ctries++
                fi
        }
        send(me, R_RAISE, cn, 0, 0, cd, crev, slot);
        crev = 0;
        await(me, slot);
        slot = 0;
        if
        :: ans[me] == 1 -> forget_answer(me); goto confirmed
        :: ans[me] == 2 -> forget_answer(me); goto confirm
        :: ans[me] == 0 -> goto confirm
        fi;
confirmed:
        atomic { revoke(L); rkeep[h] = 0; cn = 0; cd = 0; L = 0; ctries = 0; rq_on[h] = 0; goto end_idle };
unconfirmed:
        /* never confirmed: the lease stays kept while the daemon lives (a
         * stop exits, and leaves it to expire); this raiser takes no other */
        atomic { cn = 0; cd = 0; L = 0; ctries = 0; rq_on[h] = 0 };
end_stuck:
        false
}
#endif

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
#if MUTANT != 19
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
#if MUTANT == 22
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
#if MUTANT != 19
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
                adopted[0] = 1;
                adopted[1] = 1;
                run Etcd();
                run Daemon(0);
                run Daemon(1);
#if SIDE
                run Raiser(0);
                run Raiser(1);
#endif
                run Client(0, 0);
                run Client(1, 0);
#if C == 2
                run Client(0, 1);
                run Client(1, 1)
#endif
        }
}
