// locksmith-js/otel: OpenTelemetry metrics and spans for locksmith, built only on the
// package's diagnostics channels (docs/observability.md): `locksmith:acquire`,
// `locksmith:release` and `locksmith:extend` (tracing channels) and `locksmith:lost`.
// Nothing in the lock path knows about OpenTelemetry; this module subscribes, and an
// unsubscribed channel costs the lock path nothing. @opentelemetry/api is an optional peer
// dependency, loaded only by this entry.
//
// How a hold is followed: the acquire's context carries the handle (`lock`) and the hold's
// number on it (`hold`); a grant puts a record in a WeakMap keyed on the handle, and the
// first of its release, its loss or a later grant of the same handle ends that record,
// once. A loss reported late (after a release found the key gone, or after the handle was
// granted again) names its hold's number, so it ends that hold or nothing, and
// `locksmith.held` and `locksmith.lost` move exactly once per hold.
import diagnosticsChannel from "node:diagnostics_channel";
import { context, diag, metrics, SpanKind, SpanStatusCode, trace, ValueType } from "@opentelemetry/api";
import { checkOptionKeys, invalid, typeName } from "./api/errors.mjs";

/** The instrumentation scope's version: the package's (js-tests/otel.test.mjs checks it against package.json). */
export const VERSION = "0.1.0";
const NAME = "locksmith-js";
const OPTIONS = ["meterProvider", "tracerProvider", "recordKeys"];

// Seconds, from a memory-store grant (tens of microseconds) to long holds (minutes).
const BUCKETS = [0.0001, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300];

const now = () => performance.now();

function checkOptions(options) {
  if (options === undefined) return {};
  if (options === null || typeof options !== "object" || Array.isArray(options)) {
    throw invalid(`instrument() takes an options object; got ${typeName(options)}`);
  }
  checkOptionKeys(options, OPTIONS, "instrument()");
  const { meterProvider, tracerProvider, recordKeys } = options;
  if (meterProvider !== undefined && typeof meterProvider?.getMeter !== "function") {
    throw invalid(`meterProvider must be an OpenTelemetry MeterProvider (an object with getMeter()); got ${typeName(meterProvider)}`);
  }
  if (tracerProvider !== undefined && typeof tracerProvider?.getTracer !== "function") {
    throw invalid(`tracerProvider must be an OpenTelemetry TracerProvider (an object with getTracer()); got ${typeName(tracerProvider)}`);
  }
  if (recordKeys !== undefined && typeof recordKeys !== "boolean") {
    throw invalid(`recordKeys must be a boolean; got ${typeName(recordKeys)}`);
  }
  return options;
}

/** What a subscriber must never do is throw: diagnostics_channel would rethrow it as an uncaught exception. */
function guarded(what, fn) {
  return (message) => {
    try {
      fn(message);
    } catch (err) {
      diag.error(`locksmith-js/otel: recording ${what} failed`, err);
    }
  };
}

/**
 * A tracing channel's subscriber that calls `settle(context)` once per traced call: at
 * `asyncEnd` (the promise settled), or at `end` when the call threw before returning a
 * promise (then `error` came first and no async event follows).
 */
function onSettle(what, settle, start) {
  const settled = new WeakSet();
  const once = guarded(what, (ctx) => {
    if (settled.has(ctx)) return;
    settled.add(ctx);
    settle(ctx);
  });
  const handlers = {
    end: (ctx) => {
      if (ctx?.error !== undefined) once(ctx);
    },
    asyncEnd: once,
  };
  if (start) handlers.start = guarded(what, start);
  return handlers;
}

// Outcomes as the channels set them; the fallbacks only cover a context published without one.
function acquireOutcome(ctx) {
  if (typeof ctx.outcome === "string") return ctx.outcome;
  if (ctx.error !== undefined) return "error";
  return ctx.result === true ? "acquired" : "busy";
}
function releaseOutcome(ctx) {
  if (typeof ctx.outcome === "string") return ctx.outcome;
  if (ctx.error !== undefined) return "error";
  return ctx.result === true ? "released" : "not-held";
}
function extendOutcome(ctx) {
  if (typeof ctx.outcome === "string") return ctx.outcome;
  if (ctx.error !== undefined) return ctx.error?.code === "LOCK_NOT_HELD" ? "not-held" : "error";
  return "extended";
}

/**
 * The grant's fencing token as an attribute, if it has one: a number, as `lock.fencingToken`
 * is (every store's tokens are safe integers; the stores refuse others).
 */
function fencingToken(ctx) {
  const token = ctx.fencingToken;
  return typeof token === "number" && Number.isFinite(token) ? token : undefined;
}

/**
 * A lockAll() grant's keys and each key's fencing token, in the order the handle gives its
 * keys (read from the handle as the acquire settles, when the hold is the one just granted);
 * undefined for other kinds, or where a key has no token.
 */
function multiTokens(ctx) {
  if (ctx.kind !== "multi" || ctx.lock === null || typeof ctx.lock !== "object") return undefined;
  const keys = ctx.lock.keys;
  const byKey = ctx.lock.fencingTokens;
  if (!Array.isArray(keys) || byKey === null || typeof byKey !== "object") return undefined;
  const tokens = keys.map((key) => byKey[key]);
  return tokens.every((t) => typeof t === "number" && Number.isFinite(t)) ? { keys: [...keys], tokens } : undefined;
}

const errorMessage = (err) => (typeof err?.message === "string" ? err.message : String(err));

/**
 * Starts recording locksmith's locks as OpenTelemetry metrics and spans. Returns the
 * function that stops it (calling that again does nothing).
 */
export function instrument(options) {
  const { meterProvider = metrics.getMeterProvider(), tracerProvider = trace.getTracerProvider(), recordKeys = false } = checkOptions(options);
  const meter = meterProvider.getMeter(NAME, VERSION);
  const tracer = tracerProvider.getTracer(NAME, VERSION);

  const acquireDuration = meter.createHistogram("locksmith.acquire.duration", {
    description: "How long acquire() took, from its call until it settled",
    unit: "s",
    valueType: ValueType.DOUBLE,
    advice: { explicitBucketBoundaries: BUCKETS },
  });
  const holdDuration = meter.createHistogram("locksmith.hold.duration", {
    description: "How long a hold lasted, from its grant until its release or loss",
    unit: "s",
    valueType: ValueType.DOUBLE,
    advice: { explicitBucketBoundaries: BUCKETS },
  });
  const lostCounter = meter.createCounter("locksmith.lost", {
    description: "Holds lost before their release (TTL passed without an extend, or the store no longer had them)",
    valueType: ValueType.INT,
  });
  const extendCounter = meter.createCounter("locksmith.extends", {
    description: "extend() calls, by outcome (autoExtend's renewals run in the core and are not counted)",
    valueType: ValueType.INT,
  });
  const heldCounter = meter.createUpDownCounter("locksmith.held", {
    description: "Holds granted and not yet released or lost",
    valueType: ValueType.INT,
  });
  const pendingCounter = meter.createUpDownCounter("locksmith.acquire.pending", {
    description: "Acquires called and not yet answered: waiters, and calls on their way (with locksmith.fair, places in fair queues)",
    valueType: ValueType.INT,
  });

  // Per traced acquire (keyed on its context object): when it started, its span, the context it started in.
  const acquires = new WeakMap();
  // Per handle: `{ first, open }` — the number of the first hold seen (a handle numbers
  // its holds: `hold` in the channels' messages) and its holds not yet ended, by number,
  // each `{ start, span, attributes, done }`.
  const holds = new WeakMap();
  // What is open, so that uninstrumenting can close it (the WeakMaps cannot be walked).
  const openAcquires = new Set();
  const openHolds = new Set();

  // A fair handle's calls say so (`locksmith.fair`); others carry no such attribute.
  const base = (ctx) =>
    ctx.fair === true
      ? { "locksmith.kind": ctx.kind, "locksmith.store": ctx.store, "locksmith.fair": true }
      : { "locksmith.kind": ctx.kind, "locksmith.store": ctx.store };
  const withKey = (attributes, ctx) => {
    if (recordKeys && typeof ctx.key === "string") attributes["locksmith.key"] = ctx.key;
    return attributes;
  };
  /** A grant's fencing token(s) on `span`: one lock's token, or a lockAll() hold's tokens (and, with recordKeys, its keys). */
  const setTokens = (span, token, multi) => {
    if (token !== undefined) span.setAttribute("locksmith.fencing_token", token);
    if (multi === undefined) return;
    span.setAttribute("locksmith.fencing_tokens", multi.tokens);
    if (recordKeys) span.setAttribute("locksmith.keys", multi.keys);
  };

  /** Ends a hold: `outcome` is "released" or "lost" (with the reason and error), or undefined when instrumentation stops. */
  function endHold(hold, outcome, reason, error) {
    if (hold.done) return;
    hold.done = true;
    openHolds.delete(hold);
    heldCounter.add(-1, hold.attributes);
    if (outcome === undefined) {
      hold.span.setAttribute("locksmith.uninstrumented", true);
      hold.span.end();
      return;
    }
    holdDuration.record((now() - hold.start) / 1000, { ...hold.attributes, "locksmith.outcome": outcome });
    hold.span.setAttribute("locksmith.outcome", outcome);
    if (outcome === "lost") {
      lostCounter.add(1, { ...hold.attributes, "locksmith.reason": reason });
      hold.span.setAttribute("locksmith.lost_reason", reason);
      hold.span.addEvent("locksmith.lost", { "locksmith.reason": reason });
      if (error !== undefined) hold.span.recordException(error);
      hold.span.setStatus({ code: SpanStatusCode.ERROR, message: `lost: ${reason}` });
    }
    hold.span.end();
  }

  function startHold(ctx, acquire, token, multi) {
    const handle = ctx.lock;
    if (handle === null || (typeof handle !== "object" && typeof handle !== "function") || typeof ctx.hold !== "number") return;
    let record = holds.get(handle);
    if (record === undefined) holds.set(handle, (record = { first: ctx.hold, open: new Map() }));
    // A handle is granted again only once its earlier hold is gone; not released, that
    // one was lost (its own loss message, which may come later, then finds it ended).
    for (const [number, previous] of record.open) {
      record.open.delete(number);
      endHold(previous, "lost", "LOCK_NOT_HELD");
    }
    const attributes = base(ctx);
    const span = tracer.startSpan(
      "locksmith hold",
      {
        kind: SpanKind.INTERNAL,
        attributes: withKey({ ...attributes, "locksmith.ttl_ms": ctx.ttlMs }, ctx),
        links: [{ context: acquire.span.spanContext() }],
      },
      acquire.parent,
    );
    setTokens(span, token, multi);
    const hold = { start: now(), span, attributes, done: false };
    record.open.set(ctx.hold, hold);
    openHolds.add(hold);
    heldCounter.add(1, attributes);
  }

  const onAcquire = onSettle(
    "an acquire",
    (ctx) => {
      const acquire = acquires.get(ctx);
      if (!acquire) return; // started before instrument()
      acquires.delete(ctx);
      openAcquires.delete(acquire);
      pendingCounter.add(-1, acquire.attributes);
      const outcome = acquireOutcome(ctx);
      const attributes = { ...base(ctx), "locksmith.outcome": outcome };
      acquireDuration.record((now() - acquire.start) / 1000, attributes);
      const { span } = acquire;
      span.setAttribute("locksmith.outcome", outcome);
      if (typeof ctx.attempts === "number") span.setAttribute("locksmith.attempts", ctx.attempts);
      if (typeof ctx.waitedMs === "number") span.setAttribute("locksmith.waited_ms", ctx.waitedMs);
      const token = fencingToken(ctx);
      const multi = outcome === "acquired" ? multiTokens(ctx) : undefined;
      setTokens(span, token, multi);
      if (outcome === "error") {
        if (ctx.error !== undefined) span.recordException(ctx.error);
        span.setStatus({ code: SpanStatusCode.ERROR, message: errorMessage(ctx.error) });
      }
      span.end();
      if (outcome === "acquired") startHold(ctx, acquire, token, multi);
    },
    (ctx) => {
      const parent = context.active();
      const attributes = base(ctx);
      const span = tracer.startSpan(
        "locksmith acquire",
        { kind: SpanKind.INTERNAL, attributes: withKey({ ...attributes, "locksmith.ttl_ms": ctx.ttlMs }, ctx) },
        parent,
      );
      const acquire = { start: now(), span, parent, attributes };
      acquires.set(ctx, acquire);
      openAcquires.add(acquire);
      pendingCounter.add(1, acquire.attributes);
    },
  );

  const onRelease = onSettle("a release", (ctx) => {
    const outcome = releaseOutcome(ctx);
    // A release that failed leaves the hold as it was: a later release or its loss ends it.
    if (outcome === "error") return;
    const record = holds.get(ctx.lock);
    const hold = record?.open.get(ctx.hold);
    if (!hold) return;
    record.open.delete(ctx.hold);
    if (outcome === "released") endHold(hold, "released");
    // Not held any more, and no loss was reported first (ended holds are skipped).
    else endHold(hold, "lost", ctx.error?.code ?? "LOCK_NOT_HELD", ctx.error);
  });

  const onExtend = onSettle("an extend", (ctx) => {
    const outcome = extendOutcome(ctx);
    extendCounter.add(1, { ...base(ctx), "locksmith.outcome": outcome });
    const hold = holds.get(ctx.lock)?.open.get(ctx.hold);
    if (hold && !hold.done) hold.span.addEvent("locksmith.extend", { "locksmith.outcome": outcome, "locksmith.ttl_ms": ctx.ttlMs });
  });

  const onLost = guarded("a lost hold", (message) => {
    const record = holds.get(message?.lock);
    const hold = record?.open.get(message.hold);
    if (hold) {
      record.open.delete(message.hold);
      endHold(hold, "lost", message.reason, message.error);
      return;
    }
    // Seen and ended already (a release found it gone, or the handle was granted again):
    // counted then.
    if (record !== undefined && message.hold >= record.first) return;
    // A hold granted before instrument(): counted, though `held` never counted it.
    lostCounter.add(1, { ...base(message), "locksmith.reason": message.reason });
  });

  const channels = [
    [diagnosticsChannel.tracingChannel("locksmith:acquire"), onAcquire],
    [diagnosticsChannel.tracingChannel("locksmith:release"), onRelease],
    [diagnosticsChannel.tracingChannel("locksmith:extend"), onExtend],
  ];
  for (const [channel, handlers] of channels) channel.subscribe(handlers);
  diagnosticsChannel.subscribe("locksmith:lost", onLost);

  // Idempotent: unsubscribing what is not subscribed does nothing, and the sets are empty.
  return function uninstrument() {
    for (const [channel, handlers] of channels) channel.unsubscribe(handlers);
    diagnosticsChannel.unsubscribe("locksmith:lost", onLost);
    // What is still open would never end: close it, so `held` returns to what it was.
    for (const acquire of openAcquires) {
      acquire.span.setAttribute("locksmith.uninstrumented", true);
      acquire.span.end();
      pendingCounter.add(-1, acquire.attributes);
    }
    openAcquires.clear();
    for (const hold of openHolds) endHold(hold);
  };
}
