// The baseline: a plain-JS lock with locksmith's API shape over a Map, with the same
// guarantees a user would need (a CSPRNG owner token per acquisition, expiry, owner-only
// release). What a careful user would write without locksmith.
const holds = new Map();

export class PlainLock {
  constructor(key, ttlMs = 30_000) {
    this.key = key;
    this.ttlMs = ttlMs;
    this.owner = null;
  }

  async acquire() {
    const now = performance.now();
    const hold = holds.get(this.key);
    if (hold !== undefined && hold.expiresAt > now) return false;
    this.owner = crypto.randomUUID();
    holds.set(this.key, { owner: this.owner, expiresAt: now + this.ttlMs });
    return true;
  }

  async release() {
    const hold = holds.get(this.key);
    if (hold === undefined || hold.owner !== this.owner || hold.expiresAt <= performance.now()) return false;
    holds.delete(this.key);
    this.owner = null;
    return true;
  }

  async run(fn) {
    if (!(await this.acquire())) return [false, undefined];
    try {
      return [true, await fn()];
    } finally {
      await this.release();
    }
  }
}
