// The documented signatures of locksmith-js/otel, type-checked with `tsc --noEmit`. Not run.
import { metrics, trace } from "@opentelemetry/api";
import { instrument, VERSION, type InstrumentOptions } from "locksmith-js/otel";

export function otel(): void {
  const stop: () => void = instrument();
  stop();
  const options: InstrumentOptions = { meterProvider: metrics.getMeterProvider(), tracerProvider: trace.getTracerProvider(), recordKeys: true };
  instrument(options)();
  instrument({ recordKeys: false });
  const version: string = VERSION;
  // @ts-expect-error unknown option
  instrument({ recordKey: true });
  // @ts-expect-error recordKeys is a boolean
  instrument({ recordKeys: "yes" });
  // @ts-expect-error a MeterProvider has getMeter()
  instrument({ meterProvider: {} });
  // @ts-expect-error uninstrument() returns nothing
  const nothing: boolean = stop();
  void [version, nothing];
}
