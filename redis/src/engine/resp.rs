//! Command encoding, with `redis-protocol`'s RESP2 encoder.

use redis_protocol::resp2::encode::encode_borrowed;
use redis_protocol::resp2::types::BorrowedFrame;

use super::Script;

/// Appends `args` as one command (a RESP array of bulk strings) to `out`.
pub fn command(out: &mut Vec<u8>, args: &[&[u8]]) {
    let frames: Vec<BorrowedFrame<'_>> = args.iter().map(|a| BorrowedFrame::BulkString(a)).collect();
    append(out, &BorrowedFrame::Array(&frames));
}

fn append(out: &mut Vec<u8>, frame: &BorrowedFrame<'_>) {
    let start = out.len();
    out.resize(start + frame.encode_len(false), 0);
    // The buffer was sized with the encoder's own length: it cannot be too small.
    let written =
        encode_borrowed(&mut out[start..], frame, false).expect("RESP encoding into a buffer of its size");
    out.truncate(start + written);
}

/// `<name> <prefix>{<key>}`.
pub fn key_command(out: &mut Vec<u8>, name: &[u8], prefix: &str, key: &str) {
    let lock_key = crate::lock_key(prefix, key);
    command(out, &[name, lock_key.as_bytes()]);
}

/// `EVALSHA sha n <prefix>{<key>} [<prefix>{<key>}:fence] args...`, or `EVAL` with the
/// source when `eval`.
pub fn script(
    out: &mut Vec<u8>,
    script: &Script,
    eval: bool,
    prefix: &str,
    key: &str,
    fence: bool,
    args: &[&[u8]],
) {
    let lock_key = crate::lock_key(prefix, key);
    if fence {
        let fence_key = format!("{lock_key}:fence");
        script_on(out, script, eval, &[&lock_key, &fence_key], args);
    } else {
        script_on(out, script, eval, &[&lock_key], args);
    }
}

/// `EVALSHA sha n keys... args...`, or `EVAL` with the source when `eval`.
pub fn script_on(out: &mut Vec<u8>, script: &Script, eval: bool, keys: &[&str], args: &[&[u8]]) {
    let count = keys.len().to_string();
    let mut parts: Vec<&[u8]> = Vec::with_capacity(3 + keys.len() + args.len());
    if eval {
        parts.extend([b"EVAL".as_slice(), script.source.as_bytes()]);
    } else {
        parts.extend([b"EVALSHA".as_slice(), script.sha().as_bytes()]);
    }
    parts.push(count.as_bytes());
    parts.extend(keys.iter().map(|k| k.as_bytes()));
    parts.extend_from_slice(args);
    command(out, &parts);
}
