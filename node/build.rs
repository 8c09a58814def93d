//! Links the addon against the Node-API symbols of the host process.

fn main() {
    napi_build::setup();
}
