//! Output: whole lines through one `write` each (so lines of tasks on other CPUs do not
//! interleave inside them), and report records.

use core::fmt;

/// A line being built (at most [`Line::CAPACITY`] bytes; more is cut).
pub struct Line {
    buf: [u8; Line::CAPACITY],
    len: usize,
}

impl Default for Line {
    fn default() -> Self {
        Self::new()
    }
}

impl Line {
    /// Longest line.
    pub const CAPACITY: usize = 1200;

    /// An empty line.
    pub const fn new() -> Self {
        Line { buf: [0; Line::CAPACITY], len: 0 }
    }

    /// Writes what was built to `fd` in one call and empties the line.
    pub fn flush_to(&mut self, fd: u64) {
        let _ = crate::sys::write(fd, &self.buf[..self.len]);
        self.len = 0;
    }
}

impl fmt::Write for Line {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        let n = s.len().min(Line::CAPACITY - self.len);
        self.buf[self.len..self.len + n].copy_from_slice(&s.as_bytes()[..n]);
        self.len += n;
        Ok(())
    }
}

/// Prints `args` and a newline to the console in one `write`.
pub fn print_line(args: fmt::Arguments) {
    let mut l = Line::new();
    let _ = fmt::Write::write_fmt(&mut l, args);
    let _ = fmt::Write::write_str(&mut l, "\n");
    l.flush_to(1);
}

/// Prints a line (`println!("...")`).
#[macro_export]
macro_rules! println {
    ($($arg:tt)*) => { $crate::io::print_line(format_args!($($arg)*)) };
}

/// Prints a report record on its own line.
pub fn report(r: &abi::report::Record) {
    print_line(format_args!("{r}"));
}

/// A short text built with `write!` in a fixed buffer (what does not fit is cut).
pub struct Text<const N: usize> {
    b: [u8; N],
    n: usize,
}

impl<const N: usize> Default for Text<N> {
    fn default() -> Self {
        Self::new()
    }
}

impl<const N: usize> Text<N> {
    /// Empty.
    pub const fn new() -> Self {
        Text { b: [0; N], n: 0 }
    }
    /// The text (cut at a character boundary if it was cut).
    pub fn as_str(&self) -> &str {
        match core::str::from_utf8(&self.b[..self.n]) {
            Ok(s) => s,
            Err(e) => core::str::from_utf8(&self.b[..e.valid_up_to()]).unwrap_or(""),
        }
    }
}

impl<const N: usize> fmt::Write for Text<N> {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        let k = s.len().min(N - self.n);
        self.b[self.n..self.n + k].copy_from_slice(&s.as_bytes()[..k]);
        self.n += k;
        Ok(())
    }
}
