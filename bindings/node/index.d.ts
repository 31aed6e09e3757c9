// SPDX-License-Identifier: MIT
// Types of snowid for Node.js.

/** How an ID is cut: timeBits + workerBits + seqBits === 63. */
export interface Layout {
    /** unix ms of ID time 0 (default 1735689600000, 2025-01-01Z) */
    epochMs: number;
    timeBits: number;
    workerBits: number;
    seqBits: number;
}

export interface Parts {
    /** ms since the layout's epoch */
    timeMs: number;
    /** epochMs + timeMs */
    unixMs: number;
    worker: number;
    sequence: number;
}

/** 'restored': the store was restored (nothing extended until fenced);
 * 'store_full': the store is full (nothing extended; 'etcd_full' before). */
export type State =
    'starting' | 'leased' | 'no_lease' | 'restored' | 'layout_lost' | 'retired' | 'store_full' | 'unknown';

export interface Status {
    worker: number;
    state: State;
    /** enum snowid_state of snowid.h */
    stateCode: number;
    /** odd while snowidd is switching segments */
    generation: number;
    /** last ID time (ms since the epoch) that may be used */
    deadlineMs: number;
    deadlineUnixMs: number;
    /** deadline minus ID time now; negative once passed */
    headroomMs: number;
    /** ID time minus CLOCK_MONOTONIC */
    offsetNs: bigint;
    daemonPid: number;
    /** true while snowidd publishes the TSC clock */
    tscClock: boolean;
}

/** Host-wide counts (all processes). */
export interface HostStats {
    issued: bigint;
    waitsCeiling: bigint;
    waitsDeadline: bigint;
    waitsSwitch: bigint;
    eagain: bigint;
    dropped: bigint;
}

export interface Options {
    /** How long a synchronous call may wait (and block the event loop), in
     * us; default DEFAULT_MAX_WAIT_US (10 ms).  0 never waits; Infinity as
     * long as it takes. */
    maxWaitUs?: number | bigint;
    /** How long nextAsync() and nextBatchAsync() go on trying on the libuv
     * threadpool after an EAGAIN, in us; default 100 ms. */
    asyncMaxWaitUs?: number | bigint;
}

/** An error of libsnowid: code 'EAGAIN', errno -11, syscall 'snowid_next'. */
export interface SnowIdError extends Error {
    code: string;
    errno: number;
    syscall: string;
}

export type IdLike = bigint | string | number;

/**
 * A handle on the host's snowidd segment (instance: $SNOWID_INSTANCE or
 * "default"; socket directory: $SNOWID_RUNTIME_DIR or /run/snowid).  Its
 * methods are bound to it: `const next = s.next` works.  Throws a
 * SnowIdError (ENOENT, ECONNREFUSED, EACCES, EPERM, ...) when it cannot open.
 */
export class SnowId {
    constructor(instance?: string | null, options?: Options);
    static open(instance?: string | null, options?: Options): SnowId;
    /** Decodes under a layout; the default layout when none is given. */
    static decode(id: IdLike, layout?: Partial<Layout>): Parts;

    /** One ID.  EAGAIN: none within the wait budget. */
    next(): bigint;
    /** One ID as its decimal string. */
    nextString(): string;
    /** n IDs (1 <= n <= 2^seqBits), increasing, from one atomic operation;
     * or fills the given array (its whole length) and returns it. */
    nextBatch(n: number): BigUint64Array;
    nextBatch<T extends BigUint64Array>(into: T): T;
    /** A UUIDv7 (RFC 9562) from one counter value, lower-case 8-4-4-4-12. */
    nextUuid7(): string;
    /** next() that, on EAGAIN, goes on trying on the threadpool for up to
     * asyncMaxWaitUs instead of blocking the event loop. */
    nextAsync(): Promise<bigint>;
    nextBatchAsync(n: number): Promise<BigUint64Array>;
    /** Decodes under this handle's layout. */
    decode(id: IdLike): Parts;
    readonly layout: Layout;
    status(): Status;
    hostStats(): HostStats;
    /** Sets the wait budget of synchronous calls (and of async ones). */
    setMaxWait(us: number | bigint, asyncUs?: number | bigint): void;
    /** Releases the segment; later calls give EINVAL.  Idempotent. */
    close(): void;
    readonly closed: boolean;
}

/** Decodes under a layout; the default layout when none is given. */
export function decode(id: IdLike, layout?: Partial<Layout>): Parts;
export function defaultLayout(): Layout;
export const DEFAULT_MAX_WAIT_US: number;
export const DEFAULT_ASYNC_MAX_WAIT_US: number;
