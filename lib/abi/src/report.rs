//! Report records: one JSON object per line behind [`PREFIX`], printed by the hypervisor and
//! the kernel and read back by the xtask (which turns them into tables and files).
//!
//! ```text
//! @@report {"kind":"banner","cpu":0,"midr":"0x410fd0b1","bbml2":true,"features":["lse","bti"]}
//! ```
//!
//! Every record has a string `kind` first; the other fields are numbers (`u64`, `i64`, `f64`),
//! strings (64-bit values meant to be read as hex are written as `"0x…"` strings), booleans,
//! and arrays or objects of those, nested. Strings are escaped per RFC 8259, so any `&str` is
//! safe to write.
//!
//! Two writers, both `no_std` and allocation-free:
//! - [`Record`] buffers one record (at most [`CAPACITY`] bytes; a record that would not fit ends
//!   with `"truncated":true` instead of breaking the JSON) and prints it with one `write_str`
//!   through `Display`, so CPUs sharing a console cannot interleave inside it;
//! - [`ReportWriter`] streams a record of any size into any `core::fmt::Write`.
//!
//! With the `std` feature, `parse_line` / `parse_all` read records back (serde_json); a
//! record may follow other text on the same line, since CPUs share the console.

use core::fmt::{self, Write};

/// Marks a report line. May follow other text on the same line (CPUs share the console).
pub const PREFIX: &str = "@@report ";
/// Largest [`Record`], in bytes of JSON.
pub const CAPACITY: usize = 1024;
/// Room kept for the closing `,"truncated":true}`.
const RESERVE: usize = 20;

/// Writes `s` as a JSON string (quotes included), escaping `"`, `\` and control characters.
pub fn write_json_str<W: Write + ?Sized>(w: &mut W, s: &str) -> fmt::Result {
    w.write_char('"')?;
    let mut start = 0;
    for (i, c) in s.char_indices() {
        let esc = match c {
            '"' => "\\\"",
            '\\' => "\\\\",
            '\n' => "\\n",
            '\r' => "\\r",
            '\t' => "\\t",
            '\u{8}' => "\\b",
            '\u{c}' => "\\f",
            c if (c as u32) < 0x20 => "",
            _ => continue,
        };
        w.write_str(&s[start..i])?;
        if esc.is_empty() {
            write!(w, "\\u{:04x}", c as u32)?;
        } else {
            w.write_str(esc)?;
        }
        start = i + c.len_utf8();
    }
    w.write_str(&s[start..])?;
    w.write_char('"')
}

fn write_f64(w: &mut dyn Write, v: f64, decimals: usize) -> fmt::Result {
    if v.is_finite() {
        write!(w, "{v:.decimals$}")
    } else {
        w.write_str("null") // JSON has no NaN or infinity
    }
}

fn write_list<T>(w: &mut dyn Write, v: &[T], mut one: impl FnMut(&mut dyn Write, &T) -> fmt::Result) -> fmt::Result {
    w.write_char('[')?;
    for (i, x) in v.iter().enumerate() {
        if i > 0 {
            w.write_char(',')?;
        }
        one(w, x)?;
    }
    w.write_char(']')
}

fn write_array(w: &mut dyn Write, f: impl FnOnce(&mut ArrayWriter<'_>)) -> fmt::Result {
    w.write_char('[')?;
    let mut a = ArrayWriter { w: &mut *w, first: true, result: Ok(()) };
    f(&mut a);
    a.result?;
    w.write_char(']')
}

fn write_object(w: &mut dyn Write, f: impl FnOnce(&mut ObjectWriter<'_>)) -> fmt::Result {
    w.write_char('{')?;
    let mut o = ObjectWriter { w: &mut *w, first: true, result: Ok(()) };
    f(&mut o);
    o.result?;
    w.write_char('}')
}

/// The named-field methods shared by [`Record`] and [`ObjectWriter`]; each type provides
/// `field(name, |w| -> fmt::Result)`.
macro_rules! field_methods {
    ($out:ty) => {
        /// `"name":v`.
        pub fn u64(&mut self, name: &str, v: u64) -> $out {
            self.field(name, |w| write!(w, "{v}"))
        }
        /// `"name":v`.
        pub fn i64(&mut self, name: &str, v: i64) -> $out {
            self.field(name, |w| write!(w, "{v}"))
        }
        /// A value shown in hex, as the string `"0x…"` (readers parse it back as a number).
        pub fn hex(&mut self, name: &str, v: u64) -> $out {
            self.field(name, |w| write!(w, "\"{v:#x}\""))
        }
        /// `true` / `false`.
        pub fn bool(&mut self, name: &str, v: bool) -> $out {
            self.field(name, |w| w.write_str(if v { "true" } else { "false" }))
        }
        /// An escaped JSON string.
        pub fn str(&mut self, name: &str, v: &str) -> $out {
            self.field(name, |w| write_json_str(w, v))
        }
        /// A float with `decimals` digits after the point (NaN and infinities become `null`).
        pub fn f64(&mut self, name: &str, v: f64, decimals: usize) -> $out {
            self.field(name, |w| write_f64(w, v, decimals))
        }
        /// `null`.
        pub fn null(&mut self, name: &str) -> $out {
            self.field(name, |w| w.write_str("null"))
        }
        /// An array of unsigned numbers.
        pub fn u64s(&mut self, name: &str, v: &[u64]) -> $out {
            self.field(name, |w| write_list(w, v, |w, x| write!(w, "{x}")))
        }
        /// An array of signed numbers.
        pub fn i64s(&mut self, name: &str, v: &[i64]) -> $out {
            self.field(name, |w| write_list(w, v, |w, x| write!(w, "{x}")))
        }
        /// An array of `"0x…"` strings.
        pub fn hexes(&mut self, name: &str, v: &[u64]) -> $out {
            self.field(name, |w| write_list(w, v, |w, x| write!(w, "\"{x:#x}\"")))
        }
        /// An array of strings.
        pub fn strs(&mut self, name: &str, v: &[&str]) -> $out {
            self.field(name, |w| write_list(w, v, |w, x| write_json_str(w, x)))
        }
        /// An array built element by element (elements may be arrays or objects themselves).
        pub fn array(&mut self, name: &str, f: impl FnOnce(&mut ArrayWriter<'_>)) -> $out {
            self.field(name, |w| write_array(w, f))
        }
        /// A nested object.
        pub fn object(&mut self, name: &str, f: impl FnOnce(&mut ObjectWriter<'_>)) -> $out {
            self.field(name, |w| write_object(w, f))
        }
    };
}

/// Writes the fields of a JSON object into a `fmt::Write`. The first error is kept and every
/// later call does nothing; read it with [`ObjectWriter::result`].
pub struct ObjectWriter<'w> {
    w: &'w mut dyn Write,
    first: bool,
    result: fmt::Result,
}

impl ObjectWriter<'_> {
    fn field(&mut self, name: &str, value: impl FnOnce(&mut dyn Write) -> fmt::Result) -> &mut Self {
        if self.result.is_ok() {
            let w = &mut *self.w;
            let sep = if self.first { Ok(()) } else { w.write_char(',') };
            self.result =
                sep.and_then(|_| write_json_str(w, name)).and_then(|_| w.write_char(':')).and_then(|_| value(w));
            self.first = false;
        }
        self
    }

    field_methods!(&mut Self);

    /// The first write error, if any.
    pub fn result(&self) -> fmt::Result {
        self.result
    }
}

/// Writes the elements of a JSON array (see [`ObjectWriter::array`]).
pub struct ArrayWriter<'w> {
    w: &'w mut dyn Write,
    first: bool,
    result: fmt::Result,
}

impl ArrayWriter<'_> {
    fn elem(&mut self, value: impl FnOnce(&mut dyn Write) -> fmt::Result) -> &mut Self {
        if self.result.is_ok() {
            let w = &mut *self.w;
            let sep = if self.first { Ok(()) } else { w.write_char(',') };
            self.result = sep.and_then(|_| value(w));
            self.first = false;
        }
        self
    }
    /// An unsigned number.
    pub fn u64(&mut self, v: u64) -> &mut Self {
        self.elem(|w| write!(w, "{v}"))
    }
    /// A signed number.
    pub fn i64(&mut self, v: i64) -> &mut Self {
        self.elem(|w| write!(w, "{v}"))
    }
    /// A `"0x…"` string.
    pub fn hex(&mut self, v: u64) -> &mut Self {
        self.elem(|w| write!(w, "\"{v:#x}\""))
    }
    /// `true` / `false`.
    pub fn bool(&mut self, v: bool) -> &mut Self {
        self.elem(|w| w.write_str(if v { "true" } else { "false" }))
    }
    /// An escaped string.
    pub fn str(&mut self, v: &str) -> &mut Self {
        self.elem(|w| write_json_str(w, v))
    }
    /// A float (NaN and infinities become `null`).
    pub fn f64(&mut self, v: f64, decimals: usize) -> &mut Self {
        self.elem(|w| write_f64(w, v, decimals))
    }
    /// A nested array.
    pub fn array(&mut self, f: impl FnOnce(&mut ArrayWriter<'_>)) -> &mut Self {
        self.elem(|w| write_array(w, f))
    }
    /// A nested object.
    pub fn object(&mut self, f: impl FnOnce(&mut ObjectWriter<'_>)) -> &mut Self {
        self.elem(|w| write_object(w, f))
    }
}

/// Streams one record, `@@report {"kind":…,…}\n`, into any `fmt::Write` (field methods
/// through `Deref` to [`ObjectWriter`]). Nothing is buffered: on a console shared by CPUs, hold
/// the console lock until [`ReportWriter::finish`], or use [`Record`].
///
/// ```
/// use abi::report::ReportWriter;
/// let mut out = String::new();
/// let mut r = ReportWriter::new(&mut out, "bench");
/// r.str("name", "flush \"elision\"").u64("iters", 100).array("ns", |a| {
///     a.u64(3200).u64(2850);
/// });
/// r.finish().unwrap();
/// assert_eq!(out, "@@report {\"kind\":\"bench\",\"name\":\"flush \\\"elision\\\"\",\"iters\":100,\"ns\":[3200,2850]}\n");
/// ```
pub struct ReportWriter<'w> {
    obj: ObjectWriter<'w>,
}

impl<'w> ReportWriter<'w> {
    /// Writes the prefix, `{` and the `kind` field.
    pub fn new(w: &'w mut dyn Write, kind: &str) -> Self {
        let result = w.write_str(PREFIX).and_then(|_| w.write_char('{'));
        let mut obj = ObjectWriter { w, first: true, result };
        obj.str("kind", kind);
        ReportWriter { obj }
    }

    /// Closes the record with `}` and a newline; returns the first error met.
    pub fn finish(self) -> fmt::Result {
        let ObjectWriter { w, result, .. } = self.obj;
        result?;
        w.write_str("}\n")
    }
}

impl<'w> core::ops::Deref for ReportWriter<'w> {
    type Target = ObjectWriter<'w>;
    fn deref(&self) -> &ObjectWriter<'w> {
        &self.obj
    }
}

impl<'w> core::ops::DerefMut for ReportWriter<'w> {
    fn deref_mut(&mut self) -> &mut ObjectWriter<'w> {
        &mut self.obj
    }
}

/// Writes one whole record (`@@report {…}\n`) whose fields `fields` adds.
pub fn write_report(w: &mut dyn Write, kind: &str, fields: impl FnOnce(&mut ObjectWriter<'_>)) -> fmt::Result {
    let mut r = ReportWriter::new(w, kind);
    fields(&mut r);
    r.finish()
}

/// A record built in a fixed buffer (no allocation), printed whole by `Display` as
/// `@@report {…}` (no newline). At most [`CAPACITY`] bytes: a field that does not fit is
/// dropped with every later one, and the record ends with `"truncated":true`.
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

impl Record {
    /// A record of `kind`.
    pub fn new(kind: &str) -> Self {
        let mut r = Self { buf: [0; CAPACITY], len: 0, truncated: false };
        r.field("kind", |w| write_json_str(w, kind));
        r
    }

    /// Appends `"name":<value>`, or marks the record truncated if it does not fit.
    fn field(&mut self, name: &str, value: impl FnOnce(&mut dyn Write) -> fmt::Result) -> &mut Self {
        if self.truncated {
            return self;
        }
        let start = self.len;
        let limit = CAPACITY - RESERVE;
        let mut c = Cursor { buf: &mut self.buf[..limit], len: start };
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

    field_methods!(&mut Self);

    /// Whether a field had to be dropped.
    pub fn is_truncated(&self) -> bool {
        self.truncated
    }
}

impl fmt::Display for Record {
    /// `@@report {…}` (no newline), written with a single `write_str`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Assemble the whole line first so it reaches the console in one write.
        let mut line = [0u8; PREFIX.len() + CAPACITY + 2];
        let mut c = Cursor { buf: &mut line, len: 0 };
        c.write_str(PREFIX)?;
        c.write_char('{')?;
        // The buffer only ever holds whole UTF-8 strings written through `write_str`.
        c.write_str(core::str::from_utf8(&self.buf[..self.len]).map_err(|_| fmt::Error)?)?;
        if self.truncated {
            c.write_str(",\"truncated\":true")?;
        }
        c.write_char('}')?;
        let n = c.len;
        f.write_str(core::str::from_utf8(&line[..n]).map_err(|_| fmt::Error)?)
    }
}

#[cfg(feature = "std")]
pub use parse::{parse_all, parse_line, Map, ParseError, ParsedRecord, Value};

#[cfg(feature = "std")]
mod parse {
    use super::PREFIX;
    use std::string::{String, ToString};
    use std::vec::Vec;

    pub use serde_json::{Map, Value};

    /// A record read back from a run's output.
    #[derive(Debug, Clone, PartialEq)]
    pub struct ParsedRecord {
        /// The `kind` field.
        pub kind: String,
        /// Every other field.
        pub fields: Map<String, Value>,
    }

    fn as_u64(v: &Value) -> Option<u64> {
        match v {
            Value::Number(n) => n.as_u64(),
            Value::String(s) => match s.strip_prefix("0x") {
                Some(h) => u64::from_str_radix(h, 16).ok(),
                None => s.parse().ok(),
            },
            _ => None,
        }
    }

    impl ParsedRecord {
        /// A field's raw JSON value.
        pub fn get(&self, name: &str) -> Option<&Value> {
            self.fields.get(name)
        }
        /// A field as u64: a JSON number, or a `"0x…"` / decimal string.
        pub fn u64(&self, name: &str) -> Option<u64> {
            as_u64(self.fields.get(name)?)
        }
        /// A field as i64.
        pub fn i64(&self, name: &str) -> Option<i64> {
            self.fields.get(name)?.as_i64()
        }
        /// A boolean field.
        pub fn bool(&self, name: &str) -> Option<bool> {
            self.fields.get(name)?.as_bool()
        }
        /// A string field.
        pub fn str(&self, name: &str) -> Option<&str> {
            self.fields.get(name)?.as_str()
        }
        /// A number field as f64.
        pub fn f64(&self, name: &str) -> Option<f64> {
            self.fields.get(name)?.as_f64()
        }
        /// An array of numbers or `"0x…"` strings; `None` if any element is neither.
        pub fn u64s(&self, name: &str) -> Option<Vec<u64>> {
            self.fields.get(name)?.as_array()?.iter().map(as_u64).collect()
        }
        /// An array of strings.
        pub fn strs(&self, name: &str) -> Option<Vec<&str>> {
            self.fields.get(name)?.as_array()?.iter().map(Value::as_str).collect()
        }
    }

    /// Why the text after a prefix is not a record.
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub enum ParseError {
        /// Not valid JSON (often: another CPU's output cut into the record).
        Json {
            /// serde_json's message, with line and column.
            message: String,
            /// The text after the prefix (at most 160 characters).
            text: String,
        },
        /// Valid JSON but not an object.
        NotAnObject {
            /// The text after the prefix (at most 160 characters).
            text: String,
        },
        /// An object without a string `kind`.
        MissingKind {
            /// The text after the prefix (at most 160 characters).
            text: String,
        },
    }

    impl std::fmt::Display for ParseError {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            match self {
                ParseError::Json { message, text } => {
                    write!(f, "bad @@report record ({message}): {text}")
                }
                ParseError::NotAnObject { text } => {
                    write!(f, "@@report record is not a JSON object: {text}")
                }
                ParseError::MissingKind { text } => {
                    write!(f, "@@report record without a string \"kind\": {text}")
                }
            }
        }
    }

    impl std::error::Error for ParseError {}

    fn excerpt(s: &str) -> String {
        let s = s.trim_end();
        match s.char_indices().nth(160) {
            Some((i, _)) => std::format!("{}…", &s[..i]),
            None => s.to_string(),
        }
    }

    /// Parses the JSON value at the start of `s`; returns it and the bytes it used. Text after
    /// the object (another CPU's output) is ignored.
    fn parse_at(s: &str) -> (Result<ParsedRecord, ParseError>, usize) {
        let mut stream = serde_json::Deserializer::from_str(s).into_iter::<Value>();
        let first = stream.next();
        let used = stream.byte_offset().max(1);
        let r = match first {
            None => Err(ParseError::Json { message: "nothing after the prefix".into(), text: excerpt(s) }),
            Some(Err(e)) => Err(ParseError::Json { message: e.to_string(), text: excerpt(s) }),
            Some(Ok(Value::Object(mut fields))) => match fields.shift_remove("kind") {
                Some(Value::String(kind)) => Ok(ParsedRecord { kind, fields }),
                _ => Err(ParseError::MissingKind { text: excerpt(s) }),
            },
            Some(Ok(_)) => Err(ParseError::NotAnObject { text: excerpt(s) }),
        };
        (r, used)
    }

    /// `None` when the line holds no record; otherwise the first record on it (the prefix may
    /// follow other text) or why it is not one.
    pub fn parse_line(line: &str) -> Option<Result<ParsedRecord, ParseError>> {
        let at = line.find(PREFIX)?;
        Some(parse_at(&line[at + PREFIX.len()..]).0)
    }

    /// Every record in `text` (a whole run's output), in order, including several on one line.
    pub fn parse_all(text: &str) -> Vec<Result<ParsedRecord, ParseError>> {
        let mut out = Vec::new();
        let mut rest = text;
        while let Some(at) = rest.find(PREFIX) {
            let body = &rest[at + PREFIX.len()..];
            let (r, used) = parse_at(body);
            // A broken record: resume at the next line (or the next prefix, if it is earlier).
            let skip = if r.is_ok() {
                used
            } else {
                let eol = body.find('\n').unwrap_or(body.len());
                body.find(PREFIX).map_or(eol, |p| p.min(eol))
            };
            out.push(r);
            rest = &body[skip.min(body.len())..];
        }
        out
    }
}
