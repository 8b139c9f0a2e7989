//! Strict boot arguments, shared by the hypervisor and the kernel.
//!
//! Each binary owns one [`Table`] of the words it accepts (the hypervisor's in
//! `lib/hypcore/src/options.rs`, the kernel's in `lib/kcore/src/options/mod.rs`); adding a word is one
//! line there. [`parse`] checks a command line against it and refuses, with a message that
//! names the word and lists the accepted ones:
//!
//! * a word the table does not know (a typo such as `bbml=off` must not boot the default
//!   configuration silently), with the closest known word as a suggestion;
//! * a word given twice, even with the same value (`test=panic test=undef`: several values go
//!   in one comma list where the word takes one, `test=a,b`);
//! * a value the word does not take: an unknown choice, an empty or repeated list item, a
//!   number or size that does not parse, overflows, or lies outside the word's range.
//!
//! Sizes are bytes or a number with `K`, `M`, `G` or `T` (powers of 1024), computed with
//! checked arithmetic ([`parse_size`]). Nothing here panics on any input (fuzzed on the host).
#![no_std]
#![deny(missing_docs)]

extern crate alloc;

use alloc::format;
use alloc::string::{String, ToString};
use alloc::vec::Vec;
use core::fmt;

/// What a word takes after `=`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Value {
    /// Nothing: the word alone (`hyp.check-split`).
    Flag,
    /// One of these (`bbml2=auto|on|off`).
    Choice(&'static [&'static str]),
    /// A comma-separated list of these, each at most once (`test=mem-perms,bad-calls`).
    List(&'static [&'static str]),
    /// A size in bytes, with an optional `K`/`M`/`G`/`T` suffix, within `[min, max]`.
    Size {
        /// Smallest accepted.
        min: u64,
        /// Largest accepted.
        max: u64,
    },
    /// An integer (decimal, or hexadecimal after `0x`) within `[min, max]`.
    Uint {
        /// Smallest accepted.
        min: u64,
        /// Largest accepted.
        max: u64,
    },
    /// Any text (possibly empty) that its owner checks itself, e.g. PMU event names that only
    /// the CPU's own tables can judge (`perf.events=INST_RETIRED,0x2d:el1`).
    Text,
}

/// One accepted word.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Word {
    /// The word up to `=` (or the whole flag), e.g. `"hyp.pool"`, `"bbml2_unsafe_override"`.
    pub name: &'static str,
    /// What it takes.
    pub value: Value,
    /// One line for the list of accepted words.
    pub help: &'static str,
}

impl Word {
    /// A flag.
    pub const fn flag(name: &'static str, help: &'static str) -> Word {
        Word { name, value: Value::Flag, help }
    }
    /// A word taking one of `choices`.
    pub const fn choice(name: &'static str, choices: &'static [&'static str], help: &'static str) -> Word {
        Word { name, value: Value::Choice(choices), help }
    }
    /// A word taking a comma list of `items`.
    pub const fn list(name: &'static str, items: &'static [&'static str], help: &'static str) -> Word {
        Word { name, value: Value::List(items), help }
    }
    /// A word taking a size in `[min, max]`.
    pub const fn size(name: &'static str, min: u64, max: u64, help: &'static str) -> Word {
        Word { name, value: Value::Size { min, max }, help }
    }
    /// A word taking an integer in `[min, max]`.
    pub const fn uint(name: &'static str, min: u64, max: u64, help: &'static str) -> Word {
        Word { name, value: Value::Uint { min, max }, help }
    }

    /// A word taking text its owner checks.
    pub const fn text(name: &'static str, help: &'static str) -> Word {
        Word { name, value: Value::Text, help }
    }

    /// How the word is written, e.g. `hyp.pool=SIZE`, `bbml2=auto|on|off`, `test=NAME[,NAME…]`.
    pub fn syntax(&self) -> String {
        match self.value {
            Value::Flag => self.name.to_string(),
            Value::Choice(c) => format!("{}={}", self.name, c.join("|")),
            Value::List(_) => format!("{}=NAME[,NAME...]", self.name),
            Value::Size { .. } => format!("{}=SIZE", self.name),
            Value::Uint { .. } => format!("{}=N", self.name),
            Value::Text => format!("{}=TEXT", self.name),
        }
    }

    /// What the value may be, in words (for error messages).
    pub fn expects(&self) -> String {
        match self.value {
            Value::Flag => String::from("no value"),
            Value::Choice(c) => format!("one of {}", c.join(", ")),
            Value::List(items) => format!("a comma list, each at most once, of {}", items.join(", ")),
            Value::Size { min, max } => {
                format!(
                    "a size from {} to {} (bytes, or a number with K, M, G or T)",
                    format_size(min),
                    format_size(max)
                )
            }
            Value::Uint { min, max } => format!("a number from {min} to {max} (decimal, or hex after 0x)"),
            Value::Text => String::from("text (checked where it is used)"),
        }
    }
}

/// The words one binary accepts.
#[derive(Debug, Clone, Copy)]
pub struct Table {
    /// Who reads them, for messages: `"kernel"`, `"hypervisor"`.
    pub owner: &'static str,
    /// Every accepted word.
    pub words: &'static [Word],
    /// Prefixes of words that belong to someone else, with what to tell a user who gives one
    /// here (e.g. `hyp.` words reaching the kernel when no hypervisor runs).
    pub foreign: &'static [(&'static str, &'static str)],
}

impl Table {
    /// The word called `name`.
    pub fn word(&self, name: &str) -> Option<&'static Word> {
        self.words.iter().find(|w| w.name == name)
    }

    /// Every accepted word's syntax, comma-separated.
    pub fn accepted(&self) -> String {
        let v: Vec<String> = self.words.iter().map(Word::syntax).collect();
        v.join(", ")
    }

    /// The known word closest to `name` (an edit distance of at most 2, or a prefix either
    /// way), for "did you mean".
    pub fn closest(&self, name: &str) -> Option<&'static str> {
        let mut best: Option<(usize, &'static str)> = None;
        if name.len() > 64 {
            return None;
        }
        for w in self.words {
            let d = edit_distance(name, w.name);
            let near = d <= 2 || (name.len() >= 3 && (w.name.starts_with(name) || name.starts_with(w.name)));
            if near && best.is_none_or(|(bd, _)| d < bd) {
                best = Some((d, w.name));
            }
        }
        best.map(|(_, n)| n)
    }
}

/// A word's parsed value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Setting {
    /// A flag that was given.
    Flag,
    /// The choice made.
    Choice(&'static str),
    /// The list items, in the order given.
    List(Vec<&'static str>),
    /// Bytes.
    Size(u64),
    /// The number.
    Uint(u64),
    /// The text.
    Text(String),
}

/// The words given, checked against a table.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Args {
    given: Vec<(&'static str, String, Setting)>,
}

impl Args {
    fn get(&self, name: &str) -> Option<&Setting> {
        self.given.iter().find(|(n, _, _)| *n == name).map(|(_, _, s)| s)
    }

    /// Whether flag `name` was given.
    pub fn flag(&self, name: &str) -> bool {
        matches!(self.get(name), Some(Setting::Flag))
    }

    /// The choice given for `name`.
    pub fn choice(&self, name: &str) -> Option<&'static str> {
        match self.get(name) {
            Some(Setting::Choice(c)) => Some(c),
            _ => None,
        }
    }

    /// The list given for `name` (empty if not given).
    pub fn list(&self, name: &str) -> &[&'static str] {
        match self.get(name) {
            Some(Setting::List(l)) => l,
            _ => &[],
        }
    }

    /// The size given for `name`.
    pub fn size(&self, name: &str) -> Option<u64> {
        match self.get(name) {
            Some(Setting::Size(s)) => Some(*s),
            _ => None,
        }
    }

    /// The number given for `name`.
    pub fn uint(&self, name: &str) -> Option<u64> {
        match self.get(name) {
            Some(Setting::Uint(s)) => Some(*s),
            _ => None,
        }
    }

    /// The text given for `name`.
    pub fn text(&self, name: &str) -> Option<&str> {
        match self.get(name) {
            Some(Setting::Text(t)) => Some(t),
            _ => None,
        }
    }

    /// The words as written, in order.
    pub fn words(&self) -> impl Iterator<Item = &str> {
        self.given.iter().map(|(_, w, _)| w.as_str())
    }

    /// How many words were given.
    pub fn len(&self) -> usize {
        self.given.len()
    }

    /// Whether no word was given.
    pub fn is_empty(&self) -> bool {
        self.given.is_empty()
    }
}

/// Why a command line was refused. Each message names the word and what is accepted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Error {
    /// A word the table does not know.
    Unknown {
        /// The word as written.
        word: String,
        /// The table's owner.
        owner: &'static str,
        /// The closest known word, if any is close.
        suggestion: Option<&'static str>,
        /// Why it is someone else's, for a word with a foreign prefix.
        foreign: Option<&'static str>,
        /// Every accepted word.
        accepted: String,
    },
    /// A word given twice.
    Duplicate {
        /// The first occurrence.
        first: String,
        /// The second.
        second: String,
        /// Whether the word takes a list (then: one word with a comma list).
        list: bool,
    },
    /// [`FIRMWARE_MARKER`] more than once: the words between two markers would silently count
    /// as the boot loader's (ignored).
    MarkerTwice {
        /// The words between the first and the second marker.
        between: String,
    },
    /// A value the word does not take.
    BadValue {
        /// The word as written.
        word: String,
        /// What is wrong.
        why: String,
        /// What the word takes.
        expects: String,
    },
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Unknown { word, owner, suggestion, foreign, accepted } => {
                write!(f, "unknown boot argument {word:?}")?;
                if let Some(why) = foreign {
                    write!(f, ": {why}")?;
                } else if let Some(s) = suggestion {
                    write!(f, " (did you mean {s:?}?)")?;
                }
                write!(f, "; the {owner} accepts: {accepted} (a boot loader's own words go before the word {FIRMWARE_MARKER:?})")
            }
            Error::Duplicate { first, second, list } => {
                write!(f, "boot argument given twice: {first:?} and {second:?}")?;
                if *list {
                    write!(f, " (give one word with a comma list)")?;
                }
                Ok(())
            }
            Error::MarkerTwice { between } => write!(
                f,
                "the word {FIRMWARE_MARKER:?} is given twice: it ends a boot loader's own words once, at the start of \
                 ours (the words between the two, {between:?}, would be ignored)"
            ),
            Error::BadValue { word, why, expects } => {
                write!(f, "bad boot argument {word:?}: {why}; it takes {expects}")
            }
        }
    }
}

/// The word that ends a boot loader's own words: on a Raspberry Pi 5 the firmware puts its words
/// (`coherent_pool=1M 8250.nr_uarts=1 … vc_mem.mem_base=…`) in front of cmdline.txt, and
/// `cargo xtask flash` writes this word first in that file. Words before it are the firmware's
/// (listed once by the binaries, never checked, never passed on); without it every word is ours.
pub const FIRMWARE_MARKER: &str = "pgtlab";

/// Splits a command line at [`FIRMWARE_MARKER`]: (the boot loader's words, ours). The marker
/// twice is an error ([`Error::MarkerTwice`]).
pub fn split_firmware(cmdline: &str) -> Result<(Vec<&str>, Vec<&str>), Error> {
    let words: Vec<&str> = cmdline.split_ascii_whitespace().collect();
    let Some(i) = words.iter().position(|w| *w == FIRMWARE_MARKER) else {
        return Ok((Vec::new(), words));
    };
    let (theirs, ours) = (words[..i].to_vec(), words[i + 1..].to_vec());
    if let Some(j) = ours.iter().position(|w| *w == FIRMWARE_MARKER) {
        return Err(Error::MarkerTwice { between: ours[..j].join(" ") });
    }
    Ok((theirs, ours))
}

/// Checks the whitespace-separated words of `cmdline` against `table`.
pub fn parse(cmdline: &str, table: &Table) -> Result<Args, Error> {
    parse_words(cmdline.split_ascii_whitespace(), table)
}

/// Checks `words` against `table`.
pub fn parse_words<'a>(words: impl IntoIterator<Item = &'a str>, table: &Table) -> Result<Args, Error> {
    let mut args = Args::default();
    for w in words {
        let (name, value) = match w.split_once('=') {
            Some((n, v)) => (n, Some(v)),
            None => (w, None),
        };
        let Some(word) = table.word(name) else {
            let foreign = table.foreign.iter().find(|(p, _)| w.starts_with(p)).map(|(_, why)| *why);
            return Err(Error::Unknown {
                word: w.to_string(),
                owner: table.owner,
                suggestion: if foreign.is_some() { None } else { table.closest(name) },
                foreign,
                accepted: table.accepted(),
            });
        };
        if let Some((_, first, _)) = args.given.iter().find(|(n, _, _)| *n == word.name) {
            return Err(Error::Duplicate {
                first: first.clone(),
                second: w.to_string(),
                list: matches!(word.value, Value::List(_)),
            });
        }
        let bad = |why: String| Error::BadValue { word: w.to_string(), why, expects: word.expects() };
        let setting = match (word.value, value) {
            (Value::Flag, None) => Setting::Flag,
            (Value::Flag, Some(_)) => return Err(bad(String::from("a flag takes no value"))),
            (Value::Text, Some(v)) => Setting::Text(v.to_string()),
            (_, None) => return Err(bad(format!("no value (write {})", word.syntax()))),
            (Value::Choice(c), Some(v)) => match c.iter().find(|x| **x == v) {
                Some(x) => Setting::Choice(x),
                None => return Err(bad(format!("{v:?} is not one of them"))),
            },
            (Value::List(items), Some(v)) => {
                let mut chosen: Vec<&'static str> = Vec::new();
                for item in v.split(',') {
                    let Some(x) = items.iter().find(|x| **x == item) else {
                        return Err(bad(if item.is_empty() {
                            String::from("an empty item")
                        } else {
                            format!("{item:?} is not one of them")
                        }));
                    };
                    if chosen.contains(x) {
                        return Err(bad(format!("{item:?} is listed twice")));
                    }
                    chosen.push(x);
                }
                Setting::List(chosen)
            }
            (Value::Size { min, max }, Some(v)) => {
                let s = parse_size(v).map_err(|e| bad(e.to_string()))?;
                if s < min || s > max {
                    return Err(bad(format!("{v} is out of range")));
                }
                Setting::Size(s)
            }
            (Value::Uint { min, max }, Some(v)) => {
                let n = parse_uint(v).map_err(|e| bad(e.to_string()))?;
                if n < min || n > max {
                    return Err(bad(format!("{v} is out of range")));
                }
                Setting::Uint(n)
            }
        };
        args.given.push((word.name, w.to_string(), setting));
    }
    Ok(args)
}

/// Why a number or a size did not parse.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NumberError {
    /// Nothing (or only a unit) was given.
    Empty,
    /// A character that is neither a decimal digit nor a unit at the end.
    BadDigit,
    /// The value does not fit in 64 bits.
    Overflow,
}

impl fmt::Display for NumberError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            NumberError::Empty => "no number",
            NumberError::BadDigit => "not a number (decimal, or hex after 0x; sizes may end in K, M, G or T)",
            NumberError::Overflow => "too large for 64 bits",
        })
    }
}

/// A decimal number, or hexadecimal after `0x` (digits only, checked).
pub fn parse_uint(s: &str) -> Result<u64, NumberError> {
    let (digits, radix) = match s.strip_prefix("0x") {
        Some(h) => (h, 16),
        None => (s, 10),
    };
    if digits.is_empty() {
        return Err(NumberError::Empty);
    }
    let mut n: u64 = 0;
    for c in digits.chars() {
        let d = c.to_digit(radix).ok_or(NumberError::BadDigit)?;
        n = n.checked_mul(radix.into()).and_then(|n| n.checked_add(d.into())).ok_or(NumberError::Overflow)?;
    }
    Ok(n)
}

/// Bytes, or a number with `K`, `M`, `G` or `T` (either case; powers of 1024), e.g. `64K`,
/// `16M`, `1G`, `1T`, `0x1000`. Overflow is an error, never a wrapped value.
pub fn parse_size(s: &str) -> Result<u64, NumberError> {
    let (num, shift) = match s.as_bytes().last() {
        Some(b'K' | b'k') => (&s[..s.len() - 1], 10),
        Some(b'M' | b'm') => (&s[..s.len() - 1], 20),
        Some(b'G' | b'g') => (&s[..s.len() - 1], 30),
        Some(b'T' | b't') => (&s[..s.len() - 1], 40),
        _ => (s, 0),
    };
    let n = parse_uint(num)?;
    n.checked_mul(1u64 << shift).ok_or(NumberError::Overflow)
}

/// `bytes` in the largest unit that divides it exactly: `16M`, `1G`, `1536K`, `100`.
pub fn format_size(bytes: u64) -> String {
    for (shift, unit) in [(40, 'T'), (30, 'G'), (20, 'M'), (10, 'K')] {
        if bytes != 0 && bytes.is_multiple_of(1 << shift) {
            return format!("{}{unit}", bytes >> shift);
        }
    }
    format!("{bytes}")
}

/// Levenshtein distance over bytes (short words only: the tables' names).
fn edit_distance(a: &str, b: &str) -> usize {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    let mut cur = alloc::vec![0; b.len() + 1];
    for (i, ca) in a.iter().enumerate() {
        cur[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let sub = prev[j] + usize::from(ca != cb);
            cur[j + 1] = sub.min(prev[j + 1] + 1).min(cur[j] + 1);
        }
        core::mem::swap(&mut prev, &mut cur);
    }
    prev[b.len()]
}

#[cfg(test)]
mod tests;
