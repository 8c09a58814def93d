// TLS material for tests: a private CA and a server certificate it signs for 127.0.0.1
// and localhost (webpki refuses a CA as the end entity), made by the openssl command in a
// new temporary folder.
import { execFile } from "node:child_process";
import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";

const run = promisify(execFile);

/** Whether the openssl command runs here. */
export const opensslInstalled = () =>
  run("openssl", ["version"]).then(
    () => true,
    () => false,
  );

/**
 * Makes a CA and a server certificate in a new folder named from `prefix`. Resolves
 * `{ dir, ca, files: { ca, cert, key }, redisArgs(tlsPort), dispose() }`: `ca` is the CA's
 * PEM text, `files` the paths, `redisArgs` a redis-server's arguments to listen with TLS
 * on `tlsPort`; `dispose()` removes the folder.
 */
export async function testCertificates(prefix = "locksmith-tls-") {
  const dir = await mkdtemp(join(tmpdir(), prefix));
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
