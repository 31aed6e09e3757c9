// SPDX-License-Identifier: MIT
// The ES module face of index.js.
import snowid from './index.js';

export const { SnowId, decode, defaultLayout, DEFAULT_MAX_WAIT_US, DEFAULT_ASYNC_MAX_WAIT_US } = snowid;
export default snowid;
