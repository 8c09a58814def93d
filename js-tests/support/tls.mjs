// TLS material for tests: a private CA and a server certificate it signs for 127.0.0.1
// and localhost (webpki refuses a CA as the end entity), made by the openssl command in a
// new temporary folder; and a redis-server that listens with them.
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";

import { freePort, startRedis } from "./redis-server.mjs";

const run = promisify(execFile);

/** Whether the openssl command runs here. */
export const opensslInstalled = () =>
  run("openssl", ["version"]).then(
    () => true,
    () => false,
  );

/**
 * Makes a CA and a server certificate in a new folder named from `prefix` (in the system's
 * temporary directory, or in `within`). Resolves
 * `{ dir, ca, files: { ca, cert, key }, redisArgs(tlsPort), dispose() }`: `ca` is the CA's
 * PEM text, `files` the paths, `redisArgs` a redis-server's arguments to listen with TLS
 * on `tlsPort`; `dispose()` removes the folder.
 */
export async function testCertificates(prefix = "locksmith-tls-", { within = tmpdir() } = {}) {
  const dir = await mkdtemp(join(within, prefix));
  const openssl = (...args) => run("openssl", args, { cwd: dir });
  try {
    await writeFile(join(dir, "san.ext"), "subjectAltName=IP:127.0.0.1,DNS:localhost\n");
    const ca = ["-subj", "/CN=locksmith test CA", "-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign"];
    await openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", ...ca, "-keyout", "ca.key", "-out", "ca.pem");
    await openssl("req", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=localhost", "-keyout", "key.pem", "-out", "server.csr");
    const signed = ["-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial", "-days", "1", "-extfile", "san.ext"];
    await openssl("x509", "-req", "-in", "server.csr", ...signed, "-out", "cert.pem");
  } catch (err) {
    await rm(dir, { recursive: true, force: true });
    throw err;
  }
  const files = { ca: join(dir, "ca.pem"), cert: join(dir, "cert.pem"), key: join(dir, "key.pem") };
  return {
    dir,
    ca: await readFile(files.ca, "utf8"),
    files,
    redisArgs: (tlsPort) => [
      "--tls-port",
      String(tlsPort),
      "--tls-cert-file",
      files.cert,
      "--tls-key-file",
      files.key,
      "--tls-ca-cert-file",
      files.ca,
      "--tls-auth-clients",
      "no",
    ],
    dispose: () => rm(dir, { recursive: true, force: true }),
  };
}

/** Skips `t` for a missing prerequisite, except under CI=true, where it fails the run. */
export function missing(t, why) {
  if (process.env.CI === "true") assert.fail(`${why} (CI=true: a missing prerequisite fails the run)`);
  t.skip(why);
}

/**
 * A redis-server of the test's own listening with TLS on a free port, with certificates
 * from testCertificates(prefix): `{ ca, certs, server, tlsPort, dispose() }`; undefined,
 * with `t` skipped, where openssl or the server's TLS support is missing (missing()).
 */
export async function tlsRedis(t, prefix) {
  if (!(await opensslInstalled())) {
    missing(t, "the openssl command is not installed; it makes the test certificates");
    return undefined;
  }
  const certs = await testCertificates(prefix);
  const tlsPort = await freePort();
  let server;
  try {
    server = await startRedis(certs.redisArgs(tlsPort));
  } catch (err) {
    await certs.dispose();
    missing(t, `this redis-server has no TLS support: ${err.message}`);
    return undefined;
  }
  const dispose = async () => {
    try {
      await server.stop();
    } finally {
      await certs.dispose();
    }
  };
  return { ca: certs.ca, certs, server, tlsPort, dispose };
}
