// An etcd cluster of the tests' own: three members (or one) on loopback, on free ports,
// their data in a temporary directory (on /dev/shm when there is one: fsyncs there cost
// nothing). Each member runs under a small shell that kills it when its stdin closes, so
// none outlives the test process. The members' heartbeat and election timeout are short
// (50 ms, 500 ms), so a new leader is elected within about a second of the old one's
// death. From Debian's etcd-server package (or ETCD_BIN).
import { execFile } from "node:child_process";
import { existsSync } from "node:fs";
import { mkdtemp, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { after, before } from "node:test";
import { promisify } from "node:util";
import { EtcdLockStore } from "locksmith-js/etcd";

import { freePort, required, untilAnswers, watched } from "./server-process.mjs";

const run = promisify(execFile);

// Once the watchdog's stdin closes, it kills the member (continued first: it may be paused).
const STOP = 'kill -CONT "$pid" 2>/dev/null; kill "$pid" 2>/dev/null';

/** The etcd binary: ETCD_BIN, else `etcd` on PATH; undefined when there is none. */
async function etcdBinary() {
  if (process.env.ETCD_BIN) return existsSync(process.env.ETCD_BIN) ? process.env.ETCD_BIN : undefined;
  const found = await run("sh", ["-c", "command -v etcd"]).then(
    ({ stdout }) => stdout.trim(),
    () => "",
  );
  return found || undefined;
}

/** Why etcd cannot be started here, or undefined when it can. */
export async function etcdMissing() {
  if (await etcdBinary()) return undefined;
  return process.env.ETCD_BIN
    ? `ETCD_BIN=${process.env.ETCD_BIN} does not exist`
    : "etcd is not installed (no etcd on PATH): run scripts/setup.sh --etcd (Debian's etcd-server)";
}

/** Options for `describe`/`it`: skips without etcd, except under CI=true, where the suite fails. */
export async function requireEtcd() {
  return required(await etcdMissing());
}

/** POSTs `body` to `/v3/<path>` of `url`; resolves to the JSON reply (or rejects). */
export async function etcdCall(url, path, body = {}, { timeoutMs = 2_000, headers = {} } = {}) {
  const response = await fetch(`${url}/v3/${path}`, {
    method: "POST",
    headers: { "content-type": "application/json", ...headers },
    body: JSON.stringify(body),
    signal: AbortSignal.timeout(timeoutMs),
  });
  const reply = await response.json();
  if (reply.error) throw Object.assign(new Error(`etcd ${path}: ${reply.message ?? reply.error}`), { grpc: reply.code });
  return reply;
}

/**
 * Starts a cluster of `size` members; resolves with `{ endpoints, members, leader(),
 * waitForLeader(), dispose() }`. Each member is `{ name, url, adminUrl, pid, id, start(),
 * stop(), kill(signal), pause(), resume() }` (`id`: its member id as etcd reports it).
 * `tls`: `{ cert, key }` file paths: the members' `url`s are then https://, and each also
 * listens on a plain http:// `adminUrl` for the tests' own calls. `args`: more etcd flags.
 * `fastElections: false` keeps etcd's default heartbeat and election timeout (100 ms, 1 s).
 */
export async function startEtcd({ size = 3, tls, args: extra = [], fastElections = true } = {}) {
  const binary = await etcdBinary();
  if (!binary) throw new Error(await etcdMissing());
  const dir = await mkdtemp(join(existsSync("/dev/shm") ? "/dev/shm" : tmpdir(), "locksmith-etcd-"));
  const scheme = tls ? "https" : "http";
  const ports = [];
  for (let i = 0; i < size * 3; i++) ports.push(await freePort());
  const members = Array.from({ length: size }, (_, i) => ({
    name: `m${i + 1}`,
    clientPort: ports[3 * i],
    peerPort: ports[3 * i + 1],
    adminPort: ports[3 * i + 2],
  }));
  const initialCluster = members.map((m) => `${m.name}=http://127.0.0.1:${m.peerPort}`).join(",");
  let state = "new";
  for (const m of members) {
    m.url = `${scheme}://127.0.0.1:${m.clientPort}`;
    m.adminUrl = tls ? `http://127.0.0.1:${m.adminPort}` : m.url;
    m.child = undefined;
    m.pid = undefined;
    m.start = async () => {
      const args = [
        "--name",
        m.name,
        "--data-dir",
        join(dir, m.name),
        "--listen-client-urls",
        tls ? `${m.url},${m.adminUrl}` : m.url,
        "--advertise-client-urls",
        m.url,
        "--listen-peer-urls",
        `http://127.0.0.1:${m.peerPort}`,
        "--initial-advertise-peer-urls",
        `http://127.0.0.1:${m.peerPort}`,
        "--initial-cluster",
        initialCluster,
        "--initial-cluster-state",
        state,
        "--initial-cluster-token",
        dir,
        ...(fastElections ? ["--heartbeat-interval", "50", "--election-timeout", "500"] : []),
        "--logger",
        "zap",
        "--log-level",
        "warn",
        ...(tls ? ["--cert-file", tls.cert, "--key-file", tls.key] : []),
        ...extra,
      ];
      ({ child: m.child, pid: m.pid } = await watched([binary, ...args], { output: '>"$LOG" 2>&1', stop: STOP, env: { LOG: join(dir, `${m.name}.log`) } }));
    };
    m.stop = async () => {
      if (!m.child || m.child.exitCode !== null) return;
      const exited = new Promise((resolve) => m.child.once("exit", resolve));
      m.child.stdin.end();
      await exited;
    };
    /** SIGKILL (or `signal`): the member dies at once; its watchdog shell then exits. */
    m.kill = async (signal = "SIGKILL") => {
      if (!m.child || m.child.exitCode !== null) return;
      const exited = new Promise((resolve) => m.child.once("exit", resolve));
      process.kill(m.pid, signal);
      m.child.stdin.end();
      await exited;
    };
    m.pause = () => process.kill(m.pid, "SIGSTOP");
    m.resume = () => process.kill(m.pid, "SIGCONT");
  }
  const cluster = {
    dir,
    members,
    endpoints: members.map((m) => m.url),
    /** The member that leads now (asked of the members that answer), or undefined. */
    async leader() {
      for (const m of members) {
        if (!m.child || m.child.exitCode !== null) continue;
        try {
          const status = await etcdCall(m.adminUrl, "maintenance/status", {}, { timeoutMs: 500 });
          if (status.leader && status.leader !== "0") return members.find((x) => x.id === status.leader);
        } catch {}
      }
      return undefined;
    },
    /**
     * Waits until a member other than `not` leads: every member that answers (a majority
     * at least; a stopped one does not) names it.
     */
    async waitForLeader({ not, timeoutMs = 10_000 } = {}) {
      const deadline = Date.now() + timeoutMs;
      for (;;) {
        const seen = [];
        for (const m of members) {
          if (!m.child || m.child.exitCode !== null) continue;
          try {
            const status = await etcdCall(m.adminUrl, "maintenance/status", {}, { timeoutMs: 300 });
            seen.push(status.leader);
          } catch {}
        }
        const [leader] = seen;
        const agreed = seen.length > members.length / 2 && seen.every((l) => l === leader) && leader && leader !== "0";
        const found = agreed ? members.find((m) => m.id === leader) : undefined;
        if (found && found !== not) return found;
        if (Date.now() > deadline) throw new Error(`no etcd leader within ${timeoutMs} ms (the members that answer see ${seen.join(", ") || "nothing"})`);
        await sleep(50);
      }
    },
    /** Stops every member and deletes the data. */
    async dispose() {
      for (const m of members) {
        try {
          if (m.pid) process.kill(m.pid, "SIGCONT");
        } catch {}
        await m.stop();
      }
      await rm(dir, { recursive: true, force: true });
    },
  };
  try {
    await Promise.all(members.map((m) => m.start()));
    state = "existing";
    const deadline = Date.now() + 20_000;
    for (const m of members) {
      const answers = async () => {
        const status = await etcdCall(m.adminUrl, "maintenance/status", {}, { timeoutMs: 500 });
        m.id = status.header.member_id;
        return true;
      };
      await untilAnswers(m.child, answers, {
        ms: deadline - Date.now(),
        failed: async (err) => {
          const log = await readFile(join(dir, `${m.name}.log`), "utf8").catch(() => "");
          return new Error(`etcd member ${m.name} did not start on ${m.url}: ${err?.message}\n${log.slice(-2_000)}`);
        },
      });
    }
    await cluster.waitForLeader();
  } catch (err) {
    await cluster.dispose();
    throw err;
  }
  return cluster;
}

/**
 * For the enclosing describe(): before() starts an etcd cluster (startEtcd()) and hands it
 * to `started`; after() closes every store that the returned `connect(options)` made on
 * it (EtcdLockStore.connect() over its endpoints), then disposes of the cluster.
 */
export function etcdStores(started) {
  let cluster;
  const stores = [];
  before(async () => {
    cluster = await startEtcd();
    started(cluster);
  });
  after(async () => {
    for (const store of stores) await store.close();
    await cluster?.dispose();
  });
  return async (options = {}) => {
    const store = await EtcdLockStore.connect({ endpoints: cluster.endpoints, ...options });
    stores.push(store);
    return store;
  };
}

/** Turns on etcd's authentication with a `root` user of password `password` (and `user`, if given, with read-write access to `prefix`). */
export async function enableAuth(url, { password, user, userPassword, prefix }) {
  await etcdCall(url, "auth/user/add", { name: "root", password });
  await etcdCall(url, "auth/user/grant", { user: "root", role: "root" });
  if (user) {
    await etcdCall(url, "auth/role/add", { name: "locks" });
    const b64 = (t) => Buffer.from(t).toString("base64");
    const end = Buffer.from(prefix);
    end[end.length - 1] += 1;
    await etcdCall(url, "auth/role/grant", { name: "locks", perm: { permType: "READWRITE", key: b64(prefix), range_end: end.toString("base64") } });
    await etcdCall(url, "auth/user/add", { name: user, password: userPassword });
    await etcdCall(url, "auth/user/grant", { user, role: "locks" });
  }
  await etcdCall(url, "auth/enable", {});
}
