//! Compile-time error messages with decimal numbers.
//!
//! A size mismatch between static shapes is found when a generic function
//! is instantiated (`cargo build`), by evaluating an associated constant
//! that panics. Const panics can only print a `&str`, so the message is
//! assembled in a byte buffer by `const fn`s, numbers written in decimal.

/// A message under construction, in a fixed buffer (long enough for every
/// message of this crate; a longer one is cut).
pub(crate) struct Message {
    buf: [u8; 256],
    len: usize,
}

impl Message {
    pub(crate) const fn new() -> Self {
        Message { buf: [0; 256], len: 0 }
    }

    /// Appends `s`.
    pub(crate) const fn text(mut self, s: &str) -> Self {
        let bytes = s.as_bytes();
        let mut i = 0;
        while i < bytes.len() && self.len < self.buf.len() {
            self.buf[self.len] = bytes[i];
            self.len += 1;
            i += 1;
        }
        self
    }

    /// Appends `n` in decimal.
    pub(crate) const fn num(mut self, n: usize) -> Self {
        let mut digits = [0u8; 20];
        let (mut count, mut rest) = (0, n);
        loop {
            digits[count] = b'0' + (rest % 10) as u8;
            count += 1;
            rest /= 10;
            if rest == 0 {
                break;
            }
        }
        while count > 0 && self.len < self.buf.len() {
            count -= 1;
            self.buf[self.len] = digits[count];
            self.len += 1;
        }
        self
    }

    /// Stops the build with this message as the error's headline (called
    /// in a constant's evaluation).
    pub(crate) const fn fail(&self) -> ! {
        let (head, _) = self.buf.split_at(self.len);
        match core::str::from_utf8(head) {
            Ok(message) => panic!("{}", message),
            // Only ASCII is ever appended, and a cut cannot split a character.
            Err(_) => panic!("a static shape check failed"),
        }
    }
}
