// SHA-256 (FIPS 180-4), incremental and synchronous: the snapshot trailer hashes everything it
// reads as it streams, and the state digest hashes each record. WebCrypto's digest is neither
// incremental nor synchronous. One compression function over a shared message schedule; the
// per-record path (`sha256Words`) allocates nothing.

const K = new Int32Array([
  0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5, 0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3,
  0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174, 0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
  0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967, 0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13,
  0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85, 0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
  0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3, 0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208,
  0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2,
]);
const initial = new Int32Array([0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19]);
const schedule = new Int32Array(64);

/** Compresses the 64-byte blocks of `bytes` from `offset` (`blocks` of them) into `h`. */
function compress(h: Int32Array, bytes: Uint8Array, offset: number, blocks: number): void {
  const w = schedule;
  let h0 = h[0]!, h1 = h[1]!, h2 = h[2]!, h3 = h[3]!, h4 = h[4]!, h5 = h[5]!, h6 = h[6]!, h7 = h[7]!;
  for (let block = 0; block < blocks; block++, offset += 64) {
    for (let i = 0, j = offset; i < 16; i++, j += 4) w[i] = (bytes[j]! << 24) | (bytes[j + 1]! << 16) | (bytes[j + 2]! << 8) | bytes[j + 3]!;
    for (let i = 16; i < 64; i++) {
      const a = w[i - 15]!;
      const b = w[i - 2]!;
      const s0 = ((a >>> 7) | (a << 25)) ^ ((a >>> 18) | (a << 14)) ^ (a >>> 3);
      const s1 = ((b >>> 17) | (b << 15)) ^ ((b >>> 19) | (b << 13)) ^ (b >>> 10);
      w[i] = (w[i - 16]! + s0 + w[i - 7]! + s1) | 0;
    }
    let a = h0, b = h1, c = h2, d = h3, e = h4, f = h5, g = h6, k = h7;
    for (let i = 0; i < 64; i++) {
      const t1 = (k + (((e >>> 6) | (e << 26)) ^ ((e >>> 11) | (e << 21)) ^ ((e >>> 25) | (e << 7))) + ((e & f) ^ (~e & g)) + K[i]! + w[i]!) | 0;
      const t2 = ((((a >>> 2) | (a << 30)) ^ ((a >>> 13) | (a << 19)) ^ ((a >>> 22) | (a << 10))) + ((a & b) ^ (a & c) ^ (b & c))) | 0;
      k = g;
      g = f;
      f = e;
      e = (d + t1) | 0;
      d = c;
      c = b;
      b = a;
      a = (t1 + t2) | 0;
    }
    h0 = (h0 + a) | 0;
    h1 = (h1 + b) | 0;
    h2 = (h2 + c) | 0;
    h3 = (h3 + d) | 0;
    h4 = (h4 + e) | 0;
    h5 = (h5 + f) | 0;
    h6 = (h6 + g) | 0;
    h7 = (h7 + k) | 0;
  }
  h[0] = h0; h[1] = h1; h[2] = h2; h[3] = h3; h[4] = h4; h[5] = h5; h[6] = h6; h[7] = h7;
}

/** Node's native SHA-256, where there is one: many times faster on large inputs (the snapshot's
 *  trailer hash). Browsers use the code above (WebCrypto's digest is neither incremental nor synchronous). */
const native: { createHash(algorithm: "sha256"): { update(bytes: Uint8Array): unknown; digest(): Uint8Array } } | undefined =
  typeof (globalThis as { process?: { versions?: { node?: string } } }).process?.versions?.node === "string"
    ? await import(["node", "crypto"].join(":")).catch(() => undefined)
    : undefined;

/** An incremental SHA-256. */
export class SHA256 {
  private readonly nativeHash = native?.createHash("sha256");
  private readonly h = Int32Array.from(initial);
  private readonly block = new Uint8Array(64);
  private filled = 0;
  private length = 0;

  /** Adds `bytes`. */
  update(bytes: Uint8Array): this {
    if (this.nativeHash) {
      this.nativeHash.update(bytes);
      return this;
    }
    let offset = 0;
    this.length += bytes.length;
    if (this.filled > 0) {
      const take = Math.min(64 - this.filled, bytes.length);
      this.block.set(bytes.subarray(0, take), this.filled);
      this.filled += take;
      offset = take;
      if (this.filled < 64) return this;
      compress(this.h, this.block, 0, 1);
      this.filled = 0;
    }
    const blocks = (bytes.length - offset) >>> 6;
    if (blocks > 0) compress(this.h, bytes, offset, blocks);
    offset += blocks * 64;
    if (offset < bytes.length) {
      this.block.set(bytes.subarray(offset), 0);
      this.filled = bytes.length - offset;
    }
    return this;
  }

  /** The digest (32 bytes). The hash may not be used afterwards. */
  digest(): Uint8Array {
    if (this.nativeHash) return new Uint8Array(this.nativeHash.digest());
    const out = new Uint8Array(32);
    const words = new Int32Array(8);
    finish(this.h, this.block, this.filled, this.length, words);
    for (let i = 0; i < 8; i++) {
      out[i * 4] = words[i]! >>> 24;
      out[i * 4 + 1] = (words[i]! >>> 16) & 0xff;
      out[i * 4 + 2] = (words[i]! >>> 8) & 0xff;
      out[i * 4 + 3] = words[i]! & 0xff;
    }
    return out;
  }
}

const tail = new Uint8Array(128);

/** Pads and compresses the last `filled` bytes of `block` (a message of `length` bytes) into `h`, then copies it to `out`. */
function finish(h: Int32Array, block: Uint8Array, filled: number, length: number, out: Int32Array): void {
  tail.fill(0);
  tail.set(block.subarray(0, filled), 0);
  tail[filled] = 0x80;
  const blocks = filled < 56 ? 1 : 2;
  const end = blocks * 64;
  const bits = length * 8;
  const high = Math.floor(bits / 0x100000000);
  tail[end - 8] = high >>> 24;
  tail[end - 7] = (high >>> 16) & 0xff;
  tail[end - 6] = (high >>> 8) & 0xff;
  tail[end - 5] = high & 0xff;
  tail[end - 4] = bits >>> 24;
  tail[end - 3] = (bits >>> 16) & 0xff;
  tail[end - 2] = (bits >>> 8) & 0xff;
  tail[end - 1] = bits & 0xff;
  compress(h, tail, 0, blocks);
  out.set(h);
}

const scratch = new Int32Array(8);

/** The SHA-256 of `bytes` as eight big-endian 32-bit words, into `out` (no allocation). */
export function sha256Words(bytes: Uint8Array, out: Int32Array = scratch): Int32Array {
  const h = out;
  h.set(initial);
  const blocks = bytes.length >>> 6;
  if (blocks > 0) compress(h, bytes, 0, blocks);
  const filled = bytes.length - blocks * 64;
  finish(h, bytes.subarray(blocks * 64), filled, bytes.length, out);
  return out;
}

/** Lowercase hex of `bytes`. */
export function hex(bytes: Uint8Array): string {
  let out = "";
  for (const byte of bytes) out += byte < 16 ? "0" + byte.toString(16) : byte.toString(16);
  return out;
}

/** The SHA-256 of `bytes`. */
export function sha256(bytes: Uint8Array): Uint8Array {
  return new SHA256().update(bytes).digest();
}
