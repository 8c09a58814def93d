// Test-only, preloaded (node --import) by the runs under Wine: Wine 8's setsockopt does
// not know IPPROTO_TCP's TCP_KEEPALIVE (option 3: "Unknown IPPROTO_TCP optname
// 0x00000003"), which libuv sets for socket.setKeepAlive(true, ...), so a connect with
// keepalive on fails there with UNKNOWN. Windows 10 1709 and later have the option. Keepalive
// probes matter nothing to a run of a few seconds, so here setKeepAlive only counts its
// calls (the report shows the driver asked for it). Never shipped.
import net from "node:net";

globalThis.__keepAliveCalls = 0;
net.Socket.prototype.setKeepAlive = function setKeepAlive() {
  globalThis.__keepAliveCalls++;
  return this;
};
