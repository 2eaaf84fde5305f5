// The state digest (docs/PROTOCOL.md, "State digest"): the sum of the SHA-256 of every visible
// record's canonical JSON, modulo 2^256, as 64 lowercase hex digits. Sums are kept in eight
// 32-bit limbs held in doubles (exact up to 2^53), so adding a record costs eight additions.

import { utf8 } from "./json.js";
import { sha256Words } from "./sha256.js";

const modulus = 1n << 256n;

/** A running sum of record contributions, modulo 2^256. */
export class DigestSum {
  private readonly limbs = new Float64Array(8);
  private pending = 0;

  /** Adds (or with `sign` -1, takes away) the contribution of a canonical body given as UTF-8 bytes. */
  addBytes(bytes: Uint8Array, sign = 1): void {
    const words = sha256Words(bytes);
    const limbs = this.limbs;
    for (let i = 0; i < 8; i++) limbs[i] += sign * (words[i]! >>> 0);
    if (++this.pending >= 1 << 20) this.normalize();
  }

  /** Adds (or takes away) the contribution of a canonical body. */
  add(body: string, sign = 1): void {
    this.addBytes(utf8(body), sign);
  }

  private normalize(): void {
    const limbs = this.limbs;
    let carry = 0;
    for (let i = 7; i >= 0; i--) {
      const value = limbs[i]! + carry;
      const low = ((value % 0x100000000) + 0x100000000) % 0x100000000;
      carry = (value - low) / 0x100000000;
      limbs[i] = low;
    }
    this.pending = 0;
  }

  /** The sum as a digest. */
  get digest(): StateDigest {
    this.normalize();
    let value = 0n;
    for (let i = 0; i < 8; i++) value = (value << 32n) | BigInt(this.limbs[i]!);
    return new StateDigest(value);
  }
}

/** A state digest, as a number modulo 2^256. */
export class StateDigest {
  constructor(readonly value: bigint = 0n) {}

  /** The digest `text` spells (64 lowercase hex digits), or undefined. */
  static parse(text: string | null | undefined): StateDigest | undefined {
    if (!text || !/^[0-9a-f]{64}$/.test(text)) return undefined;
    return new StateDigest(BigInt("0x" + text));
  }

  /** The digest of a set of visible records' canonical bodies. */
  static of(bodies: Iterable<string>): StateDigest {
    const sum = new DigestSum();
    for (const body of bodies) sum.add(body);
    return sum.digest;
  }

  /** This digest plus `sum`'s, modulo 2^256. */
  plus(sum: DigestSum): StateDigest {
    return new StateDigest((this.value + sum.digest.value) % modulus);
  }

  /** 64 lowercase hex digits. */
  get hex(): string {
    return this.value.toString(16).padStart(64, "0");
  }
}
