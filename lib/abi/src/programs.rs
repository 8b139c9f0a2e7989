//! The kernel's EL0 programs (`user/src/bin/`) and the arguments each takes, in one table
//! ([`PROGRAMS`]): the kernel checks every `user=NAME[:ARGS]` against it at boot, as strictly
//! as its boot words (an unknown key, a key twice, a number that does not parse or lies outside
//! its range, an unknown choice: refused, naming the program and the key), and the programs read
//! their (then valid) arguments through [`uint`] and [`text`]. A host test keeps the table equal
//! to the programs in `user/src/bin/`.
//!
//! Arguments come in one of three shapes: none, one positional value (`user=hello:3`), or
//! comma-separated `key=value` pairs (`user=stale:rounds=10,pages=16`).

use core::fmt;

/// What one value may be.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Value {
    /// A decimal integer in `[min, max]`.
    Uint {
        /// Smallest accepted.
        min: u64,
        /// Largest accepted.
        max: u64,
    },
    /// One of these.
    Choice(&'static [&'static str]),
    /// A `/`-separated sequence of these, run in that order (`modes=base/window`).
    Sequence(&'static [&'static str]),
}

/// A program's argument shape.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shape {
    /// No arguments at all.
    None,
    /// One value, no key; empty means the program's default.
    One(Value),
    /// Comma-separated `key=value` pairs, each key at most once, any may be left out.
    Keys(&'static [(&'static str, Value)]),
}

/// One EL0 program.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Program {
    /// Its name (`user/src/bin/NAME.rs`).
    pub name: &'static str,
    /// What it takes.
    pub args: Shape,
    /// One line: what it does.
    pub about: &'static str,
}

const fn num(min: u64, max: u64) -> Value {
    Value::Uint { min, max }
}

/// Where the kernel loads a position-independent EL0 program (4 MiB): the user address space's
/// layout, which the host's instruction counter needs too (`xtask/src/plugin.rs`).
pub const PROGRAM_BASE: u64 = 0x40_0000;
/// Where the kernel's `mmap` without MAP_FIXED starts looking (64 GiB), below it if nothing is
/// free above.
pub const MMAP_BASE: u64 = 0x10_0000_0000;

/// Every EL0 program the kernel embeds, with its arguments.
pub const PROGRAMS: &[Program] = &[
    Program {
        name: "fault",
        args: Shape::One(Value::Choice(&["kernel-read", "null-write", "undef", "exec-data", "bad-pc"])),
        about: "does what a task may not; the kernel must end it",
    },
    Program { name: "hello", args: Shape::One(num(0, 255)), about: "one line; exits with its argument" },
    Program {
        name: "ipi",
        args: Shape::Keys(&[("rounds", num(1, 200))]),
        about: "function-call IPIs to an idle CPU, each timed, counting the ticks they needed",
    },
    Program {
        name: "mprotect",
        args: Shape::Keys(&[("rounds", num(1, 200))]),
        about: "the flush-elision microbenchmark",
    },
    Program {
        name: "percpu",
        args: Shape::Keys(&[
            ("tasks", num(1, 48)),
            ("rounds", num(1, 1 << 20)),
            ("iters", num(1, 1 << 32)),
            ("modes", Value::Sequence(&["base", "window", "seeded"])),
        ]),
        about: "per-CPU counters under preemption and migration",
    },
    Program {
        name: "percpu_bench",
        args: Shape::Keys(&[("rounds", num(1, 64))]),
        about: "this_cpu ops, baseline against the window",
    },
    Program { name: "selftest", args: Shape::None, about: "system calls, faults, threads" },
    Program {
        name: "spin",
        args: Shape::Keys(&[("ms", num(1, 600_000)), ("left", num(0, 64))]),
        about: "switches address spaces for ms milliseconds, and while more than left programs run",
    },
    Program {
        name: "stale",
        args: Shape::Keys(&[("rounds", num(1, 1 << 20)), ("pages", num(1, 4096))]),
        about: "no stale translation survives an mprotect across CPUs",
    },
    Program {
        name: "wake",
        args: Shape::Keys(&[("rounds", num(1, 200))]),
        about: "cross-CPU wake-ups: a task spawned on the next CPU, waited for, per round",
    },
];

/// The program named `name`.
pub fn find(name: &str) -> Option<&'static Program> {
    PROGRAMS.iter().find(|p| p.name == name)
}

/// Why a program's arguments were refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ArgError<'a> {
    /// No such program.
    UnknownProgram(&'a str),
    /// The program takes no arguments.
    NoArgs {
        /// The program.
        program: &'static str,
        /// What was given.
        given: &'a str,
    },
    /// A key the program does not take.
    UnknownKey {
        /// The program.
        program: &'static str,
        /// The key.
        key: &'a str,
    },
    /// A key given twice.
    Twice {
        /// The program.
        program: &'static str,
        /// The key.
        key: &'a str,
    },
    /// A pair without `=`.
    NotAPair {
        /// The program.
        program: &'static str,
        /// The item.
        item: &'a str,
    },
    /// A value the key (or the positional argument) does not take.
    BadValue {
        /// The program.
        program: &'static str,
        /// The key (`""` for a positional value).
        key: &'static str,
        /// The value.
        value: &'a str,
        /// What it takes.
        expects: Value,
    },
}

impl fmt::Display for Value {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Value::Uint { min, max } => write!(f, "a number from {min} to {max}"),
            Value::Choice(c) => {
                f.write_str("one of ")?;
                list(f, c, ", ")
            }
            Value::Sequence(c) => {
                f.write_str("a /-separated sequence of ")?;
                list(f, c, ", ")
            }
        }
    }
}

fn list(f: &mut fmt::Formatter<'_>, items: &[&str], sep: &str) -> fmt::Result {
    for (i, x) in items.iter().enumerate() {
        if i > 0 {
            f.write_str(sep)?;
        }
        f.write_str(x)?;
    }
    Ok(())
}

impl fmt::Display for ArgError<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ArgError::UnknownProgram(n) => {
                write!(f, "no EL0 program {n:?}; the programs: ")?;
                for (i, p) in PROGRAMS.iter().enumerate() {
                    write!(f, "{}{}", if i > 0 { ", " } else { "" }, p.name)?;
                }
                Ok(())
            }
            ArgError::NoArgs { program, given } => write!(f, "user={program}: takes no arguments, given {given:?}"),
            ArgError::UnknownKey { program, key } => {
                write!(f, "user={program}: no argument {key:?}; it takes ")?;
                keys(f, program)
            }
            ArgError::Twice { program, key } => write!(f, "user={program}: argument {key:?} given twice"),
            ArgError::NotAPair { program, item } => {
                write!(f, "user={program}: {item:?} is not key=value; it takes ")?;
                keys(f, program)
            }
            ArgError::BadValue { program, key: "", value, expects } => {
                write!(f, "user={program}:{value}: {value:?} is not {expects}")
            }
            ArgError::BadValue { program, key, value, expects } => {
                write!(f, "user={program}: {key}={value}: {value:?} is not {expects}")
            }
        }
    }
}

fn keys(f: &mut fmt::Formatter<'_>, program: &str) -> fmt::Result {
    match find(program).map(|p| p.args) {
        Some(Shape::Keys(k)) => {
            for (i, (key, v)) in k.iter().enumerate() {
                write!(f, "{}{key}= ({v})", if i > 0 { ", " } else { "" })?;
            }
            Ok(())
        }
        _ => f.write_str("nothing"),
    }
}

fn check_value<'a>(program: &'static str, key: &'static str, value: &'a str, v: Value) -> Result<(), ArgError<'a>> {
    let ok = match v {
        Value::Uint { min, max } => value.parse::<u64>().is_ok_and(|n| (min..=max).contains(&n)),
        Value::Choice(c) => c.contains(&value),
        Value::Sequence(c) => value.split('/').all(|x| c.contains(&x)),
    };
    if ok {
        Ok(())
    } else {
        Err(ArgError::BadValue { program, key, value, expects: v })
    }
}

/// Checks `args` for program `name` (see the module doc).
pub fn check<'a>(name: &'a str, args: &'a str) -> Result<&'static Program, ArgError<'a>> {
    let p = find(name).ok_or(ArgError::UnknownProgram(name))?;
    match p.args {
        Shape::None if args.is_empty() => {}
        Shape::None => return Err(ArgError::NoArgs { program: p.name, given: args }),
        Shape::One(_) if args.is_empty() => {}
        Shape::One(v) => check_value(p.name, "", args, v)?,
        Shape::Keys(_) if args.is_empty() => {}
        Shape::Keys(keys) => {
            for (i, item) in args.split(',').enumerate() {
                let Some((k, v)) = item.split_once('=') else {
                    return Err(ArgError::NotAPair { program: p.name, item });
                };
                let Some(&(key, value)) = keys.iter().find(|(key, _)| *key == k) else {
                    return Err(ArgError::UnknownKey { program: p.name, key: k });
                };
                if args.split(',').take(i).any(|earlier| earlier.split_once('=').is_some_and(|(e, _)| e == k)) {
                    return Err(ArgError::Twice { program: p.name, key: k });
                }
                check_value(p.name, key, v, value)?;
            }
        }
    }
    Ok(p)
}

/// The value of `key` in checked `key=value` arguments.
pub fn text<'a>(args: &'a str, key: &str) -> Option<&'a str> {
    args.split(',').find_map(|kv| kv.split_once('=').filter(|(k, _)| *k == key).map(|(_, v)| v))
}

/// The number `key` is set to in checked arguments.
pub fn uint(args: &str, key: &str) -> Option<u64> {
    text(args, key)?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    extern crate std;
    use std::string::ToString;

    #[test]
    fn checked_as_strictly_as_boot_words() {
        assert!(check("stale", "").is_ok());
        assert!(check("stale", "rounds=10,pages=16").is_ok());
        assert!(check("percpu", "modes=base/window/seeded,rounds=6,iters=20000").is_ok());
        assert!(check("hello", "3").is_ok());
        assert!(check("fault", "undef").is_ok());
        let cases: [(&str, &str, &str); 10] = [
            ("percpu", "modez=base", "no argument \"modez\""),
            ("stale", "rounds=99999999999999999999", "is not a number from 1 to 1048576"),
            ("stale", "rounds=0", "is not a number from 1 to 1048576"),
            ("stale", "rounds=1,rounds=2", "given twice"),
            ("stale", "rounds", "not key=value"),
            ("percpu", "modes=base/windows", "a /-separated sequence of base, window, seeded"),
            ("hello", "300", "is not a number from 0 to 255"),
            ("fault", "oops", "one of kernel-read"),
            ("selftest", "x", "takes no arguments"),
            ("nosuch", "", "no EL0 program \"nosuch\""),
        ];
        for (p, a, says) in cases {
            let e = check(p, a).expect_err(a).to_string();
            assert!(e.contains(says), "user={p}:{a}: {e}");
        }
        assert_eq!(uint("rounds=10,pages=16", "pages"), Some(16));
        assert_eq!(uint("rounds=10", "pages"), None);
        assert_eq!(text("modes=base/window", "modes"), Some("base/window"));
    }

    #[test]
    fn the_table_is_the_programs_in_user_src_bin() {
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../../user/src/bin");
        let mut on_disk: std::vec::Vec<std::string::String> = std::fs::read_dir(dir)
            .expect("user/src/bin")
            .flatten()
            .filter_map(|e| e.file_name().to_str()?.strip_suffix(".rs").map(std::string::String::from))
            .collect();
        on_disk.sort();
        let table: std::vec::Vec<&str> = PROGRAMS.iter().map(|p| p.name).collect();
        assert_eq!(
            on_disk, table,
            "lib/abi/src/programs.rs PROGRAMS (sorted) and user/src/bin/ must list the same programs"
        );
    }
}
