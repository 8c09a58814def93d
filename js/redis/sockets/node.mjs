// The Redis driver's socket in Node (and Bun): node:net, or node:tls for rediss:// (a
// private CA, certificate checks off with tlsInsecure). Both builds use it in Node.
import net from "node:net";
import tls from "node:tls";

/**
 * Opens a socket to `target`; `on` gets open(), data(chunk), error(message), close().
 * Plain TCP is `reusable`: its `write(bytes)` answers whether the bytes went out at
 * once (so their buffer may be written over).
 */
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
  return {
    reusable: !target.tls,
    write(bytes) {
      socket.write(bytes);
      return socket.writableLength === 0;
    },
    destroy: () => socket.destroy(),
  };
}
