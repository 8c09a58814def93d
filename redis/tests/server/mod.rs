//! A `redis-server` of the tests' own, on a free loopback port. The binary comes from
//! `REDIS_SERVER` or `PATH`. It runs under a small shell that kills it when its stdin
//! closes, so the server goes when the test binary goes, however that ends.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

pub struct RedisServer {
    pub port: u16,
    extra: Vec<String>,
    child: Mutex<Option<Child>>,
}

#[allow(dead_code)] // Each test binary uses its own subset.
impl RedisServer {
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    /// Starts a server on a free port and waits until it answers PING.
    pub fn start() -> Self {
        Self::start_with(&[])
    }

    /// [`start`](Self::start) with extra `redis-server` arguments.
    pub fn start_with(extra: &[&str]) -> Self {
        let port = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let server =
            Self { port, extra: extra.iter().map(ToString::to_string).collect(), child: Mutex::new(None) };
        server.restart();
        server
    }

    /// Starts the server process (again) on the same port.
    pub fn restart(&self) {
        let binary = std::env::var("REDIS_SERVER").unwrap_or_else(|_| "redis-server".into());
        let watchdog = r#"bin="$1"; shift; "$bin" "$@" & pid=$!; read -r _; kill "$pid"; wait "$pid""#;
        let port = self.port.to_string();
        let child = Command::new("sh")
            .args(["-c", watchdog, "sh", &binary, "--port", &port, "--bind", "127.0.0.1", "--save", ""])
            .args(["--appendonly", "no", "--loglevel", "warning"])
            .args(&self.extra)
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| {
                panic!("cannot start {binary}: {e}. Install redis-server (apt-get install redis-server) or set REDIS_SERVER")
            });
        *self.child.lock().unwrap() = Some(child);
        self.wait_ready();
    }

    /// Stops the server process and waits for it to go.
    pub fn kill(&self) {
        if let Some(mut child) = self.child.lock().unwrap().take() {
            drop(child.stdin.take()); // the watchdog kills the server
            let _ = child.wait();
        }
    }

    fn wait_ready(&self) {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            if let Ok(mut stream) = TcpStream::connect(("127.0.0.1", self.port)) {
                // Any answer means it is up: +PONG, or -NOAUTH when it wants a password.
                let mut reply = [0u8; 5];
                if stream.write_all(b"PING\r\n").is_ok()
                    && stream.read_exact(&mut reply).is_ok()
                    && (&reply == b"+PONG" || &reply == b"-NOAU")
                {
                    return;
                }
            }
            assert!(Instant::now() < deadline, "redis-server did not answer on port {}", self.port);
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        self.kill();
    }
}

/// One server for the whole test binary.
pub fn shared() -> &'static RedisServer {
    static SERVER: OnceLock<RedisServer> = OnceLock::new();
    SERVER.get_or_init(RedisServer::start)
}
