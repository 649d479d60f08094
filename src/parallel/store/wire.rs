//! The store's wire format: one JSON object per line over TCP (`serde_json`),
//! values as hexadecimal strings, and every line read with a limit on its
//! length and a deadline, so that nothing a peer sends can make the
//! serving process's memory grow without bound or hold a connection open
//! by sending slowly.

use super::Failure;
use serde::{Deserialize, Serialize};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

/// The longest key, in bytes, that a rank may set or read.
pub const KEY_LIMIT: usize = 1024;

/// The largest value, in bytes, that a rank may set: far above what a job
/// sets (an `ncclUniqueId` is 128 bytes, a model's digest 8).
pub const VALUE_LIMIT: usize = 1 << 20;

/// The longest first line of a connection (its hello, with the token).
pub(super) const HELLO_LINE_LIMIT: usize = 4096;

/// The longest line of a process that has said hello: a set of the largest
/// value (two hexadecimal digits a byte) and the longest key, with room.
pub(super) const LINE_LIMIT: usize = 2 * VALUE_LIMIT + 4 * KEY_LIMIT + 4096;

/// What a client asks of the store.
#[derive(Serialize, Deserialize, Debug)]
pub(super) enum Request {
    /// The first message of every connection: who is calling, and the
    /// job's token.
    Hello { rank: usize, world_size: usize, process: u64, token: Option<String> },
    Set {
        key: String,
        #[serde(with = "hex")]
        value: Vec<u8>,
    },
    /// Waits up to `timeout_ms` for the key, then returns its value.
    Get { key: String, timeout_ms: u64 },
    /// Adds `delta` to a counter (0 when absent) and returns the new value.
    Add { key: String, delta: i64 },
    /// Removes the keys that are present.
    Delete { keys: Vec<String> },
    /// Waits up to `timeout_ms` for every key.
    Wait { keys: Vec<String>, timeout_ms: u64 },
    /// Marks the job failed, by the calling rank, unless it already is.
    Fail { reason: String },
    /// The calling rank leaves the job normally (after `steps` training
    /// steps, where it counts them).
    Leave { steps: Option<u64> },
    /// Answers once the job has failed or some rank has left since the
    /// caller last looked: `departures` is how many departures it has seen.
    Watch { departures: usize },
    /// Waits up to `timeout_ms` until no other rank holds a connection:
    /// what rank 0 does before its process, and the store, may end.
    WaitAlone { timeout_ms: u64 },
}

/// The store's answer to one request.
#[derive(Serialize, Deserialize, Debug)]
pub(super) enum Response {
    Done,
    Value(#[serde(with = "hex")] Vec<u8>),
    Count(i64),
    /// The wait ran out of time: the keys still missing, and the ranks that
    /// never connected.
    Timeout {
        keys: Vec<String>,
        absent: Vec<usize>,
    },
    /// The job has failed: the first rank to fail, and why.
    Failed(Failure),
    /// The ranks that have left so far, with their step counts.
    Departed(Vec<(usize, Option<u64>)>),
    /// The request was refused (a wrong token, a second process with the
    /// same rank, a different world size, a full store); the store closes
    /// the connection after a refused hello.
    Refused(String),
    /// The store serves as many connections as it may: try again shortly.
    Busy,
}

/// Values as hexadecimal strings: two characters a byte, where JSON's
/// array of numbers takes up to four.
mod hex {
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(bytes: &[u8], serializer: S) -> Result<S::Ok, S::Error> {
        const DIGITS: &[u8; 16] = b"0123456789abcdef";
        let text: String = bytes
            .iter()
            .flat_map(|b| [DIGITS[usize::from(b >> 4)] as char, DIGITS[usize::from(b & 15)] as char])
            .collect();
        serializer.serialize_str(&text)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Vec<u8>, D::Error> {
        let text = String::deserialize(deserializer)?;
        let digit = |c: u8| match c {
            b'0'..=b'9' => Some(c - b'0'),
            b'a'..=b'f' => Some(c - b'a' + 10),
            _ => None,
        };
        let invalid = || serde::de::Error::custom("a value is not an even number of lower-case hexadecimal digits");
        if text.len() % 2 != 0 {
            return Err(invalid());
        }
        let byte = |pair: &[u8]| Some(digit(pair[0])? << 4 | digit(pair[1])?);
        text.as_bytes().chunks(2).map(|pair| byte(pair).ok_or_else(invalid)).collect()
    }
}

/// Why a line could not be read.
#[derive(Debug)]
pub(super) enum ReadError {
    /// The peer closed the connection (mid-line or between lines).
    Closed,
    /// The line is longer than its limit; nothing more is read.
    TooLong,
    /// The line did not arrive by its deadline.
    TimedOut,
    /// The connection failed.
    Io(std::io::Error),
}

impl std::fmt::Display for ReadError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ReadError::Closed => write!(f, "the connection closed"),
            ReadError::TooLong => write!(f, "a line longer than the store's limit"),
            ReadError::TimedOut => write!(f, "a line that did not arrive in time"),
            ReadError::Io(e) => write!(f, "{e}"),
        }
    }
}

/// Reads lines from a connection, each at most a given length, into a
/// buffer that never holds more than that limit and one read.
pub(super) struct LineReader {
    stream: TcpStream,
    buffer: Vec<u8>,
    /// The unread bytes are `buffer[start..]`.
    start: usize,
}

/// Bytes asked of the socket per read.
const CHUNK: usize = 8192;

impl LineReader {
    pub(super) fn new(stream: TcpStream) -> Self {
        LineReader { stream, buffer: Vec::new(), start: 0 }
    }

    /// The next line, without its newline, of at most `limit` bytes.
    /// `deadline`, when given, bounds the whole wait; `stall` bounds the
    /// time from a line's first byte to its last, so that a peer may be
    /// silent between lines for as long as it likes (a rank waits between
    /// steps), but not halfway through one.
    pub(super) fn read_line(
        &mut self,
        limit: usize,
        deadline: Option<Instant>,
        stall: Option<Duration>,
    ) -> Result<Vec<u8>, ReadError> {
        let mut begun: Option<Instant> = None;
        let mut scanned = self.start;
        loop {
            if let Some(at) = self.buffer[scanned..].iter().position(|&b| b == b'\n') {
                let end = scanned + at;
                if end - self.start > limit {
                    return Err(ReadError::TooLong);
                }
                let line = self.buffer[self.start..end].to_vec();
                self.start = end + 1;
                return Ok(line);
            }
            scanned = self.buffer.len();
            if scanned - self.start > limit {
                return Err(ReadError::TooLong);
            }
            if scanned > self.start && begun.is_none() {
                begun = Some(Instant::now());
            }
            let line_deadline = begun.zip(stall).map(|(at, stall)| at + stall);
            let wait_until = match (deadline, line_deadline) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            };
            let wait = match wait_until {
                Some(until) => match until.checked_duration_since(Instant::now()) {
                    Some(left) if !left.is_zero() => Some(left),
                    _ => return Err(ReadError::TimedOut),
                },
                None => None,
            };
            self.stream.set_read_timeout(wait).map_err(ReadError::Io)?;
            // Drop what was consumed before growing, so that the buffer
            // stays within the limit and one chunk.
            if self.start > 0 {
                self.buffer.drain(..self.start);
                scanned -= self.start;
                self.start = 0;
            }
            let filled = self.buffer.len();
            self.buffer.resize(filled + CHUNK, 0);
            let read = self.stream.read(&mut self.buffer[filled..]);
            self.buffer.truncate(filled + *read.as_ref().unwrap_or(&0));
            match read {
                Ok(0) => return Err(ReadError::Closed),
                Ok(_) => {}
                Err(e) if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut) => {
                    return Err(ReadError::TimedOut);
                }
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(ReadError::Io(e)),
            }
        }
    }

    /// The next line as a `T`.
    pub(super) fn read<T: for<'de> Deserialize<'de>>(
        &mut self,
        limit: usize,
        deadline: Option<Instant>,
        stall: Option<Duration>,
    ) -> Result<std::result::Result<T, serde_json::Error>, ReadError> {
        Ok(serde_json::from_slice(&self.read_line(limit, deadline, stall)?))
    }
}

/// Writes `message` as one line.
pub(super) fn write_line(stream: &mut TcpStream, message: &impl Serialize) -> std::io::Result<()> {
    let mut line = serde_json::to_vec(message).map_err(std::io::Error::other)?;
    line.push(b'\n');
    stream.write_all(&line)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_travel_as_hexadecimal() {
        let line = serde_json::to_string(&Request::Set { key: "k".into(), value: vec![0, 15, 16, 255] }).unwrap();
        assert_eq!(line, r#"{"Set":{"key":"k","value":"000f10ff"}}"#);
        for bad in [r#"{"Set":{"key":"k","value":"0"}}"#, r#"{"Set":{"key":"k","value":"0G"}}"#] {
            assert!(serde_json::from_str::<Request>(bad).is_err(), "{bad}");
        }
        match serde_json::from_str::<Response>(r#"{"Value":"00ff"}"#).unwrap() {
            Response::Value(v) => assert_eq!(v, [0, 255]),
            other => panic!("{other:?}"),
        }
    }
}
