// The types of the browser entry: the WebAssembly API, plus `init()`.
export * from "./edge.js";

/** Fetches and instantiates the WebAssembly module (from `input`, or next to this file). Call once before anything else. */
export declare function init(input?: RequestInfo | URL | Response | BufferSource | WebAssembly.Module): Promise<void>;
export default init;
