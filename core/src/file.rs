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
//! File layout: a header in the first page — `LKSM`, a format byte, three reserved
//! bytes, the file's epoch (random, set when the file is first written), the generation
//! (one more per write), the release count (one more per write that released a hold:
//! what another process's watcher wakes its waiters for), the payload's offset and
//! length, and its FNV-1a checksum. The payload ([`State::encode`]) goes to a region the
//! header does not point at, then the header is written (one page, so a process killed
//! in between leaves the old header and the old payload, both whole). A write that
//! would change nothing is skipped. A file that is not empty and does not read as that
//! is refused (`STORE_ERROR`): it is some other file, a newer format, or damaged.

use std::fs::{File, OpenOptions, TryLockError};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use crate::error::{LockError, Result};
use crate::memory::{HoldView, KeyHolder, Sections, State, WaitView};
use crate::store::{BoxFuture, Grant, HoldKind, LockStore, Timer};

const MAGIC: &[u8; 4] = b"LKSM";
const FORMAT: u8 = 1;
/// The format of a file whose payload ends with the values holds proclaimed (an election
/// leader's): written only while some hold has one, so an earlier release, which reads
/// format 1 only, says "a newer format" instead of taking the file for a damaged one.
const FORMAT_WITH_VALUES: u8 = 2;
/// The format of a file whose payload ends with the values, then the fair queues (and
/// which holds fair handles took): written only while a fair handle holds or queues, so
/// an earlier release says "a newer format" rather than let its handles past a queue.
const FORMAT_WITH_FAIR: u8 = 3;
/// What a format byte this version reads says.
const READS: &str = "1, 2 and 3";

/// The sections a payload of `format` has (one this version reads).
fn sections(format: u8) -> Sections {
    match format {
        FORMAT_WITH_FAIR => Sections::Fair,
        FORMAT_WITH_VALUES => Sections::Values,
        _ => Sections::Holds,
    }
}
const HEADER: usize = 60;
/// Where payloads start: the header has the first page to itself.
const PAGE: u64 = 4_096;
/// How long an operation waits for another process to let go of the file before it
/// fails with `STORE_UNAVAILABLE` (a process stopped inside an operation).
pub const DEFAULT_BUSY_TIMEOUT_MS: u64 = 2_000;
/// How often an operation tries the OS lock, yielding the thread between tries, before
/// it sleeps a millisecond between tries instead.
const SPINS: u32 = 200;
/// How often an operation checks that the path still names the store's file.
#[cfg(unix)]
const REPLACED_CHECK_MS: u64 = 250;

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
    /// The file's epoch and generation `state` was read or written at (0, 0: read it).
    epoch: u64,
    generation: u64,
    /// The release count this process last saw in the header.
    releases: u64,
    /// Where the payload `state` came from, and its bytes.
    offset: u64,
    payload: Vec<u8>,
    buf: Vec<u8>,
    closed: bool,
    /// When the path was last checked to still name this store's file (monotonic ms).
    #[cfg_attr(not(unix), allow(dead_code))]
    checked_at: Option<u64>,
    /// This store has seen the file with a header: an empty file after that was emptied
    /// under it.
    seen_header: bool,
}

impl Cached {
    /// Reads everything again at the next operation (after an error, the copy here may
    /// not be the file's).
    fn forget(&mut self) {
        self.epoch = 0;
        self.generation = 0;
        self.state.clear_holds();
        self.payload.clear();
    }
}

/// The header's fields.
struct Header {
    epoch: u64,
    generation: u64,
    releases: u64,
    offset: u64,
    len: usize,
    sum: u64,
    /// The host's boot the file was last written in (0: unknown).
    boot: u64,
    /// [`FORMAT`], [`FORMAT_WITH_VALUES`] or [`FORMAT_WITH_FAIR`]: the payload's sections.
    format: u8,
}

impl Header {
    fn write(&self, out: &mut [u8; HEADER]) {
        out[..4].copy_from_slice(MAGIC);
        out[4] = self.format;
        out[5..8].fill(0);
        out[8..16].copy_from_slice(&self.epoch.to_le_bytes());
        out[16..24].copy_from_slice(&self.generation.to_le_bytes());
        out[24..32].copy_from_slice(&self.releases.to_le_bytes());
        out[32..40].copy_from_slice(&self.offset.to_le_bytes());
        out[40..44].copy_from_slice(&u32::try_from(self.len).unwrap_or(u32::MAX).to_le_bytes());
        out[44..52].copy_from_slice(&self.sum.to_le_bytes());
        out[52..60].copy_from_slice(&self.boot.to_le_bytes());
    }

    fn read(bytes: &[u8; HEADER]) -> Self {
        let u64_at = |i: usize| u64::from_le_bytes(bytes[i..i + 8].try_into().unwrap_or_default());
        Self {
            epoch: u64_at(8),
            generation: u64_at(16),
            releases: u64_at(24),
            offset: u64_at(32),
            len: u32::from_le_bytes(bytes[40..44].try_into().unwrap_or_default()) as usize,
            sum: u64_at(44),
            boot: u64_at(52),
            format: bytes[4],
        }
    }
}

/// Unlocks the file when dropped, so a panic inside an operation does not keep it locked.
/// Whether `head` (the file's first bytes) is a lock file's header, or nothing written
/// yet: zeros, where a new file's first write has put its holds but not its header.
fn header_or_none(head: &[u8]) -> bool {
    (head.len() == HEADER && &head[..4] == MAGIC) || head.iter().all(|&b| b == 0)
}

struct Unlock<'a>(&'a File);

impl Drop for Unlock<'_> {
    fn drop(&mut self) {
        let _ = self.0.unlock();
    }
}

/// Pending once (and woken at once): on the JS thread's first poll of a call, a file
/// another process has locked sends the call to tokio rather than spinning there.
struct YieldOnce(bool);

impl std::future::Future for YieldOnce {
    type Output = ();
    fn poll(mut self: std::pin::Pin<&mut Self>, cx: &mut std::task::Context<'_>) -> std::task::Poll<()> {
        if self.0 {
            return std::task::Poll::Ready(());
        }
        self.0 = true;
        cx.waker().wake_by_ref();
        std::task::Poll::Pending
    }
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
        Self::open_with(path.as_ref(), timer, true)
    }

    /// [`open`](Self::open) of a file that exists already: `STORE_ERROR` if it does not
    /// (a reader such as the CLI must not make one).
    ///
    /// # Errors
    /// As `open`, and for a missing file.
    pub fn open_existing(path: impl AsRef<Path>, timer: Arc<dyn Timer>) -> Result<Self> {
        Self::open_with(path.as_ref(), timer, false)
    }

    fn open_with(path: &Path, timer: Arc<dyn Timer>, create: bool) -> Result<Self> {
        let path = path.to_path_buf();
        if timer.unix_time_ms().is_none() {
            return Err(LockError::Unsupported(
                "a file store needs a wall clock, and this runtime has none".into(),
            ));
        }
        let file =
            OpenOptions::new().read(true).write(true).create(create).truncate(false).open(&path).map_err(
                |err| LockError::StoreError(format!("cannot open the lock file {}: {err}", path.display())),
            )?;
        // A device or a pipe (/dev/null) takes writes and reads back nothing: every
        // process would see no holds.
        let meta = file.metadata().map_err(|err| {
            LockError::StoreError(format!("cannot open the lock file {}: {err}", path.display()))
        })?;
        if !meta.is_file() {
            return Err(LockError::StoreError(format!(
                "{} is not a regular file: give FileLockStore a file of its own",
                path.display()
            )));
        }
        // Some other file, or a newer format: refused now rather than at the first call.
        let mut head = [0u8; HEADER];
        let read = |head: &mut [u8; HEADER]| {
            read_full(&file, head, 0).map_err(|err| {
                LockError::StoreError(format!("cannot read the lock file {}: {err}", path.display()))
            })
        };
        let mut n = read(&mut head)?;
        if n > 0 && !header_or_none(&head[..n]) {
            // The process that made the file may be writing its first header now (holds,
            // then header, under the file's OS lock): look again once it lets go.
            // (Real time: open is synchronous, and rare on this path.)
            let started = std::time::Instant::now();
            loop {
                match file.try_lock() {
                    Ok(()) => {
                        let _unlock = Unlock(&file);
                        n = read(&mut head)?;
                        break;
                    }
                    Err(TryLockError::WouldBlock)
                        if started.elapsed() < std::time::Duration::from_millis(DEFAULT_BUSY_TIMEOUT_MS) =>
                    {
                        std::thread::sleep(std::time::Duration::from_millis(1));
                    }
                    Err(_) => break,
                }
            }
        }
        if n > 0 && !header_or_none(&head[..n]) {
            return Err(LockError::StoreError(format!(
                "the lock file {} is not a locksmith lock file (its first bytes are not a lock file's header): give FileLockStore a file of its own",
                path.display()
            )));
        }
        if n == HEADER
            && &head[..4] == MAGIC
            && !matches!(head[4], FORMAT | FORMAT_WITH_VALUES | FORMAT_WITH_FAIR)
        {
            return Err(LockError::StoreError(format!(
                "the lock file {} has format {}, which this version of locksmith does not read (it reads {READS})",
                path.display(),
                head[4]
            )));
        }
        Ok(Self {
            path,
            file,
            timer,
            busy_timeout_ms: DEFAULT_BUSY_TIMEOUT_MS,
            cached: Mutex::new(Cached {
                state: State::new(),
                epoch: 0,
                generation: 0,
                releases: 0,
                offset: 0,
                payload: Vec::new(),
                buf: Vec::new(),
                closed: false,
                checked_at: None,
                seen_header: false,
            }),
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

    /// Another process may have changed the file (a file watcher saw it): when a hold
    /// was released since this process last looked, its waiters try again now. Reads
    /// the header only, without the OS lock (a torn read at worst wakes them for
    /// nothing, or leaves them to their retry delay).
    pub fn changed(&self) {
        let mut header = [0u8; HEADER];
        let read = matches!(read_full(&self.file, &mut header, 0), Ok(HEADER)) && &header[..4] == MAGIC;
        let mut cached = self.cached();
        if !read {
            // Unreadable now (on Windows another process's lock covers the file): a
            // wake-up for nothing costs an attempt; a missed one, a retry delay.
            cached.state.wake_all();
            return;
        }
        let header = Header::read(&header);
        if (header.epoch, header.releases) != (cached.epoch, cached.releases) {
            cached.releases = header.releases;
            cached.state.wake_all();
        }
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

    /// The live holder of the plain lock `key` (an election's leader), or `None`.
    ///
    /// # Errors
    /// As any operation.
    pub async fn holder(&self, key: &str) -> Result<Option<KeyHolder>> {
        self.with(false, |state, now| Ok(state.holder(key, now))).await
    }

    /// Keeps `value` with `owner`'s live hold of `key` unless it keeps one with a `seq`
    /// at least this one: `true` when `owner` holds `key`.
    ///
    /// # Errors
    /// As any operation.
    pub async fn proclaim(&self, key: &str, owner: &str, value: &str, seq: u64) -> Result<bool> {
        self.with(true, |state, now| Ok(state.proclaim(key, owner, value, seq, now))).await
    }

    fn cached(&self) -> MutexGuard<'_, Cached> {
        self.cached.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn io_error(&self, what: &str, err: &std::io::Error) -> LockError {
        LockError::StoreUnavailable(format!("{what} the lock file {}: {err}", self.path.display()))
    }

    fn damaged(&self, why: &str) -> LockError {
        LockError::StoreError(format!("the lock file {} {why}", self.path.display()))
    }

    /// Runs `op` on the holds as the file has them now, under the file's OS lock, and
    /// writes them back when `write` (an operation that may change them) and they changed.
    async fn with<R>(&self, write: bool, op: impl FnOnce(&mut State, u64) -> Result<R>) -> Result<R> {
        let mut op = Some(op);
        let started = self.timer.now_ms();
        let mut yielded = false;
        loop {
            for _ in 0..SPINS {
                {
                    let mut cached = self.cached();
                    if cached.closed {
                        return Err(LockError::StoreClosed);
                    }
                    match self.file.try_lock() {
                        Ok(()) => {
                            let _unlock = Unlock(&self.file);
                            let result = self.locked(&mut cached, write, op.take().expect("runs once"));
                            if result.is_err() {
                                cached.forget();
                            }
                            return result;
                        }
                        Err(TryLockError::WouldBlock) => {}
                        Err(TryLockError::Error(err)) => return Err(self.io_error("cannot lock", &err)),
                    }
                }
                if !yielded {
                    // Off the JS thread before spinning (see YieldOnce).
                    yielded = true;
                    YieldOnce(false).await;
                    continue;
                }
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

    /// Reads the header and, when another process wrote since, the holds.
    fn load(&self, cached: &mut Cached) -> Result<()> {
        let mut bytes = [0u8; HEADER];
        let n = read_full(&self.file, &mut bytes, 0).map_err(|err| self.io_error("cannot read", &err))?;
        if n == 0 {
            if cached.seen_header {
                return Err(self.damaged("was emptied while this store had it open: the holds in it are gone; open the store again once no process uses it"));
            }
            // A new file: no holds yet, and no epoch until the first write.
            return Ok(());
        }
        if n < HEADER || &bytes[..4] != MAGIC {
            if !cached.seen_header && bytes[..n].iter().all(|&b| b == 0) {
                // The first write of a new file, cut short before its header (the process
                // that made it died there): no holds yet.
                return Ok(());
            }
            return Err(self.damaged("is not a locksmith lock file (its first bytes are not a lock file's header): give FileLockStore a file of its own"));
        }
        if !matches!(bytes[4], FORMAT | FORMAT_WITH_VALUES | FORMAT_WITH_FAIR) {
            return Err(self.damaged(&format!(
                "has format {}, which this version of locksmith does not read (it reads {READS})",
                bytes[4]
            )));
        }
        let header = Header::read(&bytes);
        cached.seen_header = true;
        let boot = boot_id();
        if header.boot != 0 && boot != 0 && header.boot != boot {
            // Written before the host last started: every process that held anything in
            // it is gone (a payload a power loss cut short included), so it holds nothing.
            if (header.epoch, header.generation) != (cached.epoch, cached.generation) {
                cached.state.clear_holds();
                cached.payload.clear();
                cached.epoch = header.epoch;
                cached.generation = header.generation;
                cached.releases = header.releases;
                cached.offset = header.offset;
            }
            return Ok(());
        }
        if cached.epoch != 0 && header.epoch != cached.epoch {
            // The same file (the path check sees a replaced one), made anew under this store.
            return Err(self.damaged("was emptied and written again while this store had it open: the holds in it before are gone; open the store again once no process uses it"));
        }
        if header.releases != cached.releases || header.epoch != cached.epoch {
            // Another process released a hold: this process's waiters try again.
            cached.releases = header.releases;
            cached.state.wake_all();
        }
        if (header.epoch, header.generation) == (cached.epoch, cached.generation) {
            return Ok(());
        }
        let size = self.file.metadata().map_err(|err| self.io_error("cannot read", &err))?.len();
        if header.offset < PAGE || header.offset.saturating_add(header.len as u64) > size {
            return Err(self
                .damaged("is damaged (its header points past its end); delete it once no process uses it"));
        }
        let Cached { state, payload, .. } = cached;
        payload.resize(header.len, 0);
        let read = read_full(&self.file, payload, header.offset)
            .map_err(|err| self.io_error("cannot read", &err))?;
        if read != header.len
            || checksum(payload) != header.sum
            || state.decode(payload, sections(header.format)).is_none()
        {
            return Err(self.damaged(
                "is damaged (its holds do not match their checksum); delete it once no process uses it",
            ));
        }
        cached.epoch = header.epoch;
        cached.generation = header.generation;
        cached.offset = header.offset;
        Ok(())
    }

    /// Whether the path still names the file this store has open (checked at most every
    /// [`REPLACED_CHECK_MS`]): a file deleted or replaced under running processes splits
    /// them between two files that do not see each other's holds, so the store refuses
    /// from then on rather than go on alone.
    #[cfg(unix)]
    fn check_replaced(&self, cached: &mut Cached) -> Result<()> {
        use std::os::unix::fs::MetadataExt;
        let now = self.timer.now_ms();
        if cached.checked_at.is_some_and(|at| now.saturating_sub(at) < REPLACED_CHECK_MS) {
            return Ok(());
        }
        let open = self.file.metadata().map_err(|err| self.io_error("cannot read", &err))?;
        let same = std::fs::metadata(&self.path)
            .is_ok_and(|named| (named.dev(), named.ino()) == (open.dev(), open.ino()));
        if !same {
            return Err(self.damaged("was deleted or replaced while this store had it open: processes that open the path now use another file, and the two do not see each other's holds; open the store again once no process uses the old file"));
        }
        cached.checked_at = Some(now);
        Ok(())
    }

    #[cfg(not(unix))]
    #[allow(clippy::unused_self, clippy::unnecessary_wraps)]
    fn check_replaced(&self, _cached: &mut Cached) -> Result<()> {
        // Not checked: the standard library has no stable file identity on Windows yet.
        Ok(())
    }

    fn locked<R>(
        &self,
        cached: &mut Cached,
        write: bool,
        op: impl FnOnce(&mut State, u64) -> Result<R>,
    ) -> Result<R> {
        let now = self.timer.unix_time_ms().unwrap_or(0);
        self.check_replaced(cached)?;
        self.load(cached)?;
        // Tokens are the wall clock in microseconds, or one more than the last.
        cached.state.raise_fencing_token(now.saturating_mul(1_000));
        let wakes = cached.state.wakes();
        let result = op(&mut cached.state, now)?;
        if !write {
            return Ok(result);
        }
        let released = cached.state.wakes() != wakes;
        let Cached { state, buf, payload, .. } = cached;
        buf.clear();
        let written = state.encode(now, buf);
        // Nothing changed (a refused acquire): the holds are the same. The fencing
        // counter (the first 8 bytes) is left out: raised to the clock before every
        // operation, it differs, but a token minted always changes a hold too.
        let empty = [0u8; 12];
        let before = if payload.is_empty() { &empty[..] } else { &payload[8.min(payload.len())..] };
        if !released && &buf[8..] == before {
            return Ok(result);
        }
        // The payload goes where the header does not point, then the header.
        let current = cached.offset.max(PAGE);
        let span = |len: usize| (len as u64).div_ceil(PAGE).max(1) * PAGE;
        let offset = if current > PAGE && (cached.buf.len() as u64) <= current - PAGE {
            PAGE
        } else {
            current + span(cached.payload.len())
        };
        write_all_at(&self.file, &cached.buf, offset).map_err(|err| self.io_error("cannot write", &err))?;
        let epoch = if cached.epoch == 0 { random_epoch()? } else { cached.epoch };
        let header = Header {
            epoch,
            generation: cached.generation.wrapping_add(1).max(1),
            releases: cached.releases.wrapping_add(u64::from(released)),
            offset,
            len: cached.buf.len(),
            sum: checksum(&cached.buf),
            boot: boot_id(),
            format: match written {
                Sections::Holds => FORMAT,
                Sections::Values => FORMAT_WITH_VALUES,
                Sections::Fair => FORMAT_WITH_FAIR,
            },
        };
        let mut bytes = [0u8; HEADER];
        header.write(&mut bytes);
        write_all_at(&self.file, &bytes, 0).map_err(|err| self.io_error("cannot write", &err))?;
        cached.epoch = header.epoch;
        cached.generation = header.generation;
        cached.releases = header.releases;
        cached.offset = offset;
        std::mem::swap(&mut cached.payload, &mut cached.buf);
        Ok(result)
    }
}

/// This boot of the host, as a number (0 where it cannot be told): Linux's boot id,
/// macOS's boot time.
fn boot_id() -> u64 {
    static BOOT: std::sync::OnceLock<u64> = std::sync::OnceLock::new();
    *BOOT.get_or_init(|| {
        #[cfg(target_os = "linux")]
        {
            std::fs::read("/proc/sys/kernel/random/boot_id").map_or(0, |id| checksum(id.trim_ascii()).max(1))
        }
        #[cfg(target_os = "macos")]
        {
            let mut boot = libc::timeval { tv_sec: 0, tv_usec: 0 };
            let mut size = std::mem::size_of::<libc::timeval>();
            let mib = [libc::CTL_KERN, libc::KERN_BOOTTIME];
            // SAFETY: kern.boottime writes one timeval into `boot`, of `size` bytes.
            #[allow(unsafe_code)] // sysctl has no safe wrapper in std.
            let done = unsafe {
                libc::sysctl(
                    mib.as_ptr().cast_mut(),
                    2,
                    (&raw mut boot).cast(),
                    &raw mut size,
                    std::ptr::null_mut(),
                    0,
                )
            };
            if done == 0 {
                (u64::try_from(boot.tv_sec).unwrap_or(0) * 1_000_000
                    + u64::try_from(boot.tv_usec).unwrap_or(0))
                .max(1)
            } else {
                0
            }
        }
        #[cfg(not(any(target_os = "linux", target_os = "macos")))]
        {
            0
        }
    })
}

fn random_epoch() -> Result<u64> {
    let mut raw = [0u8; 8];
    getrandom::fill(&mut raw).map_err(|e| LockError::NoRandomSource(e.to_string()))?;
    Ok(u64::from_le_bytes(raw).max(1))
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

    fn acquire_all<'a>(
        &'a self,
        keys: &'a [String],
        owner: &'a str,
        ttl_ms: u64,
    ) -> Option<BoxFuture<'a, Result<crate::store::AllGrant>>> {
        Some(Box::pin(self.with(true, move |state, now| Ok(state.acquire_all(keys, owner, ttl_ms, now)))))
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

    async fn acquire_fair(
        &self,
        key: &str,
        owner: &str,
        ttl_ms: u64,
        kind: HoldKind,
        permits: u32,
        waits: bool,
    ) -> Result<Option<Grant>> {
        self.with(true, |state, now| state.fair_attempt(key, owner, ttl_ms, kind, permits, waits, now)).await
    }

    fn fair_key(&self, key: &str, kind: HoldKind) -> bool {
        // As this process last read the file: the lock asks just after its refused attempt.
        let now = self.timer.unix_time_ms().unwrap_or(0);
        self.cached().state.fair_key(key, kind, now)
    }

    fn permit_release_signal(&self, key: &str, kind: HoldKind) -> Option<BoxFuture<'static, ()>> {
        let mut cached = self.cached();
        if cached.closed {
            return None;
        }
        Some(cached.state.permit_release_signal(key, kind))
    }
}
