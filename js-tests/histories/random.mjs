// A small seeded random source (sfc32), so that a history run can be replayed from its seed.

/** `() => [0, 1)` from a 32-bit `seed`; `fork(n)` derives an independent source. */
export function seeded(seed) {
  let a = 0x9e3779b9;
  let b = 0x243f6a88;
  let c = 0xb7e15162;
  let d = seed >>> 0;
  const next = () => {
    a >>>= 0;
    b >>>= 0;
    c >>>= 0;
    d >>>= 0;
    const t = (((a + b) | 0) + d) | 0;
    d = (d + 1) | 0;
    a = b ^ (b >>> 9);
    b = (c + (c << 3)) | 0;
    c = (c << 21) | (c >>> 11);
    c = (c + t) | 0;
    return (t >>> 0) / 4_294_967_296;
  };
  for (let i = 0; i < 15; i++) next();
  const random = () => next();
  /** A whole number in [lo, hi]. */
  random.int = (lo, hi) => lo + Math.floor(next() * (hi - lo + 1));
  /** True with probability `p`. */
  random.chance = (p) => next() < p;
  random.pick = (items) => items[Math.floor(next() * items.length)];
  random.fork = (n) => seeded((Math.floor(next() * 4_294_967_296) ^ Math.imul(n + 1, 0x85ebca6b)) >>> 0);
  return random;
}

/** A fresh 32-bit seed. */
export const newSeed = () => (Math.random() * 4_294_967_296) >>> 0;
