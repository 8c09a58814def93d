//! locksmith for edge runtimes and browsers. The wasm-bindgen layer comes with the edge build.
