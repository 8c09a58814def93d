// The Redis reader's connection: RESP over Node's own socket, with the package's own
// pieces (the Redis engine's encoder and decoder, from the addon or the WebAssembly
// engine; the URL parsing and login of the store's driver), so the command needs no
// Redis client package.
import { readFile } from "node:fs/promises";
import { createRequire } from "node:module";
import net from "node:net";
import tls from "node:tls";

import { authCommands, parseRedisUrl } from "../../redis/topology.mjs";
import { address, CONNECT_TIMEOUT_MS, StoreError, UsageError } from "../common.mjs";

let codec;
/**
 * The package's RESP encoder and decoder: the native addon's, or where it does not load
 * (or LOCKSMITH_FORCE_WASM=1), the WebAssembly Redis engine's. The same functions the
 * store's driver uses for its own short exchanges.
 */
function respCodec() {
  codec ??= (async () => {
    if (process.env.LOCKSMITH_FORCE_WASM !== "1") {
      try {
        const addon = createRequire(import.meta.url)("../../native-loader.cjs").loadAddon();
        return { encode: (args) => addon.redisCommand(args), decode: (bytes) => addon.redisDecode(bytes) ?? undefined };
      } catch (err) {
        if (err?.code !== "LOCKSMITH_NATIVE_UNAVAILABLE") throw err;
      }
    }
    const engine = await import("../../wasm/locksmith_wasm_redis.js");
    engine.initSync({ module: await readFile(new URL("../../wasm/locksmith_wasm_redis_bg.wasm", import.meta.url)) });
    return { encode: (args) => Buffer.from(engine.redisCommand(args)), decode: (bytes) => engine.redisDecode(bytes) ?? undefined };
  })();
  return codec;
}

/**
 * One connection to one Redis server: commands are pipelined, replies come back in
 * order. Logs in (AUTH, SELECT) and checks that it may run commands (PING) before
 * `open()` resolves, so a wrong password or a server that wants one is an error here.
 */
export class RedisConnection {
  #socket;
  #codec;
  #pending = [];
  #input = Buffer.alloc(0);
  #failure;
  #ready = false;

  static open(url) {
    return RedisConnection.connect(parseRedisUrl(url, (message) => new UsageError(message)));
  }

  /** A connection to `target` (`{ host, port, tls, user, password, db }`), logged in. */
  static async connect(target) {
    const connection = new RedisConnection(target, await respCodec());
    try {
      await connection.#connect();
    } catch (err) {
      connection.#socket?.destroy();
      throw err;
    }
    connection.#ready = true;
    return connection;
  }

  constructor(target, codec) {
    this.target = target;
    this.where = address(target.host, target.port);
    this.#codec = codec;
  }

  /** Whether the connection failed (or was closed): its calls reject at once. */
  get failed() {
    return this.#failure !== undefined;
  }

  #connect() {
    const { host, port } = this.target;
    return new Promise((resolve, reject) => {
      let connected = false;
      const onConnect = () => {
        connected = true;
        resolve();
      };
      this.#socket = this.target.tls
        ? tls.connect({ host, port, servername: net.isIP(host) ? undefined : host }, onConnect)
        : net.connect({ host, port }, onConnect);
      // Connecting, and every reply after: a server that accepts and never answers (a
      // frozen process) fails the command instead of hanging it. An idle connection (a
      // watch between two reads) is no failure.
      this.#socket.setTimeout(CONNECT_TIMEOUT_MS, () => {
        if (this.#ready && this.#pending.length === 0) return;
        this.#socket.destroy(new Error(`no answer within ${CONNECT_TIMEOUT_MS / 1000} s`));
      });
      this.#socket.on("data", (chunk) => this.#receive(chunk));
      this.#socket.on("error", (err) => {
        const failure = new StoreError(
          connected ? `the connection to Redis at ${this.where} failed: ${err.message}` : `could not reach Redis at ${this.where}: ${err.message}`,
        );
        if (!connected) reject(failure);
        this.#fail(failure);
      });
      this.#socket.on("close", () => this.#fail(new StoreError(`Redis at ${this.where} closed the connection`)));
    }).then(() => this.#login());
  }

  async #login() {
    const { db } = this.target;
    try {
      await Promise.all(authCommands(this.target).map((args) => this.call(...args)));
    } catch (err) {
      if (this.#failure) throw this.#failure;
      throw new StoreError(`Redis at ${this.where} refused the login: ${err.message}`);
    }
    try {
      if (db !== 0) await this.call("SELECT", String(db));
      await this.call("PING");
    } catch (err) {
      if (this.#failure) throw this.#failure; // the connection itself failed: say that
      const hint = /NOAUTH/.test(err.message) ? " (put the password in the URL: redis://:password@host:port)" : "";
      throw new StoreError(`Redis at ${this.where} refused the connection: ${err.message}${hint}`);
    }
  }

  #receive(chunk) {
    this.#input = this.#input.length === 0 ? chunk : Buffer.concat([this.#input, chunk]);
    try {
      for (let next = this.#codec.decode(this.#input); next !== undefined; next = this.#codec.decode(this.#input)) {
        const [value, used] = next;
        this.#input = this.#input.subarray(used);
        const call = this.#pending.shift();
        if (call === undefined) continue;
        if (value !== null && typeof value === "object" && !Array.isArray(value)) call.reject(new StoreError(value.error));
        else call.resolve(value);
      }
    } catch {
      this.#socket.destroy();
      this.#fail(new StoreError(`${this.where} does not answer in the Redis protocol (is it a Redis port?)`));
    }
  }

  #fail(err) {
    this.#failure ??= err;
    for (const call of this.#pending.splice(0)) call.reject(this.#failure);
  }

  /** Sends one command; resolves with its reply, rejects with an error reply. */
  call(...args) {
    if (this.#failure) return Promise.reject(this.#failure);
    return new Promise((resolve, reject) => {
      this.#pending.push({ resolve, reject });
      this.#socket.write(this.#codec.encode(args.map(String)));
    });
  }

  close() {
    this.#failure ??= new StoreError("closed");
    this.#socket.end();
  }
}
