// The Redis engine's socket on Cloudflare Workers (workerd) for the WebAssembly build:
// `connect()` from cloudflare:sockets, with `secureTransport: "on"` for rediss://.
// A socket belongs to the request that opened it: connect in the request that uses the
// store, and close it before the request ends.
import { connect } from "cloudflare:sockets";
import { UnsupportedError } from "../../api/errors.mjs";

/** Refuses what workerd's sockets cannot do, before connecting. */
export function check(_target, options) {
  if (options.tlsCaCert !== null || options.tlsInsecure) {
    throw new UnsupportedError(
      "locksmith: tlsCaCert and tlsInsecure are not available on Cloudflare Workers: connect() checks the server's certificate against public CAs",
    );
  }
}

// workerd's words when a request uses a socket another request opened.
const OTHER_REQUEST = /different request/i;

/** What went wrong, in words that say what to do where workerd's do not. */
function describe(err) {
  const message = err?.message ?? String(err);
  return OTHER_REQUEST.test(message)
    ? "this store's socket was opened by another request, and Workers lets only that request use it: connect the store in the request that uses it and close it before the request ends (the next call connects again, in its own request)"
    : message;
}

/** Opens a socket to `target`; `on` gets open(), data(chunk), error(message), close(). */
export function dial(target, _options, on) {
  let done = false;
  let socket;
  const finish = () => {
    if (done) return;
    done = true;
    socket?.close().catch(() => {});
    on.close();
  };
  try {
    socket = connect({ hostname: target.host, port: target.port }, { secureTransport: target.tls ? "on" : "off", allowHalfOpen: false });
  } catch (err) {
    on.error(describe(err));
    queueMicrotask(finish);
    return { write() {}, destroy() {} };
  }
  const writer = socket.writable.getWriter();
  socket.opened.then(
    () => {
      if (!done) on.open();
    },
    (err) => {
      on.error(describe(err));
      finish();
    },
  );
  (async () => {
    const reader = socket.readable.getReader();
    try {
      for (;;) {
        const { value, done: ended } = await reader.read();
        if (ended || done) break;
        on.data(value);
      }
    } catch (err) {
      if (!done) on.error(describe(err));
    }
    finish();
  })();
  return {
    write(bytes) {
      writer.write(bytes).catch((err) => {
        on.error(describe(err));
        finish();
      });
    },
    destroy: () => queueMicrotask(finish),
  };
}
