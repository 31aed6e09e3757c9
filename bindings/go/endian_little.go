// SPDX-License-Identifier: MIT

//go:build 386 || amd64 || arm || arm64 || loong64 || mips64le || mipsle || ppc64le || riscv64 || wasm

package snowid

import "encoding/binary"

// native is the host's byte order: the handshake's integers are in it.
var native = binary.LittleEndian

// unpackBits splits the word at offset 100 of struct shm_ctl into its four
// bytes, in memory order: time_bits, worker_bits, seq_bits, lead_ms.
func unpackBits(w uint32) (tb, wb, sb, lead uint32) {
	return w & 0xff, w >> 8 & 0xff, w >> 16 & 0xff, w >> 24
}
