// The Redis engine's socket on Deno for the WebAssembly build: Deno.connect, or
// Deno.connectTls for rediss:// (with tlsCaCert as the trusted CA).
import { UnsupportedError } from "../../api/errors.mjs";

/** Refuses what Deno's sockets cannot do, before connecting. */
export function check(_target, options) {
  if (options.tlsInsecure) {
    throw new UnsupportedError(
      "locksmith: tlsInsecure is not available on Deno: Deno.connectTls has no switch to skip certificate checks; pass the server's CA as tlsCaCert",
    );
  }
}

/** Opens a socket to `target`; `on` gets open(), data(chunk), error(message), close(). */
export function dial(target, options, on) {
  let conn;
  let writer;
  let done = false;
  const finish = () => {
    if (done) return;
    done = true;
    try {
      conn?.close();
    } catch {
      // Already closed.
    }
    on.close();
  };
  const opening = target.tls
    ? Deno.connectTls({ hostname: target.host, port: target.port, caCerts: options.tlsCaCert ? [options.tlsCaCert] : undefined })
    : Deno.connect({ hostname: target.host, port: target.port });
  opening.then(
    async (c) => {
      if (done) {
        try {
          c.close();
        } catch {
          // Already closed.
        }
        return;
      }
      conn = c;
      if (!target.tls) c.setNoDelay?.(true);
      c.unref?.();
      writer = c.writable.getWriter();
      on.open();
      const buffer = new Uint8Array(64 * 1024);
      try {
        for (;;) {
          const n = await c.read(buffer);
          if (n === null || done) break;
          // A copy: the buffer is read into again, and a chunk is its reader's to keep.
          on.data(buffer.slice(0, n));
        }
      } catch (err) {
        if (!done) on.error(err?.message ?? String(err));
      }
      finish();
    },
    (err) => {
      on.error(err?.message ?? String(err));
      finish();
    },
  );
  return {
    write(bytes) {
      writer?.write(bytes).catch((err) => {
        on.error(err?.message ?? String(err));
        finish();
      });
    },
    destroy: () => queueMicrotask(finish),
  };
}
