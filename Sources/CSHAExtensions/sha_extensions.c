// SHA-256 block compression with the x86 SHA extensions (SHA-NI), selected at run time.
// The message schedule and round structure follow Intel's "Intel SHA Extensions" white paper
// (2013); other CPUs fall back to DeltaCore's portable Swift implementation.
#include "sha_extensions.h"

static const uint32_t K[64] __attribute__((aligned(16))) = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
    0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
    0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
    0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2,
};

const uint32_t *deltasnap_sha256_constants(void) { return K; }

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#include <immintrin.h>

int deltasnap_sha256_hardware_available(void) {
    unsigned int eax, ebx, ecx, edx;
    if (!__get_cpuid(1, &eax, &ebx, &ecx, &edx)) return 0;
    int ssse3 = (ecx >> 9) & 1, sse41 = (ecx >> 19) & 1;
    if (!__get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx)) return 0;
    int sha = (ebx >> 29) & 1;
    return ssse3 && sse41 && sha;
}


// Four rounds on the schedule words in `w` (rounds 4g…4g+3).
#define ROUNDS(w, g)                                                         \
    do {                                                                     \
        __m128i m = _mm_add_epi32(w, _mm_load_si128((const __m128i *)&K[4 * (g)])); \
        cdgh = _mm_sha256rnds2_epu32(cdgh, abef, m);                         \
        m = _mm_shuffle_epi32(m, 0x0E);                                      \
        abef = _mm_sha256rnds2_epu32(abef, cdgh, m);                         \
    } while (0)

// The next four schedule words, replacing the oldest four `w0` (w1…w3 are newer, w3 newest).
#define SCHEDULE(w0, w1, w2, w3) \
    w0 = _mm_sha256msg2_epu32(_mm_add_epi32(_mm_sha256msg1_epu32(w0, w1), _mm_alignr_epi8(w3, w2, 4)), w3)

__attribute__((target("sha,sse4.1,ssse3")))
void deltasnap_sha256_blocks(uint32_t state[8], const uint8_t *data, size_t blocks) {
    const __m128i byteswap = _mm_set_epi64x(0x0c0d0e0f08090a0bULL, 0x0405060700010203ULL);
    // The instructions keep the state as ABEF and CDGH.
    __m128i dcba = _mm_loadu_si128((const __m128i *)&state[0]);
    __m128i hgfe = _mm_loadu_si128((const __m128i *)&state[4]);
    __m128i cdab = _mm_shuffle_epi32(dcba, 0xB1);
    __m128i efgh = _mm_shuffle_epi32(hgfe, 0x1B);
    __m128i abef = _mm_alignr_epi8(cdab, efgh, 8);
    __m128i cdgh = _mm_blend_epi16(efgh, cdab, 0xF0);

    for (; blocks > 0; blocks--, data += 64) {
        const __m128i abef_saved = abef, cdgh_saved = cdgh;
        __m128i w0 = _mm_shuffle_epi8(_mm_loadu_si128((const __m128i *)(data + 0)), byteswap);
        __m128i w1 = _mm_shuffle_epi8(_mm_loadu_si128((const __m128i *)(data + 16)), byteswap);
        __m128i w2 = _mm_shuffle_epi8(_mm_loadu_si128((const __m128i *)(data + 32)), byteswap);
        __m128i w3 = _mm_shuffle_epi8(_mm_loadu_si128((const __m128i *)(data + 48)), byteswap);
        ROUNDS(w0, 0);
        ROUNDS(w1, 1);
        ROUNDS(w2, 2);
        ROUNDS(w3, 3);
        for (int g = 4; g < 16; g += 4) {
            SCHEDULE(w0, w1, w2, w3); ROUNDS(w0, g);
            SCHEDULE(w1, w2, w3, w0); ROUNDS(w1, g + 1);
            SCHEDULE(w2, w3, w0, w1); ROUNDS(w2, g + 2);
            SCHEDULE(w3, w0, w1, w2); ROUNDS(w3, g + 3);
        }
        abef = _mm_add_epi32(abef, abef_saved);
        cdgh = _mm_add_epi32(cdgh, cdgh_saved);
    }

    __m128i feba = _mm_shuffle_epi32(abef, 0x1B);
    __m128i dchg = _mm_shuffle_epi32(cdgh, 0xB1);
    _mm_storeu_si128((__m128i *)&state[0], _mm_blend_epi16(feba, dchg, 0xF0));
    _mm_storeu_si128((__m128i *)&state[4], _mm_alignr_epi8(dchg, feba, 8));
}

#else

int deltasnap_sha256_hardware_available(void) { return 0; }

void deltasnap_sha256_blocks(uint32_t state[8], const uint8_t *data, size_t blocks) {
    (void)state; (void)data; (void)blocks;
    __builtin_trap();  // never called: hardware_available() is 0 here
}

#endif

/* One message hashed at once, with no allocation: the state digest hashes every record on its
   own, and a snapshot of a million records spent more time allocating than hashing. Only for a
   CPU where deltasnap_sha256_hardware_available() said 1: the caller asks once and remembers
   (CPUID is slow, and in a virtual machine it traps to the hypervisor). */
void deltasnap_sha256_oneshot(const uint8_t *data, size_t length, uint8_t out[32]) {
    uint32_t state[8] = {
        0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19,
    };
    size_t whole = length / 64;
    if (whole > 0) deltasnap_sha256_blocks(state, data, whole);
    uint8_t tail[128] = {0};
    size_t rest = length - whole * 64;
    for (size_t i = 0; i < rest; i++) tail[i] = data[whole * 64 + i];
    tail[rest] = 0x80;
    size_t blocks = rest + 9 <= 64 ? 1 : 2;
    uint64_t bits = (uint64_t)length * 8;
    for (int i = 0; i < 8; i++) tail[blocks * 64 - 1 - i] = (uint8_t)(bits >> (8 * i));
    deltasnap_sha256_blocks(state, tail, blocks);
    for (int i = 0; i < 8; i++) {
        out[4 * i] = (uint8_t)(state[i] >> 24);
        out[4 * i + 1] = (uint8_t)(state[i] >> 16);
        out[4 * i + 2] = (uint8_t)(state[i] >> 8);
        out[4 * i + 3] = (uint8_t)state[i];
    }
}
