//! The serialized form of a held lock: one JSON object, the same in every runtime.

use std::borrow::Cow;

use crate::error::{LockError, Result};
use crate::store::HoldKind;
use crate::token::OwnerToken;
use crate::validate;

/// Longer input is refused before it is parsed.
pub const MAX_SERIALIZED_BYTES: usize = 160 * 1024;

// `{"key":"invoice:42","ttlMs":30000,"owner":"<32 hex>","fencingToken":7,"expiresAt":1764500000000}`.
// `fencingToken` is present when the store gave one; `expiresAt` (milliseconds since
// the Unix epoch, by the serializing host's wall clock) when the runtime has a wall
// clock, and is optional on input so strings written before it existed still restore.
// `kind` (`"semaphore"`, `"read"` or `"write"`) is absent for a plain lock; `limit` is a
// semaphore's. A lock on several keys has `keys` (an array of strings, in canonical
// order) instead of `key`, `fencingTokens` (one number or `null` per key) instead of
// `fencingToken`, and `kind` `"multi"`. The owner token makes this a bearer secret: whoever has the string can
// release or extend the lock.
//
// The format is fixed and small, so it is written and read here rather than through a
// general JSON library: that keeps the WebAssembly build small. The reader takes any
// JSON object of these fields (any order, whitespace, escapes, `null` for an absent
// optional field) and refuses everything else, unknown and repeated fields included.

/// A held lock as it travels between processes.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct SerializedLock {
    /// The lock key.
    pub key: String,
    /// The lock's TTL.
    pub ttl_ms: u64,
    /// Who holds it.
    pub owner: OwnerToken,
    /// The fencing token of the hold, if the store gave one.
    pub fencing_token: Option<u64>,
    /// When the hold expires at the latest, in milliseconds since the Unix epoch.
    pub expires_at_unix_ms: Option<u64>,
    /// A lock, a semaphore permit, a read or a write lock.
    pub kind: HoldKind,
    /// The keys of a lock on several keys (then `key` is their label); empty otherwise.
    pub keys: Vec<String>,
    /// A lock on several keys: each key's fencing token.
    pub fencing_tokens: Vec<Option<u64>>,
}

impl SerializedLock {
    /// The JSON text.
    #[must_use]
    pub fn to_json(&self) -> String {
        let mut out = String::with_capacity(96 + self.key.len());
        if self.keys.is_empty() {
            out.push_str("{\"key\":");
            write_string(&mut out, &self.key);
        } else {
            out.push_str("{\"keys\":[");
            for (i, key) in self.keys.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_string(&mut out, key);
            }
            out.push(']');
        }
        out.push_str(",\"ttlMs\":");
        out.push_str(&self.ttl_ms.to_string());
        out.push_str(",\"owner\":\"");
        out.push_str(self.owner.as_str());
        out.push('"');
        if let Some(token) = self.fencing_token {
            out.push_str(",\"fencingToken\":");
            out.push_str(&token.to_string());
        }
        if !self.keys.is_empty() {
            out.push_str(",\"fencingTokens\":[");
            for (i, token) in self.fencing_tokens.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                match token {
                    Some(token) => out.push_str(&token.to_string()),
                    None => out.push_str("null"),
                }
            }
            out.push_str("],\"kind\":\"multi\"");
        }
        if let Some(at) = self.expires_at_unix_ms {
            out.push_str(",\"expiresAt\":");
            out.push_str(&at.to_string());
        }
        match self.kind {
            HoldKind::Permit { limit } => {
                out.push_str(",\"kind\":\"semaphore\",\"limit\":");
                out.push_str(&limit.to_string());
            }
            HoldKind::Read => out.push_str(",\"kind\":\"read\""),
            HoldKind::Write => out.push_str(",\"kind\":\"write\""),
            _ => {}
        }
        out.push('}');
        out
    }

    /// Parses text written by [`to_json`](Self::to_json), and nothing else.
    pub fn parse(text: &str) -> Result<Self> {
        let bad = |why: String| LockError::InvalidSerializedLock(why);
        if text.len() > MAX_SERIALIZED_BYTES {
            return Err(bad(format!(
                "it is {} bytes long; a serialized lock is at most {MAX_SERIALIZED_BYTES}",
                text.len()
            )));
        }
        let wire = Wire::read(text).map_err(|e| {
            bad(format!("expected JSON {{\"key\", \"ttlMs\", \"owner\"}} from serialize(): {e}"))
        })?;
        let keys = if let Some(keys) = wire.keys {
            {
                let keys: Vec<String> = keys.into_iter().map(Cow::into_owned).collect();
                let sorted = validate::keys(keys.clone()).map_err(|e| bad(strip(&e)))?;
                if sorted != keys {
                    return Err(bad("keys must be in the order serialize() writes them".into()));
                }
                if wire.kind.as_deref() != Some("multi") || wire.fencing_token.is_some() {
                    return Err(bad("keys go with kind \"multi\" and fencingTokens".into()));
                }
                if wire.fencing_tokens_given && wire.fencing_tokens.len() != keys.len() {
                    return Err(bad("fencingTokens must have one entry per key".into()));
                }
                keys
            }
        } else {
            {
                validate::key(&wire.key).map_err(|e| bad(strip(&e)))?;
                if wire.fencing_tokens_given {
                    return Err(bad("fencingTokens go with keys".into()));
                }
                Vec::new()
            }
        };
        let ttl_ms = whole(wire.ttl_ms)
            .ok_or_else(|| {
                bad(format!(
                    "ttlMs must be a whole number of milliseconds from 1 to {}; got {}",
                    validate::MAX_TTL_MS,
                    wire.ttl_ms
                ))
            })
            .and_then(|ms| validate::ttl_ms(ms).map_err(|e| bad(strip(&e))))?;
        let owner = OwnerToken::parse(&wire.owner)?;
        let kind = match (wire.kind.as_deref(), wire.limit) {
            (None, None) => HoldKind::Exclusive,
            (Some("multi"), None) if !keys.is_empty() => HoldKind::Exclusive,
            (Some("semaphore"), Some(limit)) if limit >= 1 => HoldKind::Permit { limit },
            (Some("read"), None) => HoldKind::Read,
            (Some("write"), None) => HoldKind::Write,
            (kind, limit) => {
                return Err(bad(format!(
                    "kind {} with limit {}: expected no kind (a lock), \"semaphore\" with a limit from 1, \"read\" or \"write\"",
                    kind.map_or_else(|| "none".into(), validate::quote),
                    limit.map_or_else(|| "none".into(), |l| l.to_string())
                )))
            }
        };
        let fencing_tokens = if keys.is_empty() || !wire.fencing_tokens.is_empty() {
            wire.fencing_tokens
        } else {
            vec![None; keys.len()]
        };
        Ok(Self {
            key: if keys.is_empty() { wire.key.into_owned() } else { keys.join(", ") },
            ttl_ms,
            owner,
            fencing_token: wire.fencing_token,
            expires_at_unix_ms: wire.expires_at,
            kind,
            keys,
            fencing_tokens,
        })
    }
}

/// `text` as a JSON string literal: quotes, backslashes and control characters escaped.
fn write_string(out: &mut String, text: &str) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    out.push('"');
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            c if (c as u32) < 0x20 => {
                out.push_str("\\u00");
                out.push(char::from(HEX[(c as usize) >> 4]));
                out.push(char::from(HEX[(c as usize) & 0xf]));
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

/// A JSON number's text as a `u64`, when it is a whole number in range written
/// without a fraction or exponent.
fn whole(number: &str) -> Option<u64> {
    if number.bytes().all(|b| b.is_ascii_digit()) {
        number.parse().ok()
    } else {
        None
    }
}

/// The fields as read, before their values are checked.
#[derive(Default)]
struct Wire<'a> {
    key: Cow<'a, str>,
    ttl_ms: &'a str,
    owner: Cow<'a, str>,
    fencing_token: Option<u64>,
    expires_at: Option<u64>,
    kind: Option<Cow<'a, str>>,
    limit: Option<u32>,
    keys: Option<Vec<Cow<'a, str>>>,
    fencing_tokens: Vec<Option<u64>>,
    fencing_tokens_given: bool,
}

/// The largest fencing token a JS number carries exactly.
const MAX_SAFE_TOKEN: u64 = (1 << 53) - 1;

/// One JSON value as far as a serialized lock needs to know it.
enum Value<'a> {
    String(Cow<'a, str>),
    /// The number's text, checked against JSON's grammar.
    Number(&'a str),
    Null,
    Array(Vec<Value<'a>>),
    /// Anything else, by name: `a boolean`, `an object`.
    Other(&'static str),
}

impl Value<'_> {
    fn name(&self) -> String {
        match self {
            Value::String(_) => "a string".into(),
            Value::Number(n) => format!("number {n}"),
            Value::Null => "null".into(),
            Value::Array(_) => "an array".into(),
            Value::Other(what) => (*what).into(),
        }
    }
}

impl<'a> Wire<'a> {
    fn read(text: &'a str) -> std::result::Result<Self, String> {
        const FIELDS: [&str; 9] =
            ["key", "ttlMs", "owner", "fencingToken", "expiresAt", "kind", "limit", "keys", "fencingTokens"];
        let mut reader = Reader { text, at: 0 };
        let mut wire = Wire::default();
        let mut seen = [false; 9];
        reader.expect(b'{')?;
        if reader.peek() == Some(b'}') {
            reader.at += 1;
        } else {
            loop {
                let Value::String(name) = reader.value()? else {
                    return Err(reader.error("expected a field name"));
                };
                let Some(field) = FIELDS.iter().position(|f| *f == name) else {
                    return Err(format!(
                        "unknown field `{name}`, expected one of `key`, `ttlMs`, `owner`, `fencingToken`, `expiresAt`, `kind`, `limit`, `keys`, `fencingTokens`"
                    ));
                };
                if std::mem::replace(&mut seen[field], true) {
                    return Err(format!("duplicate field `{name}`"));
                }
                reader.expect(b':')?;
                let value = reader.value()?;
                let wrong = |value: &Value, expected: &str| {
                    format!("invalid type: {}, expected {expected}", value.name())
                };
                match (field, value) {
                    (7, Value::Array(items)) => {
                        let mut keys = Vec::with_capacity(items.len());
                        for item in items {
                            let Value::String(key) = item else {
                                return Err(wrong(&item, "an array of strings"));
                            };
                            keys.push(key);
                        }
                        wire.keys = Some(keys);
                    }
                    (8, Value::Array(items)) => {
                        wire.fencing_tokens_given = true;
                        for item in items {
                            wire.fencing_tokens.push(match item {
                                Value::Null => None,
                                // A token is a positive safe integer, as a store gives it.
                                Value::Number(n) => {
                                    Some(whole(n).filter(|t| (1..=MAX_SAFE_TOKEN).contains(t)).ok_or_else(
                                        || format!("invalid value: number {n}, expected a fencing token"),
                                    )?)
                                }
                                other => return Err(wrong(&other, "an array of fencing tokens or null")),
                            });
                        }
                    }
                    (3..=6 | 8, Value::Null) => {}
                    (7 | 8, other) => return Err(wrong(&other, "an array")),
                    (0, Value::String(s)) => wire.key = s,
                    (2, Value::String(s)) => wire.owner = s,
                    (5, Value::String(s)) => wire.kind = Some(s),
                    (1, Value::Number(n)) => wire.ttl_ms = n,
                    (3 | 4 | 6, Value::Number(n)) => {
                        let expected = if field == 6 { "u32" } else { "u64" };
                        let n = whole(n)
                            .filter(|&n| field != 6 || u32::try_from(n).is_ok())
                            .ok_or_else(|| format!("invalid value: number {n}, expected {expected}"))?;
                        match field {
                            3 => wire.fencing_token = Some(n),
                            4 => wire.expires_at = Some(n),
                            _ => wire.limit = Some(n as u32),
                        }
                    }
                    (0 | 2 | 5, other) => return Err(wrong(&other, "a string")),
                    (1, other) => return Err(wrong(&other, "a JSON number")),
                    (6, other) => return Err(wrong(&other, "u32")),
                    (_, other) => return Err(wrong(&other, "u64")),
                }
                match reader.next_byte() {
                    Some(b',') => {}
                    Some(b'}') => break,
                    _ => return Err(reader.error("expected `,` or `}`")),
                }
            }
        }
        reader.skip_whitespace();
        if reader.at < text.len() {
            return Err(reader.error("trailing characters"));
        }
        if seen[0] && seen[7] {
            return Err("both `key` and `keys`".into());
        }
        for (field, name) in FIELDS.iter().enumerate().take(3) {
            if !(seen[field] || field == 0 && seen[7]) {
                return Err(format!("missing field `{name}`"));
            }
        }
        Ok(wire)
    }
}

/// A cursor over the text, for [`Wire::read`].
struct Reader<'a> {
    text: &'a str,
    at: usize,
}

impl<'a> Reader<'a> {
    /// `text[from..to]` (always on character boundaries here), without the panicking
    /// path of slicing, which pulls `Debug` formatting into the WebAssembly build.
    fn slice(&self, from: usize, to: usize) -> &'a str {
        self.text.get(from..to).unwrap_or_default()
    }

    fn error(&self, what: &str) -> String {
        if self.at >= self.text.len() {
            format!("{what}: the text ends at byte {}", self.text.len())
        } else {
            format!("{what} at byte {}", self.at)
        }
    }

    fn skip_whitespace(&mut self) {
        while matches!(self.text.as_bytes().get(self.at), Some(b' ' | b'\t' | b'\n' | b'\r')) {
            self.at += 1;
        }
    }

    /// The next byte after whitespace, without taking it.
    fn peek(&mut self) -> Option<u8> {
        self.skip_whitespace();
        self.text.as_bytes().get(self.at).copied()
    }

    fn next_byte(&mut self) -> Option<u8> {
        let byte = self.peek();
        self.at += 1;
        byte
    }

    fn expect(&mut self, byte: u8) -> std::result::Result<(), String> {
        if self.next_byte() == Some(byte) {
            Ok(())
        } else {
            self.at -= 1;
            Err(self.error(&format!("expected `{}`", char::from(byte))))
        }
    }

    fn value(&mut self) -> std::result::Result<Value<'a>, String> {
        let rest = self.slice(self.at, self.text.len());
        match self.peek() {
            Some(b'"') => self.string().map(Value::String),
            Some(b'-' | b'0'..=b'9') => self.number().map(Value::Number),
            Some(b'[') => {
                self.at += 1;
                let mut items = Vec::new();
                if self.peek() == Some(b']') {
                    self.at += 1;
                    return Ok(Value::Array(items));
                }
                loop {
                    // Only arrays of strings and numbers are read: a nested one is refused.
                    if self.peek() == Some(b'[') {
                        return Err(self.error("nested array"));
                    }
                    items.push(self.value()?);
                    match self.next_byte() {
                        Some(b',') => {}
                        Some(b']') => return Ok(Value::Array(items)),
                        _ => return Err(self.error("expected `,` or `]`")),
                    }
                }
            }
            Some(b'{') => Ok(Value::Other("an object")),
            _ => {
                let rest = rest.trim_start_matches([' ', '\t', '\n', '\r']);
                for (word, value) in [
                    ("null", Value::Null),
                    ("true", Value::Other("a boolean")),
                    ("false", Value::Other("a boolean")),
                ] {
                    if rest.starts_with(word) {
                        self.at += word.len();
                        return Ok(value);
                    }
                }
                Err(self.error("expected a value"))
            }
        }
    }

    /// A number by JSON's grammar: `-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?`.
    fn number(&mut self) -> std::result::Result<&'a str, String> {
        let bytes = self.text.as_bytes();
        let start = self.at;
        let digits = |at: &mut usize| {
            let from = *at;
            while bytes.get(*at).is_some_and(u8::is_ascii_digit) {
                *at += 1;
            }
            *at > from
        };
        let mut at = start;
        if bytes[at] == b'-' {
            at += 1;
        }
        let first = at;
        let mut ok = digits(&mut at) && (bytes[first] != b'0' || at == first + 1);
        if ok && bytes.get(at) == Some(&b'.') {
            at += 1;
            ok = digits(&mut at);
        }
        if ok && matches!(bytes.get(at), Some(b'e' | b'E')) {
            at += 1;
            if matches!(bytes.get(at), Some(b'+' | b'-')) {
                at += 1;
            }
            ok = digits(&mut at);
        }
        if !ok {
            self.at = at;
            return Err(self.error("invalid number"));
        }
        self.at = at;
        Ok(self.slice(start, at))
    }

    /// A string literal, borrowed from the text unless it has escapes.
    fn string(&mut self) -> std::result::Result<Cow<'a, str>, String> {
        let bytes = self.text.as_bytes();
        self.at += 1;
        let start = self.at;
        let mut owned: Option<String> = None;
        let mut plain_from = start;
        loop {
            match bytes.get(self.at) {
                None => return Err(self.error("unterminated string")),
                Some(b'"') => {
                    let tail = self.slice(plain_from, self.at);
                    self.at += 1;
                    return Ok(match owned {
                        None => Cow::Borrowed(tail),
                        Some(mut s) => {
                            s.push_str(tail);
                            Cow::Owned(s)
                        }
                    });
                }
                Some(&b) if b < 0x20 => return Err(self.error("control character in a string")),
                Some(b'\\') => {
                    let s = owned.get_or_insert_with(String::new);
                    s.push_str(self.slice(plain_from, self.at));
                    self.at += 1;
                    let c = match bytes.get(self.at) {
                        Some(b'"') => '"',
                        Some(b'\\') => '\\',
                        Some(b'/') => '/',
                        Some(b'b') => '\u{8}',
                        Some(b'f') => '\u{c}',
                        Some(b'n') => '\n',
                        Some(b'r') => '\r',
                        Some(b't') => '\t',
                        Some(b'u') => {
                            let high = self.hex4()?;
                            let code = if (0xd800..0xdc00).contains(&high) {
                                if bytes.get(self.at + 1..self.at + 3) != Some(b"\\u") {
                                    return Err(self.error("lone surrogate in a \\u escape"));
                                }
                                self.at += 2;
                                let low = self.hex4()?;
                                if !(0xdc00..0xe000).contains(&low) {
                                    return Err(self.error("lone surrogate in a \\u escape"));
                                }
                                0x10000 + ((high - 0xd800) << 10) + (low - 0xdc00)
                            } else {
                                high
                            };
                            char::from_u32(code)
                                .ok_or_else(|| self.error("lone surrogate in a \\u escape"))?
                        }
                        _ => return Err(self.error("invalid escape")),
                    };
                    s.push(c);
                    self.at += 1;
                    plain_from = self.at;
                }
                Some(_) => self.at += 1,
            }
        }
    }

    /// The four hex digits after `\u` (the cursor is on the `u`; it ends on the last digit).
    fn hex4(&mut self) -> std::result::Result<u32, String> {
        let digits =
            self.text.get(self.at + 1..self.at + 5).filter(|d| d.bytes().all(|b| b.is_ascii_hexdigit()));
        let Some(digits) = digits else {
            return Err(self.error("invalid \\u escape"));
        };
        self.at += 4;
        u32::from_str_radix(digits, 16).map_err(|_| self.error("invalid \\u escape"))
    }
}

/// The message of an argument error without its `locksmith: ` prefix, to nest it.
fn strip(err: &LockError) -> String {
    match err {
        LockError::InvalidArgument(msg) => msg.clone(),
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> SerializedLock {
        SerializedLock {
            key: "import:99 \"quoted\" ✓".into(),
            ttl_ms: 60_000,
            owner: OwnerToken::generate().unwrap(),
            fencing_token: Some(7),
            expires_at_unix_ms: Some(1_764_500_000_000),
            kind: HoldKind::Exclusive,
            keys: Vec::new(),
            fencing_tokens: Vec::new(),
        }
    }

    #[test]
    fn a_lock_on_several_keys_round_trips() {
        let s = SerializedLock {
            key: "a, b \"q\"".into(),
            fencing_token: None,
            keys: vec!["a".into(), "b \"q\"".into()],
            fencing_tokens: vec![Some(3), None],
            ..sample()
        };
        let json = s.to_json();
        assert!(json.starts_with(r#"{"keys":["a","b \"q\""],"#), "{json}");
        assert!(json.contains(r#""fencingTokens":[3,null],"kind":"multi""#), "{json}");
        assert_eq!(SerializedLock::parse(&json).unwrap(), s);
        // Reordered and spaced, as another JSON writer may put it.
        let owner = s.owner.as_str();
        let spaced = format!(
            r#" {{ "kind" : "multi", "fencingTokens" : [ 3 , null ] , "owner":"{owner}", "ttlMs":60000, "expiresAt":1764500000000, "keys" : [ "a" , "b \"q\"" ] }} "#
        );
        assert_eq!(SerializedLock::parse(&spaced).unwrap(), s);
        // `null` for the token list is an absent one: no token known for any key.
        let unknown = format!(
            r#"{{"keys":["a","b"],"ttlMs":1,"owner":"{owner}","kind":"multi","fencingTokens":null}}"#
        );
        assert_eq!(SerializedLock::parse(&unknown).unwrap().fencing_tokens, [None, None]);
        // The longest keys, escaped at twice their length, still fit the limit.
        let widest = SerializedLock {
            keys: (0..crate::validate::MAX_KEYS_PER_LOCK)
                .map(|i| format!("{i:02}{}", "\"".repeat(crate::validate::MAX_KEY_BYTES - 2)))
                .collect(),
            fencing_tokens: vec![Some(9_007_199_254_740_991); crate::validate::MAX_KEYS_PER_LOCK],
            ..s.clone()
        };
        let widest = SerializedLock { key: widest.keys.join(", "), ..widest };
        assert!(widest.to_json().len() > 128 * 1024);
        assert_eq!(SerializedLock::parse(&widest.to_json()).unwrap(), widest);
        for bad in [
            // Out of canonical order, repeated, empty, not strings, nested, with `key` too.
            format!(r#"{{"keys":["b","a"],"ttlMs":1,"owner":"{owner}","kind":"multi"}}"#),
            format!(r#"{{"keys":["a","a"],"ttlMs":1,"owner":"{owner}","kind":"multi"}}"#),
            format!(r#"{{"keys":[],"ttlMs":1,"owner":"{owner}","kind":"multi"}}"#),
            format!(r#"{{"keys":[1],"ttlMs":1,"owner":"{owner}","kind":"multi"}}"#),
            format!(r#"{{"keys":[["a"]],"ttlMs":1,"owner":"{owner}","kind":"multi"}}"#),
            format!(r#"{{"key":"a","keys":["a"],"ttlMs":1,"owner":"{owner}","kind":"multi"}}"#),
            // Without kind multi, with a lock's one token, tokens of the wrong length.
            format!(r#"{{"keys":["a"],"ttlMs":1,"owner":"{owner}"}}"#),
            format!(r#"{{"keys":["a"],"ttlMs":1,"owner":"{owner}","kind":"multi","fencingToken":1}}"#),
            format!(r#"{{"keys":["a","b"],"ttlMs":1,"owner":"{owner}","kind":"multi","fencingTokens":[1]}}"#),
            format!(r#"{{"key":"a","ttlMs":1,"owner":"{owner}","kind":"multi"}}"#),
            format!(r#"{{"key":"a","ttlMs":1,"owner":"{owner}","fencingTokens":[1]}}"#),
            format!(r#"{{"keys":["a",],"ttlMs":1,"owner":"{owner}","kind":"multi"}}"#),
            format!(r#"{{"keys":["a"],"ttlMs":1,"owner":"{owner}","kind":"multi","fencingTokens":[-1]}}"#),
            // Tokens are positive safe integers; a lock's list goes with keys, even empty.
            format!(r#"{{"keys":["a"],"ttlMs":1,"owner":"{owner}","kind":"multi","fencingTokens":[0]}}"#),
            format!(
                r#"{{"keys":["a"],"ttlMs":1,"owner":"{owner}","kind":"multi","fencingTokens":[9007199254740992]}}"#
            ),
            format!(r#"{{"key":"a","ttlMs":1,"owner":"{owner}","fencingTokens":[]}}"#),
            format!(r#"{{"keys":["a","b"],"ttlMs":1,"owner":"{owner}","kind":"multi","fencingTokens":[]}}"#),
        ] {
            let err = SerializedLock::parse(&bad).unwrap_err();
            assert_eq!(err.code(), "INVALID_SERIALIZED_LOCK", "{bad}");
        }
    }

    #[test]
    fn round_trips() {
        let s = sample();
        let json = s.to_json();
        assert!(json.contains("\"ttlMs\":60000"), "{json}");
        assert!(json.contains("\"fencingToken\":7"), "{json}");
        assert!(json.contains("\"expiresAt\":1764500000000"), "{json}");
        assert_eq!(SerializedLock::parse(&json).unwrap(), s);
        let plain = SerializedLock { fencing_token: None, expires_at_unix_ms: None, ..s };
        assert!(!plain.to_json().contains("fencing"));
        assert!(!plain.to_json().contains("expiresAt"));
        for kind in [HoldKind::Permit { limit: 3 }, HoldKind::Read, HoldKind::Write] {
            let other = SerializedLock { kind, ..plain.clone() };
            assert_eq!(SerializedLock::parse(&other.to_json()).unwrap(), other, "{kind:?}");
        }
        let bad = plain.to_json().replace('}', ",\"kind\":\"semaphore\"}");
        assert_eq!(
            SerializedLock::parse(&bad).unwrap_err().code(),
            "INVALID_SERIALIZED_LOCK",
            "a semaphore needs its limit"
        );
        assert_eq!(SerializedLock::parse(&plain.to_json()).unwrap(), plain);
    }

    /// The fields as `serde_json` wrote and read them before the format had its own reader.
    #[derive(serde::Serialize, serde::Deserialize, PartialEq, Debug)]
    #[serde(deny_unknown_fields, rename_all = "camelCase")]
    struct Oracle {
        key: String,
        ttl_ms: u64,
        owner: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        fencing_token: Option<u64>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        expires_at: Option<u64>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        kind: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        limit: Option<u32>,
    }

    /// Byte for byte what `serde_json` wrote, for any key; and `serde_json`'s other ways of
    /// writing the same object (whitespace, escapes, another field order) read back.
    #[test]
    fn same_text_as_serde_json() {
        let keys = ["a", "import:99 \"quoted\" ✓", "back\\slash/", "\u{2028}🔒", "e\u{301}"];
        for (i, key) in keys.into_iter().enumerate() {
            let kinds = [HoldKind::Exclusive, HoldKind::Permit { limit: 3 }, HoldKind::Read, HoldKind::Write];
            let s = SerializedLock {
                key: key.into(),
                fencing_token: (i % 2 == 0).then_some(u64::MAX),
                expires_at_unix_ms: (i % 3 != 0).then_some(1_764_500_000_000),
                kind: kinds[i % 4],
                ..sample()
            };
            let oracle = Oracle {
                key: key.into(),
                ttl_ms: s.ttl_ms,
                owner: s.owner.as_str().into(),
                fencing_token: s.fencing_token,
                expires_at: s.expires_at_unix_ms,
                kind: match s.kind {
                    HoldKind::Permit { .. } => Some("semaphore".into()),
                    HoldKind::Read => Some("read".into()),
                    HoldKind::Write => Some("write".into()),
                    _ => None,
                },
                limit: match s.kind {
                    HoldKind::Permit { limit } => Some(limit),
                    _ => None,
                },
            };
            assert_eq!(s.to_json(), serde_json::to_string(&oracle).unwrap());
            assert_eq!(serde_json::from_str::<Oracle>(&s.to_json()).unwrap(), oracle);
            let pretty = serde_json::to_string_pretty(&oracle).unwrap();
            assert_eq!(SerializedLock::parse(&pretty).unwrap(), s, "{pretty}");
            let mut value = serde_json::to_value(&oracle).unwrap();
            let fields = value.as_object_mut().unwrap();
            fields.insert("kind".into(), fields.get("kind").cloned().unwrap_or(serde_json::Value::Null));
            let reversed: String = {
                let parts: Vec<String> = fields
                    .iter()
                    .rev()
                    .map(|(k, v)| format!("{} : {}", serde_json::to_string(k).unwrap(), v))
                    .collect();
                format!(" {{ {} }} ", parts.join(" ,\n"))
            };
            assert_eq!(SerializedLock::parse(&reversed).unwrap(), s, "{reversed}");
        }
        // Keys cannot hold control characters, but the writer escapes them as serde_json did.
        let control = SerializedLock { key: "\u{1}\t\n\u{1f}".into(), ..sample() };
        assert!(control.to_json().starts_with(r#"{"key":"\u0001\t\n\u001f","#), "{}", control.to_json());
        let owner = "0123456789abcdef0123456789abcdef";
        let escaped = format!(
            "{{\"key\":\"\\u0069n\\ud83d\\udd12\\/\\\"\",\"ttlMs\":5,\"owner\":\"{owner}\",\"limit\":null}}"
        );
        assert_eq!(SerializedLock::parse(&escaped).unwrap().key, "in🔒/\"");
    }

    #[test]
    fn refuses_everything_else() {
        let owner = "0123456789abcdef0123456789abcdef";
        let cases = [
            ("", "expected JSON"),
            ("garbage", "expected JSON"),
            ("{\"key\":\"a\",\"ttlMs\":1", "expected JSON"),
            ("[]", "expected JSON"),
            ("null", "expected JSON"),
            (&format!("{{\"ttlMs\":1,\"owner\":\"{owner}\"}}"), "missing field `key`"),
            (&format!("{{\"key\":\"a\",\"owner\":\"{owner}\"}}"), "missing field `ttlMs`"),
            ("{\"key\":\"a\",\"ttlMs\":1}", "missing field `owner`"),
            (&format!("{{\"key\":5,\"ttlMs\":1,\"owner\":\"{owner}\"}}"), "expected a string"),
            (&format!("{{\"key\":\"a\",\"ttlMs\":\"1\",\"owner\":\"{owner}\"}}"), "expected a JSON number"),
            (&format!("{{\"key\":\"a\",\"ttlMs\":1.5,\"owner\":\"{owner}\"}}"), "ttlMs"),
            (&format!("{{\"key\":\"a\",\"ttlMs\":0,\"owner\":\"{owner}\"}}"), "ttlMs"),
            (&format!("{{\"key\":\"\",\"ttlMs\":1,\"owner\":\"{owner}\"}}"), "non-empty"),
            ("{\"key\":\"a\",\"ttlMs\":1,\"owner\":\"short\"}", "32 lowercase hex"),
            (&format!("{{\"key\":\"a\",\"ttlMs\":1,\"owner\":\"{owner}\",\"x\":1}}"), "unknown field"),
            (
                &format!("{{\"key\":\"a\",\"ttlMs\":1,\"owner\":\"{owner}\",\"fencingToken\":-1}}"),
                "expected u64",
            ),
        ];
        for (input, why) in cases {
            let err = SerializedLock::parse(input).unwrap_err();
            assert_eq!(err.code(), "INVALID_SERIALIZED_LOCK", "{input}");
            let msg = err.to_string();
            assert!(msg.starts_with("locksmith: invalid serialized lock: "), "{msg}");
            assert!(msg.contains(why), "{input} -> {msg}");
        }
        for (input, why) in [
            (format!("{{\"key\":\"a\",\"key\":\"b\",\"ttlMs\":1,\"owner\":\"{owner}\"}}"), "duplicate field `key`"),
            (format!("{{\"key\":\"a\",\"ttlMs\":1,\"owner\":\"{owner}\"}}x"), "trailing characters"),
            (format!("{{\"key\":\"a\",\"ttlMs\":01,\"owner\":\"{owner}\"}}"), "expected JSON"),
            (format!("{{\"key\":\"\\ud800\",\"ttlMs\":1,\"owner\":\"{owner}\"}}"), "surrogate"),
            (format!("{{\"key\":\"a\u{1}\",\"ttlMs\":1,\"owner\":\"{owner}\"}}"), "control character"),
            (format!("{{\"key\":\"a\",\"ttlMs\":1,\"owner\":\"{owner}\",\"limit\":4294967296,\"kind\":\"semaphore\"}}"), "expected u32"),
            (format!("{{\"key\":true,\"ttlMs\":1,\"owner\":\"{owner}\"}}"), "expected a string"),
            (format!("{{\"key\":\"a\",\"ttlMs\":[1],\"owner\":\"{owner}\"}}"), "expected a JSON number"),
        ] {
            let msg = SerializedLock::parse(&input).unwrap_err().to_string();
            assert!(msg.contains(why), "{input} -> {msg}");
        }
        let huge =
            format!("{{\"key\":\"{}\",\"ttlMs\":1,\"owner\":\"{owner}\"}}", "k".repeat(MAX_SERIALIZED_BYTES));
        assert!(SerializedLock::parse(&huge).unwrap_err().to_string().contains("at most"));
    }
}
