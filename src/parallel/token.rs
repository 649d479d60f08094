//! The job's secret: what a process must show rank 0's store before the
//! store lets it take part in the job.

use crate::error::{Error, Result};

/// The environment variable that carries a job's token to its processes.
/// `devtensor-run` sets it to a fresh [`JobToken::generate`] for a job on
/// one machine; a job of several machines needs the same value on each
/// (`docs/distributed.md`).
pub const JOB_TOKEN_VAR: &str = "DEVTENSOR_JOB_TOKEN";

/// The fewest characters a token may have: shorter ones can be guessed.
pub const MIN_TOKEN_LEN: usize = 16;

/// A job's shared secret (PyTorch's `TCPStore` has none): every process
/// sends it in its first message to rank 0's store, which compares it in
/// constant time and refuses a process whose token differs, so that
/// reaching `MASTER_ADDR:MASTER_PORT` is not enough to join a job, read
/// its keys or fail it.
///
/// It travels in clear over TCP: it keeps out whoever can reach the port,
/// not whoever can read the job's traffic (keep that on a private
/// network). Its `Debug` form does not show it.
///
/// ```
/// use devtensor::parallel::JobToken;
/// let token = JobToken::generate()?;
/// assert_eq!(token.secret().len(), 64);
/// assert_eq!(format!("{token:?}"), "JobToken(..)");
/// assert!(JobToken::new("too short").is_err());
/// # Ok::<(), devtensor::Error>(())
/// ```
#[derive(Clone)]
pub struct JobToken(String);

/// Equal tokens, compared in constant time.
impl PartialEq for JobToken {
    fn eq(&self, other: &JobToken) -> bool {
        self.matches(&other.0)
    }
}

impl Eq for JobToken {}

impl JobToken {
    /// A token of 32 random bytes from the operating system, as 64
    /// hexadecimal digits.
    pub fn generate() -> Result<JobToken> {
        let mut bytes = [0u8; 32];
        read_random(&mut bytes).map_err(|e| Error::Distributed {
            rank: None,
            reason: format!("cannot draw a job token from the operating system's random numbers: {e}"),
        })?;
        Ok(JobToken(bytes.iter().map(|b| format!("{b:02x}")).collect()))
    }

    /// The token `text`, as a user set it (the same on every machine of a
    /// job). Fails unless it has at least [`MIN_TOKEN_LEN`] characters, all
    /// printable ASCII without spaces.
    pub fn new(text: impl Into<String>) -> Result<JobToken> {
        let text = text.into();
        let fail = |reason: String| Error::Distributed { rank: None, reason };
        if text.len() < MIN_TOKEN_LEN {
            return Err(fail(format!(
                "{JOB_TOKEN_VAR} has {} characters; a job token needs at least {MIN_TOKEN_LEN} random ones \
                 (`openssl rand -hex 32` makes one)",
                text.chars().count()
            )));
        }
        if !text.bytes().all(|b| b.is_ascii_graphic()) {
            return Err(fail(format!("{JOB_TOKEN_VAR} may hold printable ASCII characters only, without spaces")));
        }
        Ok(JobToken(text))
    }

    /// The token's text, to hand to a process (as `devtensor-run` does in
    /// [`JOB_TOKEN_VAR`]). Never print it.
    pub fn secret(&self) -> &str {
        &self.0
    }

    /// Whether `offered` is this token, in a time that does not depend on
    /// where they differ (only on their lengths), so that a process cannot
    /// find the token a character at a time by timing the store's answers.
    pub(crate) fn matches(&self, offered: &str) -> bool {
        let (ours, theirs) = (self.0.as_bytes(), offered.as_bytes());
        if ours.len() != theirs.len() {
            return false;
        }
        let difference = ours.iter().zip(theirs).fold(0u8, |acc, (a, b)| std::hint::black_box(acc | (a ^ b)));
        difference == 0
    }
}

impl std::fmt::Debug for JobToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("JobToken(..)")
    }
}

/// Fills `bytes` from the operating system's random number generator.
fn read_random(bytes: &mut [u8]) -> std::io::Result<()> {
    use std::io::Read;
    std::fs::File::open("/dev/urandom")?.read_exact(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_match_only_themselves() {
        let token = JobToken::new("0123456789abcdef").unwrap();
        assert!(token.matches("0123456789abcdef"));
        for other in ["", "0123456789abcdeF", "0123456789abcde", "0123456789abcdef0", "x123456789abcdef"] {
            assert!(!token.matches(other), "{other}");
        }
        let (a, b) = (JobToken::generate().unwrap(), JobToken::generate().unwrap());
        assert!(a.secret().bytes().all(|c| c.is_ascii_hexdigit()) && a != b);
        assert!(JobToken::new("0123456789 abcdef").is_err());
    }
}
