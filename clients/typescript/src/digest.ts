// The state digest (docs/PROTOCOL.md, "State digest"): the sum of the SHA-256 of every visible
// record's canonical JSON, modulo 2^256, as 64 lowercase hex digits.

import { utf8 } from "./json.js";
import { hex, sha256 } from "./sha256.js";

const modulus = 1n << 256n;

/** A state digest, as a number modulo 2^256. */
export class StateDigest {
  constructor(readonly value: bigint = 0n) {}

  /** The digest `text` spells (64 lowercase hex digits), or undefined. */
  static parse(text: string | null | undefined): StateDigest | undefined {
    if (!text || !/^[0-9a-f]{64}$/.test(text)) return undefined;
    return new StateDigest(BigInt("0x" + text));
  }

  /** The contribution of one visible record's canonical body. */
  static element(body: string): bigint {
    return BigInt("0x" + hex(sha256(utf8(body))));
  }

  /** The digest of a set of visible records' canonical bodies. */
  static of(bodies: Iterable<string>): StateDigest {
    let sum = 0n;
    for (const body of bodies) sum += StateDigest.element(body);
    return new StateDigest(sum % modulus);
  }

  /** This digest with `body` added. */
  adding(body: string): StateDigest {
    return new StateDigest((this.value + StateDigest.element(body)) % modulus);
  }

  /** This digest with `body` taken away. */
  removing(body: string): StateDigest {
    return new StateDigest((this.value - StateDigest.element(body) + modulus) % modulus);
  }

  /** 64 lowercase hex digits. */
  get hex(): string {
    return this.value.toString(16).padStart(64, "0");
  }
}
