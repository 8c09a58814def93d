//! Whole replies as plain values, for the host's own short exchanges with a server:
//! asking Sentinels for the master (`SENTINEL get-master-addr-by-name`), checking a
//! node's `ROLE`, reading a cluster's `CLUSTER SLOTS`, and the Sentinel's
//! `+switch-master` messages. The lock operations never go through here: their
//! replies are read in place by the engine.

use locksmith_core::{LockError, Result};
use redis_protocol::resp2::types::OwnedFrame;

use super::resp;

/// One reply, decoded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReplyValue {
    /// A null bulk string or array.
    Nil,
    /// An integer reply.
    Integer(i64),
    /// A simple or bulk string (not UTF-8 bytes are replaced).
    Text(String),
    /// An error reply, as the server said it.
    Error(String),
    /// An array reply.
    Array(Vec<ReplyValue>),
}

impl From<OwnedFrame> for ReplyValue {
    fn from(frame: OwnedFrame) -> Self {
        match frame {
            OwnedFrame::SimpleString(bytes) | OwnedFrame::BulkString(bytes) => {
                Self::Text(String::from_utf8_lossy(&bytes).into_owned())
            }
            OwnedFrame::Error(message) => Self::Error(message),
            OwnedFrame::Integer(n) => Self::Integer(n),
            OwnedFrame::Array(items) => Self::Array(items.into_iter().map(Self::from).collect()),
            OwnedFrame::Null => Self::Nil,
        }
    }
}

/// The first complete reply in `bytes` and how many bytes it took, or `None` when more
/// bytes are needed.
///
/// # Errors
/// `STORE_UNAVAILABLE` when the bytes are not RESP.
pub fn decode(bytes: &[u8]) -> Result<Option<(ReplyValue, usize)>> {
    redis_protocol::resp2::decode::decode(bytes)
        .map(|decoded| decoded.map(|(frame, used)| (ReplyValue::from(frame), used)))
        .map_err(|e| LockError::StoreUnavailable(format!("redis: unreadable reply: {e}")))
}

/// `args` as one command, ready to write.
#[must_use]
pub fn encode_command(args: &[&[u8]]) -> Vec<u8> {
    let mut out = Vec::new();
    resp::command(&mut out, args);
    out
}

/// The hash slot of a Redis key (CRC16 of its hash tag, modulo 16384). Every key of a
/// lock shares the `{key}` tag, so they share this slot.
#[must_use]
pub fn key_slot(key: &[u8]) -> u16 {
    redis_protocol::redis_keyslot(key)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decodes_nested_replies_and_waits_for_the_rest() {
        let bytes = b"*2\r\n$9\r\n127.0.0.1\r\n$4\r\n6380\r\n";
        let (value, used) = decode(bytes).unwrap().unwrap();
        assert_eq!(used, bytes.len());
        assert_eq!(
            value,
            ReplyValue::Array(vec![ReplyValue::Text("127.0.0.1".into()), ReplyValue::Text("6380".into())])
        );
        assert_eq!(decode(&bytes[..10]).unwrap(), None);
        assert_eq!(decode(b"*-1\r\n").unwrap(), Some((ReplyValue::Nil, 5)));
        assert_eq!(decode(b"-ERR no\r\n").unwrap(), Some((ReplyValue::Error("ERR no".into()), 9)));
        assert!(decode(b"?what\r\n").is_err());
    }

    #[test]
    fn a_lock_and_its_companions_share_a_slot() {
        let lock = crate::lock_key("locksmith:", "invoice:42");
        let slot = key_slot(lock.as_bytes());
        for companion in [":fence", ":released", ":semaphore", ":rw:claim"] {
            assert_eq!(key_slot(format!("{lock}{companion}").as_bytes()), slot);
        }
        // The slot is the hash tag's: CRC16("invoice:42") mod 16384.
        assert_eq!(slot, key_slot(b"invoice:42"));
    }
}
