//! `FileStore`: the memory store's holds in a file that every process of one host
//! opens, for apps with several processes and no server.
//!
//! Each operation takes the file's OS lock (`flock` on Unix, `LockFileEx` on Windows,
//! through `std::fs::File::try_lock`), reads the holds when another process changed them
//! since this one last looked (a generation number in the header says so), runs the
//! memory store's own code on them, writes them back in one `write` when it changed
//! anything, and unlocks: a few system calls, no server round trip. The OS lock goes with
//! a process that dies, so a holder killed inside an operation blocks nobody; its holds
//! stay in the file until their TTL, like any store's.
//!
//! Expiry runs on the wall clock (milliseconds since the Unix epoch), the one clock every
//! process of the host reads alike. Fencing tokens are the wall clock in microseconds,
//! or one more than the last when that is not smaller, so they grow even across a file
//! that was deleted and made again.
//!
//! File layout: `LKSM`, a format byte, three reserved bytes, the generation (u64), the
//! payload's length (u32), its FNV-1a checksum (u64), then the payload
//! ([`State::encode`]). A file that does not read as that (cut short by a power loss, or
//! written by something else) counts as holding nothing; holds do not outlive the host's
//! processes anyway.

use std::fs::{File, OpenOptions, TryLockError};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use crate::error::{LockError, Result};
use crate::memory::{HoldView, State, WaitView};
use crate::store::{BoxFuture, Grant, HoldKind, LockStore, Timer};

const MAGIC: &[u8; 4] = b"LKSM";
const FORMAT: u8 = 1;
const HEADER: usize = 28;
/// How long an operation waits for another process to let go of the file before it
/// fails with `STORE_UNAVAILABLE` (a process stopped inside an operation).
pub const DEFAULT_BUSY_TIMEOUT_MS: u64 = 2_000;
/// How often an operation tries the OS lock, yielding the thread between tries, before
/// it sleeps a millisecond between tries instead.
const SPINS: u32 = 200;

/// Holds in a file shared by the processes of one host. See the module docs.
pub struct FileStore {
    path: PathBuf,
    file: File,
    timer: Arc<dyn Timer>,
    busy_timeout_ms: u64,
    cached: Mutex<Cached>,
}

struct Cached {
    state: State,
    /// The generation `state` was read at (0: never read).
    generation: u64,
    buf: Vec<u8>,
    closed: bool,
}

fn checksum(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, b| (h ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3))
}

#[cfg(unix)]
fn read_at(file: &File, buf: &mut [u8], offset: u64) -> std::io::Result<usize> {
    std::os::unix::fs::FileExt::read_at(file, buf, offset)
}
#[cfg(windows)]
fn read_at(file: &File, buf: &mut [u8], offset: u64) -> std::io::Result<usize> {
    std::os::windows::fs::FileExt::seek_read(file, buf, offset)
}
#[cfg(unix)]
fn write_all_at(file: &File, buf: &[u8], offset: u64) -> std::io::Result<()> {
    std::os::unix::fs::FileExt::write_all_at(file, buf, offset)
}
#[cfg(windows)]
fn write_all_at(file: &File, mut buf: &[u8], mut offset: u64) -> std::io::Result<()> {
    while !buf.is_empty() {
        let n = std::os::windows::fs::FileExt::seek_write(file, buf, offset)?;
        if n == 0 {
            return Err(std::io::ErrorKind::WriteZero.into());
        }
        buf = &buf[n..];
        offset += n as u64;
    }
    Ok(())
}

/// Reads exactly `buf.len()` bytes at `offset`, or fewer when the file ends first.
fn read_full(file: &File, buf: &mut [u8], offset: u64) -> std::io::Result<usize> {
    let mut done = 0;
    while done < buf.len() {
        match read_at(file, &mut buf[done..], offset + done as u64)? {
            0 => break,
            n => done += n,
        }
    }
    Ok(done)
}

impl FileStore {
    /// Opens (or makes) the lock file at `path`, with `timer`'s wall clock.
    ///
    /// # Errors
    /// `STORE_ERROR` when the file cannot be opened for reading and writing (a missing
    /// directory, no permission, a directory at `path`); `UNSUPPORTED` when `timer` has
    /// no wall clock.
    pub fn open(path: impl AsRef<Path>, timer: Arc<dyn Timer>) -> Result<Self> {
        let path = path.as_ref().to_path_buf();
        if timer.unix_time_ms().is_none() {
            return Err(LockError::Unsupported(
                "a file store needs a wall clock, and this runtime has none".into(),
            ));
        }
        let file =
            OpenOptions::new().read(true).write(true).create(true).truncate(false).open(&path).map_err(
                |err| LockError::StoreError(format!("cannot open the lock file {}: {err}", path.display())),
            )?;
        Ok(Self {
            path,
            file,
            timer,
            busy_timeout_ms: DEFAULT_BUSY_TIMEOUT_MS,
            cached: Mutex::new(Cached { state: State::new(), generation: 0, buf: Vec::new(), closed: false }),
        })
    }

    /// How long an operation waits for another process to let go of the file
    /// ([`DEFAULT_BUSY_TIMEOUT_MS`] unless set).
    #[must_use]
    pub fn with_busy_timeout_ms(mut self, ms: u64) -> Self {
        self.busy_timeout_ms = ms;
        self
    }

    /// The lock file's path.
    #[must_use]
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Another process may have changed the file (a file watcher saw it): this
    /// process's waiters try again now.
    pub fn changed(&self) {
        self.cached().state.wake_all();
    }

    /// Closes the store: later operations fail with `STORE_CLOSED`, and waiters wake.
    pub fn close(&self) {
        let mut cached = self.cached();
        cached.closed = true;
        cached.state.wake_all();
    }

    /// Every hold in the file, and the read-write locks' waiting writers and readers.
    ///
    /// # Errors
    /// As any operation: `STORE_UNAVAILABLE` when the file cannot be read or stays locked.
    pub async fn holds(&self) -> Result<(Vec<HoldView>, Vec<WaitView>)> {
        self.with(false, |state, now| Ok(state.views(now))).await
    }

    /// Frees every hold of `key`, whoever holds it (`locksmith release --force`); what it freed.
    ///
    /// # Errors
    /// As any operation.
    pub async fn force_release(&self, key: &str) -> Result<Vec<HoldView>> {
        self.with(true, |state, now| Ok(state.force_release(key, now))).await
    }

    fn cached(&self) -> MutexGuard<'_, Cached> {
        self.cached.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn io_error(&self, what: &str, err: &std::io::Error) -> LockError {
        LockError::StoreUnavailable(format!("{what} the lock file {}: {err}", self.path.display()))
    }

    /// Runs `op` on the holds as the file has them now, under the file's OS lock, and
    /// writes them back when `write` (an operation that may change them).
    async fn with<R>(&self, write: bool, op: impl FnOnce(&mut State, u64) -> Result<R>) -> Result<R> {
        let mut op = Some(op);
        let started = self.timer.now_ms();
        loop {
            for _ in 0..SPINS {
                let mut cached = self.cached();
                if cached.closed {
                    return Err(LockError::StoreClosed);
                }
                match self.file.try_lock() {
                    Ok(()) => {
                        let result = self.locked(&mut cached, write, op.take().expect("runs once"));
                        let unlocked = self.file.unlock();
                        return match (result, unlocked) {
                            (Ok(r), Ok(())) => Ok(r),
                            (Err(err), _) => Err(err),
                            (Ok(_), Err(err)) => Err(self.io_error("cannot unlock", &err)),
                        };
                    }
                    Err(TryLockError::WouldBlock) => {}
                    Err(TryLockError::Error(err)) => return Err(self.io_error("cannot lock", &err)),
                }
                drop(cached);
                std::thread::yield_now();
            }
            if self.timer.now_ms().saturating_sub(started) >= self.busy_timeout_ms {
                return Err(LockError::StoreUnavailable(format!(
                    "another process kept the lock file {} locked for {} ms (is one stopped inside an operation?)",
                    self.path.display(),
                    self.busy_timeout_ms
                )));
            }
            self.timer.sleep(1).await;
        }
    }

    fn locked<R>(
        &self,
        cached: &mut Cached,
        write: bool,
        op: impl FnOnce(&mut State, u64) -> Result<R>,
    ) -> Result<R> {
        let now = self.timer.unix_time_ms().unwrap_or(0);
        let mut header = [0u8; HEADER];
        let n = read_full(&self.file, &mut header, 0).map_err(|err| self.io_error("cannot read", &err))?;
        let valid = n == HEADER && &header[..4] == MAGIC && header[4] == FORMAT;
        let generation =
            if valid { u64::from_le_bytes(header[8..16].try_into().unwrap_or_default()) } else { 0 };
        if !valid || generation != cached.generation {
            let Cached { state, buf, .. } = cached;
            let len = if valid {
                u32::from_le_bytes(header[16..20].try_into().unwrap_or_default()) as usize
            } else {
                0
            };
            let sum = u64::from_le_bytes(header[20..28].try_into().unwrap_or_default());
            // A length past the file's end is damage, not something to allocate.
            let size = self.file.metadata().map_err(|err| self.io_error("cannot read", &err))?.len();
            let fits = (HEADER + len) as u64 <= size;
            buf.resize(if fits { len } else { 0 }, 0);
            let read = if valid && fits { read_full(&self.file, buf, HEADER as u64) } else { Ok(0) };
            let read = read.map_err(|err| self.io_error("cannot read", &err))?;
            if !(valid && fits && read == len && checksum(buf) == sum && state.decode(buf).is_some()) {
                // Nothing readable: no holds (the fencing counter keeps what it had).
                state.clear_holds();
            }
            cached.generation = generation;
        }
        // Tokens are the wall clock in microseconds, or one more than the last.
        cached.state.raise_fencing_token(now.saturating_mul(1_000));
        let result = op(&mut cached.state, now)?;
        if write {
            let generation = cached.generation.wrapping_add(1).max(1);
            let Cached { state, buf, .. } = cached;
            buf.clear();
            buf.resize(HEADER, 0);
            state.encode(now, buf);
            let len = u32::try_from(buf.len() - HEADER).unwrap_or(u32::MAX);
            let sum = checksum(&buf[HEADER..]);
            buf[..4].copy_from_slice(MAGIC);
            buf[4] = FORMAT;
            buf[8..16].copy_from_slice(&generation.to_le_bytes());
            buf[16..20].copy_from_slice(&len.to_le_bytes());
            buf[20..28].copy_from_slice(&sum.to_le_bytes());
            write_all_at(&self.file, buf, 0).map_err(|err| self.io_error("cannot write", &err))?;
            cached.generation = generation;
        }
        Ok(result)
    }
}

#[async_trait::async_trait]
impl LockStore for FileStore {
    async fn acquire(&self, key: &str, owner: &str, ttl_ms: u64) -> Result<bool> {
        Ok(self.acquire_with_grant(key, owner, ttl_ms).await?.is_some())
    }

    async fn release(&self, key: &str, owner: &str) -> Result<bool> {
        self.with(true, |state, now| Ok(state.release(key, owner, now))).await
    }

    async fn extend(&self, key: &str, owner: &str, ttl_ms: u64) -> Result<bool> {
        self.with(true, |state, now| Ok(state.extend(key, owner, ttl_ms, now))).await
    }

    async fn is_locked(&self, key: &str) -> Result<bool> {
        self.with(false, |state, now| Ok(state.is_locked(key, now))).await
    }

    async fn remaining_time(&self, key: &str) -> Result<Option<u64>> {
        self.with(false, |state, now| Ok(state.remaining_time(key, now))).await
    }

    async fn acquire_with_grant(&self, key: &str, owner: &str, ttl_ms: u64) -> Result<Option<Grant>> {
        self.with(true, |state, now| Ok(state.acquire(key, owner, ttl_ms, now))).await
    }

    async fn is_held_by(&self, key: &str, owner: &str) -> Result<Option<bool>> {
        self.with(false, |state, now| Ok(Some(state.is_held_by(key, owner, now)))).await
    }

    async fn owner_remaining_time(&self, key: &str, owner: &str) -> Result<crate::store::HoldCheck> {
        self.with(false, |state, now| {
            Ok(if state.is_held_by(key, owner, now) {
                crate::store::HoldCheck::Held { remaining_ms: state.remaining_time(key, now).unwrap_or(0) }
            } else {
                crate::store::HoldCheck::NotHeld
            })
        })
        .await
    }

    fn release_signal(&self, key: &str) -> Option<BoxFuture<'static, ()>> {
        let now = self.timer.unix_time_ms().unwrap_or(0);
        let mut cached = self.cached();
        if cached.closed {
            return None;
        }
        // As this process last read the file: a waiter also wakes when a file watcher
        // reports a change (`changed`), and tries again at its retry delay in any case.
        Some(cached.state.release_signal(key, now))
    }

    async fn acquire_permit(
        &self,
        key: &str,
        owner: &str,
        ttl_ms: u64,
        kind: HoldKind,
    ) -> Result<Option<Grant>> {
        self.acquire_permits(key, owner, ttl_ms, kind, 1).await
    }

    async fn acquire_permits(
        &self,
        key: &str,
        owner: &str,
        ttl_ms: u64,
        kind: HoldKind,
        permits: u32,
    ) -> Result<Option<Grant>> {
        self.with(true, |state, now| state.acquire_permits(key, owner, ttl_ms, kind, permits, now)).await
    }

    async fn release_permit(&self, key: &str, owner: &str, kind: HoldKind) -> Result<bool> {
        self.with(true, |state, now| Ok(state.release_permit(key, owner, kind, now))).await
    }

    async fn extend_permit(&self, key: &str, owner: &str, ttl_ms: u64, kind: HoldKind) -> Result<bool> {
        self.with(true, |state, now| Ok(state.extend_permit(key, owner, ttl_ms, kind, now))).await
    }

    async fn permit_count(&self, key: &str, kind: HoldKind) -> Result<u64> {
        self.with(false, |state, now| Ok(state.permit_count(key, kind, now))).await
    }

    async fn permit_remaining_time(&self, key: &str, owner: &str, kind: HoldKind) -> Result<Option<u64>> {
        self.with(false, |state, now| Ok(state.permit_remaining_time(key, owner, kind, now))).await
    }

    fn permit_release_signal(&self, key: &str, kind: HoldKind) -> Option<BoxFuture<'static, ()>> {
        let mut cached = self.cached();
        if cached.closed {
            return None;
        }
        Some(cached.state.permit_release_signal(key, kind))
    }
}
