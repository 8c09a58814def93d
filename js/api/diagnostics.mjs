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

// `hasSubscribers` is a getter in Node and Deno, a method in workerd; a TracingChannel
// without it (it came after tracingChannel itself) is asked event by event.
const EVENTS = ["start", "end", "asyncStart", "asyncEnd", "error"];
const subscribed = (channel) => {
  const has = channel?.hasSubscribers;
  return typeof has === "function" ? has.call(channel) === true : has === true;
};
const tracingForm = typeof acquireChannel?.hasSubscribers;
const lostForm = typeof lostChannel?.hasSubscribers;

/** Whether anyone subscribes to any event of the tracing channel `channel` (undefined: no channels here). */
export const traced =
  tracingForm === "boolean"
    ? (channel) => channel.hasSubscribers
    : tracingForm === "function"
      ? (channel) => channel.hasSubscribers() === true
      : (channel) => channel !== undefined && EVENTS.some((event) => subscribed(channel[event]));

/** Whether anyone subscribes to `locksmith:lost`. */
export const lostWatched =
  lostForm === "boolean" ? () => lostChannel.hasSubscribers : lostForm === "function" ? () => lostChannel.hasSubscribers() === true : () => false;
