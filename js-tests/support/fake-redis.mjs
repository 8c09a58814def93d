// A scripted Redis behind a fake socket port, for the driver's state machine
// (js/redis/driver.mjs): the faults a real server cannot be made to produce on cue — a
// Sentinel that answers after the engine's reset, replies split across reads of one
// reused buffer, a MOVED to SSUBSCRIBE, a socket that never answers. Each fake socket
// parses the commands written to it and answers them through `respond`; the test sees
// every socket (its target, commands, whether it was destroyed).
import { createHash } from "node:crypto";
import { SCRIPTS } from "../../js/gen/redis-scripts.mjs";

const SCRIPT_BY_SHA = Object.fromEntries(Object.entries(SCRIPTS).map(([name, { sha }]) => [sha, name]));
const encoder = new TextEncoder();
const decoder = new TextDecoder();

/** RESP for a reply: numbers are integers, strings bulk strings, arrays arrays, `{ error }` errors, `{ simple }` simple strings, null nil. */
export function resp(value) {
  if (value === null) return "$-1\r\n";
  if (typeof value === "number") return `:${value}\r\n`;
  if (typeof value === "string") return `$${encoder.encode(value).length}\r\n${value}\r\n`;
  if (Array.isArray(value)) return `*${value.length}\r\n${value.map(resp).join("")}`;
  if (value.error !== undefined) return `-${value.error}\r\n`;
  return `+${value.simple}\r\n`;
}

/** Whole commands (arrays of bulk strings) from the front of `bytes`: `[commands, bytes used]`. */
function parseCommands(bytes) {
  const text = decoder.decode(bytes);
  const commands = [];
  let at = 0;
  for (;;) {
    const start = at;
    if (text[at] !== "*") break;
    const eol = text.indexOf("\r\n", at);
    if (eol < 0) break;
    const n = Number(text.slice(at + 1, eol));
    at = eol + 2;
    const args = [];
    let whole = true;
    for (let i = 0; i < n; i++) {
      const lenEnd = text.indexOf("\r\n", at);
      if (lenEnd < 0 || text[at] !== "$") {
        whole = false;
        break;
      }
      const len = Number(text.slice(at + 1, lenEnd));
      const argStart = lenEnd + 2;
      if (text.length < argStart + len + 2) {
        whole = false;
        break;
      }
      args.push(text.slice(argStart, argStart + len));
      at = argStart + len + 2;
    }
    if (!whole) {
      at = start;
      break;
    }
    commands.push(args);
  }
  return [commands, encoder.encode(text.slice(0, at)).length];
}

/** The answers of a healthy standalone server; `null`: no answer (the test answers itself, or never). */
export function defaultAnswer(args) {
  const name = args[0].toUpperCase();
  switch (name) {
    case "AUTH":
    case "SELECT":
      return { simple: "OK" };
    case "PING":
      return { simple: "PONG" };
    case "INFO":
      return "# Server\r\nredis_version:7.2.4\r\n";
    case "SCRIPT":
      return createHash("sha1").update(args[2]).digest("hex");
    case "SUBSCRIBE":
      return args.slice(1).map((channel, i) => ["subscribe", channel, i + 1]);
    case "SSUBSCRIBE":
      return ["ssubscribe", args[1], 1];
    case "EXISTS":
      return 0;
    case "PTTL":
      return -2;
    case "GET":
      return null;
    case "ROLE":
      return ["master", 0, []];
    case "EVALSHA": {
      const script = SCRIPT_BY_SHA[args[1]];
      // A free key everywhere: acquires get token 7, holder() finds nobody, the rest answer 1.
      if (script === "holder") return "$-1\r\n";
      return script === "acquire" || script === "semaphoreAcquire" || script === "rwlockAcquire" ? 7 : 1;
    }
    default:
      return { error: `ERR unknown command '${args[0]}'` };
  }
}

/**
 * A fake socket port: `port` goes where the driver's socket port goes. `respond(socket,
 * args)` answers a command (the value for `resp`, a string of raw RESP, an array of
 * them via `{ chunks }` sent in separate reads, or null for no answer); by default
 * `defaultAnswer`. `accept(target)`: false refuses the connection. `reuseBuffer`: every
 * chunk is delivered in the same buffer, overwritten by the next read (as Deno's reads).
 */
export function fakeRedis({ respond = (_socket, args) => defaultAnswer(args), accept = () => true, reuseBuffer = false, openDelayMs = 0 } = {}) {
  const sockets = [];
  const shared = new Uint8Array(64 * 1024);
  const deliver = (socket, bytes) => {
    if (socket.closed) return;
    if (!reuseBuffer) {
      socket.on.data(bytes);
      return;
    }
    shared.set(bytes);
    socket.on.data(shared.subarray(0, bytes.length));
    // The next read overwrites it.
    shared.fill(0x21, 0, bytes.length);
  };
  const port = {
    dial(target, _options, on) {
      const socket = {
        target: { host: target.host, port: target.port },
        on,
        commands: [],
        input: new Uint8Array(0),
        queue: Promise.resolve(),
        closed: false,
        destroyed: false,
        opened: false,
        /** Sends raw bytes (a string or bytes) as one read. */
        send(data) {
          deliver(socket, typeof data === "string" ? encoder.encode(data) : data);
        },
        /** The server closes the connection. */
        close() {
          if (socket.closed) return;
          socket.closed = true;
          setImmediate(() => on.close());
        },
      };
      sockets.push(socket);
      setTimeout(() => {
        if (socket.closed) return;
        if (!accept(socket.target)) {
          on.error("connect ECONNREFUSED");
          socket.close();
          return;
        }
        socket.opened = true;
        on.open();
      }, openDelayMs);
      return {
        reusable: false,
        write(bytes) {
          if (socket.closed) return false;
          const all = new Uint8Array(socket.input.length + bytes.length);
          all.set(socket.input);
          all.set(bytes, socket.input.length);
          const [commands, used] = parseCommands(all);
          socket.input = all.slice(used);
          for (const args of commands) {
            socket.commands.push(args);
            const answer = respond(socket, args);
            if (answer === null || answer === undefined) continue;
            const chunks = answer.chunks ?? [typeof answer === "string" && answer.includes("\r\n") && /^[-+:$*]/.test(answer) ? answer : resp(answer)];
            // Each chunk in a read of its own, in order, after this write returns.
            for (const chunk of chunks) {
              socket.queue = socket.queue.then(() => new Promise((r) => setImmediate(() => (socket.send(chunk), r()))));
            }
          }
          return false;
        },
        destroy() {
          socket.destroyed = true;
          socket.close();
        },
      };
    },
  };
  return { port, sockets };
}

/** The Redis Cluster hash slot of `key` (CRC16-XMODEM of its hash tag, mod 16384). */
export function keySlot(key) {
  const open = key.indexOf("{");
  if (open >= 0) {
    const close = key.indexOf("}", open + 1);
    if (close > open + 1) key = key.slice(open + 1, close);
  }
  let crc = 0;
  for (const byte of encoder.encode(key)) {
    crc ^= byte << 8;
    for (let i = 0; i < 8; i++) crc = crc & 0x8000 ? ((crc << 1) ^ 0x1021) & 0xffff : (crc << 1) & 0xffff;
  }
  return crc % 16384;
}

/** Names a socket by its first command: `data` (the handshake's INFO or AUTH), `subscriber`, or the command. */
export function roleOf(socket) {
  const first = socket.commands.find((args) => args[0].toUpperCase() !== "AUTH");
  if (first === undefined) return "silent";
  const name = first[0].toUpperCase();
  if (name === "INFO" || name === "SELECT") return "data";
  if (name === "SUBSCRIBE" || name === "SSUBSCRIBE") return "subscriber";
  return name.toLowerCase();
}
