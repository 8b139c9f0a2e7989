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
