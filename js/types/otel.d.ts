// The public types of `locksmith-js/otel`: OpenTelemetry metrics and spans for locksmith's
// locks, over its diagnostics channels. The module needs `@opentelemetry/api` at run time
// (an optional peer dependency of locksmith-js); these types stand alone, so a project
// type-checks them (skipLibCheck: false) before it installs the API.

/** An OpenTelemetry `MeterProvider` (from `@opentelemetry/api` or an SDK): what `instrument()` uses of it. */
export interface MeterProviderLike {
  getMeter(name: string, version?: string): unknown;
}

/** An OpenTelemetry `TracerProvider` (from `@opentelemetry/api` or an SDK): what `instrument()` uses of it. */
export interface TracerProviderLike {
  getTracer(name: string, version?: string): unknown;
}

/** Options of `instrument()`. */
export interface InstrumentOptions {
  /** Where the metrics go. Default: the global one (`metrics.getMeterProvider()`), as registered when `instrument()` runs. */
  meterProvider?: MeterProviderLike;
  /** Where the spans go. Default: the global one (`trace.getTracerProvider()`). */
  tracerProvider?: TracerProviderLike;
  /**
   * Put each lock's key on its spans as `locksmith.key`. Default false: keys often hold
   * user or tenant ids. Metrics never carry keys.
   */
  recordKeys?: boolean;
}

/**
 * Starts recording every lock, semaphore permit and read or write lock of this process:
 * the histograms `locksmith.acquire.duration` and `locksmith.hold.duration` (seconds), the
 * counters `locksmith.lost` and `locksmith.extends`, the up-down counters `locksmith.held`
 * and `locksmith.acquire.pending` (acquires not yet answered), and the spans `locksmith
 * acquire` and `locksmith hold`; a fair handle's (`{ fair: true }`) carry `locksmith.fair`.
 * Returns the function that stops
 * it (calling that again does nothing). Throws InvalidArgumentError for an unknown option
 * or one of the wrong type.
 */
export declare function instrument(options?: InstrumentOptions): () => void;

/** The version this instrumentation reports as its scope's: the package's. */
export declare const VERSION: string;
