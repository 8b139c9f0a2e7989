//! Report records: one JSON object per line behind [`PREFIX`], printed by the hypervisor and
//! the kernel and read back by the xtask (which turns them into tables and files).
//!
//! ```text
//! @@report {"kind":"banner","cpu":0,"midr":"0x000f0510","bbml2":true}
//! ```
//! Every record has a string `kind`; the other fields are numbers, strings (hex values as
//! `"0x…"` strings, so 64-bit values survive JSON readers that use doubles), booleans or arrays.
//! [`Record`] builds one without allocating (1 KiB at most; a record that would not fit ends with
//! `"truncated":true` instead of breaking the JSON).

use core::fmt::{self, Write};

/// Marks a report line. May follow other text on the same line (CPUs share the console).
pub const PREFIX: &str = "@@report ";
/// Largest record, in bytes of JSON.
pub const CAPACITY: usize = 1024;
/// Room kept for the closing `,"truncated":true}`.
const RESERVE: usize = 20;

/// A record being built.
pub struct Record {
    buf: [u8; CAPACITY],
    len: usize,
    truncated: bool,
}

struct Cursor<'a> {
    buf: &'a mut [u8],
    len: usize,
}

impl Write for Cursor<'_> {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        let end = self.len + s.len();
        if end > self.buf.len() {
            return Err(fmt::Error);
        }
        self.buf[self.len..end].copy_from_slice(s.as_bytes());
        self.len = end;
        Ok(())
    }
}

/// Writes `s` as a JSON string (quotes included).
pub fn write_json_str(w: &mut impl Write, s: &str) -> fmt::Result {
    w.write_char('"')?;
    for c in s.chars() {
        match c {
            '"' => w.write_str("\\\"")?,
            '\\' => w.write_str("\\\\")?,
            '\n' => w.write_str("\\n")?,
            '\r' => w.write_str("\\r")?,
            '\t' => w.write_str("\\t")?,
            c if (c as u32) < 0x20 => write!(w, "\\u{:04x}", c as u32)?,
            c => w.write_char(c)?,
        }
    }
    w.write_char('"')
}

impl Record {
    /// A record of `kind`.
    pub fn new(kind: &str) -> Self {
        let mut r = Self {
            buf: [0; CAPACITY],
            len: 0,
            truncated: false,
        };
        r.field("kind", |w| write_json_str(w, kind));
        r
    }

    /// Appends `"name":<value>`, or marks the record truncated if it does not fit.
    fn field(&mut self, name: &str, value: impl FnOnce(&mut Cursor) -> fmt::Result) -> &mut Self {
        if self.truncated {
            return self;
        }
        let start = self.len;
        let limit = CAPACITY - RESERVE;
        let mut c = Cursor {
            buf: &mut self.buf[..limit],
            len: start,
        };
        let ok = (if start > 0 { c.write_char(',') } else { Ok(()) })
            .and_then(|_| write_json_str(&mut c, name))
            .and_then(|_| c.write_char(':'))
            .and_then(|_| value(&mut c));
        match ok {
            Ok(()) => self.len = c.len,
            Err(_) => {
                self.len = start;
                self.truncated = true;
            }
        }
        self
    }

    pub fn u64(&mut self, name: &str, v: u64) -> &mut Self {
        self.field(name, |w| write!(w, "{v}"))
    }
    pub fn i64(&mut self, name: &str, v: i64) -> &mut Self {
        self.field(name, |w| write!(w, "{v}"))
    }
    /// A value shown in hex, as the string `"0x…"`.
    pub fn hex(&mut self, name: &str, v: u64) -> &mut Self {
        self.field(name, |w| write!(w, "\"{v:#x}\""))
    }
    pub fn bool(&mut self, name: &str, v: bool) -> &mut Self {
        self.field(name, |w| w.write_str(if v { "true" } else { "false" }))
    }
    pub fn str(&mut self, name: &str, v: &str) -> &mut Self {
        self.field(name, |w| write_json_str(w, v))
    }
    /// A float with `decimals` digits after the point (no NaN/inf in JSON: written as null).
    pub fn f64(&mut self, name: &str, v: f64, decimals: usize) -> &mut Self {
        self.field(name, |w| {
            if v.is_finite() {
                write!(w, "{v:.decimals$}")
            } else {
                w.write_str("null")
            }
        })
    }
    pub fn u64s(&mut self, name: &str, v: &[u64]) -> &mut Self {
        self.field(name, |w| {
            w.write_char('[')?;
            for (i, x) in v.iter().enumerate() {
                if i > 0 {
                    w.write_char(',')?;
                }
                write!(w, "{x}")?;
            }
            w.write_char(']')
        })
    }
    pub fn strs(&mut self, name: &str, v: &[&str]) -> &mut Self {
        self.field(name, |w| {
            w.write_char('[')?;
            for (i, x) in v.iter().enumerate() {
                if i > 0 {
                    w.write_char(',')?;
                }
                write_json_str(w, x)?;
            }
            w.write_char(']')
        })
    }

    /// Whether a field had to be dropped.
    pub fn is_truncated(&self) -> bool {
        self.truncated
    }
}

impl fmt::Display for Record {
    /// `@@report {…}` (no newline).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(PREFIX)?;
        f.write_char('{')?;
        // The buffer only ever holds whole UTF-8 strings written through `write_str`.
        f.write_str(core::str::from_utf8(&self.buf[..self.len]).map_err(|_| fmt::Error)?)?;
        if self.truncated {
            f.write_str(",\"truncated\":true")?;
        }
        f.write_char('}')
    }
}

#[cfg(any(test, feature = "std"))]
pub use parse::{parse_line, ParsedRecord};

#[cfg(any(test, feature = "std"))]
mod parse {
    use super::PREFIX;
    use serde_json::{Map, Value};

    /// A record read back from a run's output.
    #[derive(Debug, Clone, PartialEq)]
    pub struct ParsedRecord {
        pub kind: String,
        pub fields: Map<String, Value>,
    }

    impl ParsedRecord {
        /// A field as u64: a JSON number, or a `"0x…"` / decimal string.
        pub fn u64(&self, name: &str) -> Option<u64> {
            match self.fields.get(name)? {
                Value::Number(n) => n.as_u64(),
                Value::String(s) => match s.strip_prefix("0x") {
                    Some(h) => u64::from_str_radix(h, 16).ok(),
                    None => s.parse().ok(),
                },
                _ => None,
            }
        }
        pub fn bool(&self, name: &str) -> Option<bool> {
            self.fields.get(name)?.as_bool()
        }
        pub fn str(&self, name: &str) -> Option<&str> {
            self.fields.get(name)?.as_str()
        }
        pub fn f64(&self, name: &str) -> Option<f64> {
            self.fields.get(name)?.as_f64()
        }
    }

    /// `None` when the line holds no record; otherwise the record or why it is not one.
    pub fn parse_line(line: &str) -> Option<Result<ParsedRecord, String>> {
        let at = line.find(PREFIX)?;
        let json = line[at + PREFIX.len()..].trim();
        Some(match serde_json::from_str::<Value>(json) {
            Ok(Value::Object(fields)) => match fields.get("kind").and_then(Value::as_str) {
                Some(kind) => Ok(ParsedRecord {
                    kind: kind.to_string(),
                    fields,
                }),
                None => Err(format!("record without a string \"kind\": {json}")),
            },
            Ok(_) => Err(format!("record is not a JSON object: {json}")),
            Err(e) => Err(format!("bad record ({e}): {json}")),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip() {
        let mut r = Record::new("banner");
        r.u64("cpu", 3)
            .hex("midr", 0x410f_d0b1)
            .bool("bbml2", false)
            .str("core", "Cortex-A76")
            .i64("d", -5);
        r.u64s("v", &[1, 2])
            .strs("s", &["a", "b\"c"])
            .f64("ratio", 0.5, 3);
        let line = r.to_string();
        assert!(line.starts_with(PREFIX));
        let p = parse_line(&line).unwrap().unwrap();
        assert_eq!(p.kind, "banner");
        assert_eq!(p.u64("cpu"), Some(3));
        assert_eq!(p.u64("midr"), Some(0x410f_d0b1));
        assert_eq!(p.bool("bbml2"), Some(false));
        assert_eq!(p.str("core"), Some("Cortex-A76"));
        assert_eq!(p.fields["s"][1], "b\"c");
        assert_eq!(p.f64("ratio"), Some(0.5));
    }

    #[test]
    fn escapes_control_characters() {
        let mut r = Record::new("x");
        r.str("t", "a\nb\t\u{1}\\");
        let p = parse_line(&r.to_string()).unwrap().unwrap();
        assert_eq!(p.str("t"), Some("a\nb\t\u{1}\\"));
    }

    #[test]
    fn truncates_without_breaking_json() {
        let mut r = Record::new("big");
        let long = "y".repeat(300);
        for i in 0..10 {
            r.str(&format!("f{i}"), &long);
        }
        assert!(r.is_truncated());
        let p = parse_line(&r.to_string()).unwrap().unwrap();
        assert_eq!(p.bool("truncated"), Some(true));
        assert!(p.fields.len() < 11);
    }

    #[test]
    fn finds_a_record_after_other_text_and_rejects_garbage() {
        let p = parse_line("kernel: CPU 1 up @@report {\"kind\":\"k\",\"a\":1}")
            .unwrap()
            .unwrap();
        assert_eq!(p.kind, "k");
        assert!(parse_line("no record here").is_none());
        assert!(parse_line("@@report {\"kind\":").unwrap().is_err());
        assert!(parse_line("@@report [1,2]").unwrap().is_err());
        assert!(parse_line("@@report {\"a\":1}").unwrap().is_err());
    }
}
