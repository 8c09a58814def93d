//! The three Lua scripts (the same files the redis-rs store uses) and their SHA1s.

use std::sync::OnceLock;

/// A Lua script and its SHA1, as `EVALSHA` names it.
#[derive(Debug)]
pub struct Script {
    /// The Lua source.
    pub source: &'static str,
    sha: OnceLock<String>,
}

impl Script {
    const fn new(source: &'static str) -> Self {
        Self { source, sha: OnceLock::new() }
    }

    /// The lowercase hex SHA1 of the source.
    pub fn sha(&self) -> &str {
        self.sha.get_or_init(|| sha1_smol::Sha1::from(self.source).digest().to_string())
    }
}

/// `acquire.lua`: KEYS lock, fence; ARGV owner, ttl, fence ttl.
pub static ACQUIRE: Script = Script::new(include_str!("../lua/acquire.lua"));
/// `release.lua`: KEYS lock; ARGV owner.
pub static RELEASE: Script = Script::new(include_str!("../lua/release.lua"));
/// `extend.lua`: KEYS lock, fence; ARGV owner, ttl, fence ttl.
pub static EXTEND: Script = Script::new(include_str!("../lua/extend.lua"));
