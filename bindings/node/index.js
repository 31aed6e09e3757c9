// SPDX-License-Identifier: MIT
// snowid for Node.js: unique 64-bit IDs (BigInt) from the host's snowidd.
'use strict';

const path = require('node:path');

// The addon: $SNOWID_NODE_ADDON (a meson build's), else node-gyp's.
function load() {
    const p = process.env.SNOWID_NODE_ADDON;
    if (p)
        return require(path.resolve(p));
    try {
        return require('./build/Release/snowid.node');
    } catch (e) {
        if (e.code !== 'MODULE_NOT_FOUND')
            throw e;
    }
    return require('./build/Debug/snowid.node');
}

const addon = load();

/**
 * A handle on the host's snowidd segment.  Its methods are functions made
 * for this handle (own properties: a call goes straight to libsnowid).
 */
class SnowId {
    constructor(instance, options) {
        addon.open(this, instance, options);
    }

    /** Same as new SnowId(instance, options). */
    static open(instance, options) {
        return new SnowId(instance, options);
    }

    /** Decodes an ID under a layout (default: the default layout). */
    static decode(id, layout) {
        return addon.decode(id, layout);
    }
}

if (typeof Symbol.dispose === 'symbol') {
    Object.defineProperty(SnowId.prototype, Symbol.dispose, {
        value() { this.close(); }, writable: true, configurable: true,
    });
}

module.exports = {
    SnowId,
    decode: addon.decode,
    defaultLayout: addon.defaultLayout,
    DEFAULT_MAX_WAIT_US: addon.DEFAULT_MAX_WAIT_US,
    DEFAULT_ASYNC_MAX_WAIT_US: addon.DEFAULT_ASYNC_MAX_WAIT_US,
};
