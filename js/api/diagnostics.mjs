// locksmith's diagnostics channels (docs/observability.md): `node:diagnostics_channel`
// where the runtime has it (Node, Deno, workerd with nodejs_compat), nothing where it has
// not (browsers, workerd without the flag). Free when nobody subscribes: a call checks
// `hasSubscribers` and takes its usual path.
//
//   locksmith:acquire, locksmith:release, locksmith:extend   tracing channels (tracePromise)
//   locksmith:lost                                           a plain channel
//
// No static `node:` import: this module runs in browsers too.

function diagnosticsChannel() {
  try {
    const dc = globalThis.process?.getBuiltinModule?.("node:diagnostics_channel");
    return typeof dc?.tracingChannel === "function" && typeof dc.channel === "function" ? dc : undefined;
  } catch {
    return undefined;
  }
}

const dc = diagnosticsChannel();

export const acquireChannel = dc?.tracingChannel("locksmith:acquire");
export const releaseChannel = dc?.tracingChannel("locksmith:release");
export const extendChannel = dc?.tracingChannel("locksmith:extend");
export const lostChannel = dc?.channel("locksmith:lost");

// A runtime whose TracingChannel lacks `hasSubscribers` (it came after tracingChannel
// itself) is asked channel by channel.
const EVENTS = ["start", "end", "asyncStart", "asyncEnd", "error"];
const direct = acquireChannel !== undefined && typeof acquireChannel.hasSubscribers === "boolean";

/** Whether anyone subscribes to any event of the tracing channel `channel` (undefined: no channels here). */
export const traced = direct
  ? (channel) => channel.hasSubscribers
  : (channel) => channel !== undefined && EVENTS.some((event) => channel[event]?.hasSubscribers === true);

/** Whether anyone subscribes to `locksmith:lost`. */
export const lostWatched = () => lostChannel?.hasSubscribers === true;
