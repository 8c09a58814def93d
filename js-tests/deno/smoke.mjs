// Deno: the default (self-initialising) WebAssembly entry.
import * as ls from "../../js/wasm.mjs";
import { smoke } from "../edge/smoke.mjs";

console.log(JSON.stringify(await smoke(ls)));
