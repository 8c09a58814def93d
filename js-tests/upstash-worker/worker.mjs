// A Cloudflare Worker on UpstashLockStore: the edge half of the cross-runtime handoff in
// js-tests/runtimes/upstash-workerd.test.mjs. Routes: those of support/worker-routes.mjs.
import { Redis } from "@upstash/redis";
import { UpstashLockStore } from "locksmith-js/upstash";

import { lockRoute } from "../support/worker-routes.mjs";

export default {
  async fetch(request, env) {
    const store = new UpstashLockStore(new Redis({ url: env.UPSTASH_URL, token: env.UPSTASH_TOKEN, enableTelemetry: false }));
    return lockRoute(request, new URL(request.url), store);
  },
};
