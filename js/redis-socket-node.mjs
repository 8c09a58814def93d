// The Redis engine's socket in Node (and Bun) for the WebAssembly build: node:net, or
// node:tls for rediss:// (a private CA, certificate checks off with tlsInsecure).
import net from "node:net";
import tls from "node:tls";

/** Opens a socket to `target`; `on` gets open(), data(chunk), error(message), close(). */
export function dial(target, options, on) {
  const { host, port } = target;
  const socket = target.tls
    ? tls.connect(
        {
          host,
          port,
          servername: net.isIP(host) ? undefined : host,
          ca: options.tlsCaCert ?? undefined,
          rejectUnauthorized: !options.tlsInsecure,
          checkServerIdentity: options.tlsInsecure ? () => undefined : tls.checkServerIdentity,
        },
        () => on.open(),
      )
    : net.connect({ host, port }, () => on.open());
  socket.setNoDelay(true);
  socket.setKeepAlive(true, 10_000);
  socket.unref();
  socket.on("data", (chunk) => on.data(chunk));
  socket.on("error", (err) => on.error(err.message));
  socket.on("close", () => on.close());
  return { write: (bytes) => socket.write(bytes), destroy: () => socket.destroy() };
}
