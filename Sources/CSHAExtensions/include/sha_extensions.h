// SHA-256 block compression with the CPU's SHA instructions, for DeltaCore's SHA256.
#ifndef DELTASNAP_SHA_EXTENSIONS_H
#define DELTASNAP_SHA_EXTENSIONS_H

#include <stddef.h>
#include <stdint.h>

/// The 64 round constants K of FIPS 180-4 §4.2.2, shared with the portable Swift code.
const uint32_t *deltasnap_sha256_constants(void);

/// 1 when this CPU has SHA-256 instructions that `deltasnap_sha256_blocks` uses, 0 otherwise.
int deltasnap_sha256_hardware_available(void);

/// Compresses `blocks` 64-byte blocks of `data` into `state` (FIPS 180-4 H0…H7) with the CPU's
/// SHA instructions. Call only when `deltasnap_sha256_hardware_available()` returned 1.
void deltasnap_sha256_blocks(uint32_t state[8], const uint8_t *data, size_t blocks);

void deltasnap_sha256_oneshot(const uint8_t *data, size_t length, uint8_t out[32]);

#endif
