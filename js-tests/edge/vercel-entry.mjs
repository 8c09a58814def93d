// Bundled for the edge-runtime VM: the edge-light entry, as Vercel's bundler would see it.
import * as ls from "../../js/edge-light.mjs";
import { smoke } from "./smoke.mjs";

globalThis.runSmoke = () => smoke(ls);
