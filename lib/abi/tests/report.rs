//! The @@report format: writers (no_std) and the std parser, round trips, escaping, garbage.

use abi::report::{
    parse_all, parse_line, write_json_str, write_report, ParseError, Record, ReportWriter, Value, CAPACITY, PREFIX,
};

fn stream(kind: &str, f: impl FnOnce(&mut abi::report::ObjectWriter<'_>)) -> String {
    let mut s = String::new();
    write_report(&mut s, kind, f).unwrap();
    s
}

#[test]
fn prefix_is_fixed() {
    assert_eq!(PREFIX, "@@report ");
}

#[test]
fn record_round_trip() {
    let mut r = Record::new("banner");
    r.u64("cpu", 3).hex("midr", 0x410f_d0b1).bool("bbml2", false).str("core", "Cortex-A76").i64("d", -5);
    r.u64s("v", &[1, u64::MAX]).strs("s", &["a", "b\"c"]).f64("ratio", 0.5, 3).hexes("h", &[0x10]);
    r.i64s("neg", &[-1, i64::MIN]).null("none");
    let line = r.to_string();
    assert!(line.starts_with("@@report {\"kind\":\"banner\",\"cpu\":3,"), "{line}");
    assert!(!line.contains('\n'));
    let p = parse_line(&line).unwrap().unwrap();
    assert_eq!(p.kind, "banner");
    assert!(p.get("kind").is_none(), "kind is not repeated among the fields");
    assert_eq!(p.u64("cpu"), Some(3));
    assert_eq!(p.u64("midr"), Some(0x410f_d0b1));
    assert_eq!(p.str("midr"), Some("0x410fd0b1"));
    assert_eq!(p.bool("bbml2"), Some(false));
    assert_eq!(p.str("core"), Some("Cortex-A76"));
    assert_eq!(p.i64("d"), Some(-5));
    assert_eq!(p.u64s("v"), Some(vec![1, u64::MAX]), "full 64-bit range survives");
    assert_eq!(p.strs("s"), Some(vec!["a", "b\"c"]));
    assert_eq!(p.f64("ratio"), Some(0.5));
    assert_eq!(p.u64s("h"), Some(vec![0x10]));
    assert_eq!(p.get("neg"), Some(&serde_json::json!([-1, i64::MIN])));
    assert_eq!(p.get("none"), Some(&Value::Null));
    assert!(!r.is_truncated());
    let keys: Vec<_> = p.fields.keys().map(String::as_str).collect();
    assert_eq!(keys, ["cpu", "midr", "bbml2", "core", "d", "v", "s", "ratio", "h", "neg", "none"], "written order");
}

#[test]
fn streaming_writer_nested_arrays_and_objects() {
    let out = stream("bench", |o| {
        o.str("name", "split")
            .array("matrix", |a| {
                a.array(|row| {
                    row.u64(1).u64(2);
                })
                .array(|row| {
                    row.str("x").hex(0xff).i64(-3).bool(true).f64(f64::NAN, 1);
                })
                .object(|o| {
                    o.u64("median_ns", 2850).f64("spread", 0.125, 3);
                });
            })
            .object("ratio", |o| {
                o.f64("value", 0.877, 3).strs("modes", &["baseline", "optimised"]);
            });
    });
    assert!(out.starts_with(PREFIX) && out.ends_with("}\n") && out.matches('\n').count() == 1, "{out}");
    let p = parse_line(&out).unwrap().unwrap();
    assert_eq!(p.kind, "bench");
    assert_eq!(
        p.get("matrix"),
        Some(&serde_json::json!([[1, 2], ["x", "0xff", -3, true, null], {"median_ns": 2850, "spread": 0.125}]))
    );
    assert_eq!(p.get("ratio"), Some(&serde_json::json!({"value": 0.877, "modes": ["baseline", "optimised"]})));
    // The buffered Record writes exactly the same JSON.
    let mut r = Record::new("bench");
    r.str("name", "split");
    r.array("matrix", |a| {
        a.array(|row| {
            row.u64(1).u64(2);
        });
    });
    let q = parse_line(&r.to_string()).unwrap().unwrap();
    assert_eq!(q.get("matrix"), Some(&serde_json::json!([[1, 2]])));
}

#[test]
fn escaping_of_every_awkward_character() {
    let nasty =
        "quote\" backslash\\ nl\n cr\r tab\t bs\u{8} ff\u{c} nul\0 esc\u{1b} del\u{7f} unicode é ☃ 🦀 </script>";
    let mut s = String::new();
    write_json_str(&mut s, nasty).unwrap();
    assert_eq!(serde_json::from_str::<String>(&s).unwrap(), nasty);
    assert!(s.contains("\\u0000") && s.contains("\\u001b") && s.contains("\\b") && s.contains("\\f"));
    assert!(!s[1..s.len() - 1].contains(['\n', '\r', '\0']), "no raw control characters: {s}");
    // In keys too, and through both writers.
    let out = stream(nasty, |o| {
        o.str(nasty, nasty).strs("list", &[nasty]);
    });
    let p = parse_line(&out).unwrap().unwrap();
    assert_eq!(p.kind, nasty);
    assert_eq!(p.str(nasty), Some(nasty));
    assert_eq!(p.strs("list"), Some(vec![nasty]));
    let mut r = Record::new("k");
    r.str(nasty, nasty);
    assert_eq!(parse_line(&r.to_string()).unwrap().unwrap().str(nasty), Some(nasty));
}

#[test]
fn record_truncates_without_breaking_json() {
    let mut r = Record::new("big");
    let long = "y".repeat(300);
    for i in 0..10 {
        r.str(&format!("f{i}"), &long);
    }
    // A nested array that overflows is dropped whole.
    r.array("late", |a| {
        for i in 0..1000 {
            a.u64(i);
        }
    });
    assert!(r.is_truncated());
    let line = r.to_string();
    assert!(line.len() <= PREFIX.len() + CAPACITY + 2);
    let p = parse_line(&line).unwrap().unwrap();
    assert_eq!(p.bool("truncated"), Some(true));
    assert_eq!(p.fields.len(), 3 + 1, "three 300-byte fields fit in 1 KiB, plus `truncated`");
    assert!(p.get("late").is_none());
}

/// A writer that fails after `n` bytes: errors propagate out of `finish`, nothing panics.
struct Full(usize);
impl core::fmt::Write for Full {
    fn write_str(&mut self, s: &str) -> core::fmt::Result {
        self.0 = self.0.checked_sub(s.len()).ok_or(core::fmt::Error)?;
        Ok(())
    }
}

#[test]
fn streaming_writer_reports_write_errors() {
    let full = stream("kind", |o| {
        o.u64("a", 1).array("b", |a| {
            a.str("long string here");
        });
    })
    .len();
    for n in [0, 5, 12, 30, full - 2, full - 1] {
        let mut w = Full(n);
        let mut r = ReportWriter::new(&mut w, "kind");
        r.u64("a", 1).array("b", |a| {
            a.str("long string here");
        });
        assert!(r.result().is_err() || n >= full - 2, "{n}");
        assert!(r.finish().is_err(), "{n}");
    }
    let mut w = Full(full);
    let mut r = ReportWriter::new(&mut w, "kind");
    r.u64("a", 1).array("b", |a| {
        a.str("long string here");
    });
    assert!(r.finish().is_ok());
}

#[test]
fn prefix_after_other_text_and_interleaving() {
    let p = parse_line("kernel: CPU 1 up @@report {\"kind\":\"k\",\"a\":1}").unwrap().unwrap();
    assert_eq!((p.kind.as_str(), p.u64("a")), ("k", Some(1)));
    // Another CPU's text right after the record, on the same line.
    let p = parse_line("@@report {\"kind\":\"k\",\"a\":2}hyp: CPU 2 on\r").unwrap().unwrap();
    assert_eq!(p.u64("a"), Some(2));
    // Two records on one line, and records spread over a log with noise.
    let log = "boot\n@@report {\"kind\":\"a\"}@@report {\"kind\":\"b\",\"s\":\"@@report {\"}\nnoise @@report {\"kind\":\"c\",\"x\":\nlast @@report {\"kind\":\"d\"}\n";
    let all = parse_all(log);
    let kinds: Vec<_> = all.iter().map(|r| r.as_ref().map(|p| p.kind.clone()).map_err(|_| ())).collect();
    assert_eq!(
        kinds,
        [Ok("a".into()), Ok("b".into()), Err(()), Ok("d".into())],
        "a prefix inside a string is not a record; a cut record is one error"
    );
}

#[test]
fn garbled_lines() {
    assert!(parse_line("no record here").is_none());
    assert!(parse_line("@@repor {\"kind\":\"x\"}").is_none());
    type Is = fn(&ParseError) -> bool;
    let cases: [(&str, Is); 7] = [
        ("@@report {\"kind\":", |e| matches!(e, ParseError::Json { .. })),
        ("@@report ", |e| matches!(e, ParseError::Json { .. })),
        ("@@report {\"kind\":\"k\",\"a\":1CPU1: hello}", |e| matches!(e, ParseError::Json { .. })),
        ("@@report {kind:\"k\"}", |e| matches!(e, ParseError::Json { .. })),
        ("@@report [1,2]", |e| matches!(e, ParseError::NotAnObject { .. })),
        ("@@report {\"a\":1}", |e| matches!(e, ParseError::MissingKind { .. })),
        ("@@report {\"kind\":7}", |e| matches!(e, ParseError::MissingKind { .. })),
    ];
    for (line, is) in cases {
        let e = parse_line(line).unwrap().unwrap_err();
        assert!(is(&e), "{line}: {e:?}");
        assert!(e.to_string().contains("@@report"), "{e}");
    }
    let long = format!("@@report {{\"kind\":\"{}", "z".repeat(1000));
    let e = parse_line(&long).unwrap().unwrap_err();
    assert!(e.to_string().len() < 400, "error text is an excerpt");
    // Garbage never panics.
    for len in 0..64 {
        let junk: String =
            (0..len).map(|i| ['{', '"', '}', '[', '\\', 'k', ':', '0', ' ', '\u{1}'][(i * 7 + len) % 10]).collect();
        let _ = parse_line(&format!("@@report {junk}"));
        let _ = parse_all(&format!("x@@report {junk}\n@@report {junk}"));
    }
}

#[test]
fn hex_and_decimal_strings_read_as_numbers() {
    let p =
        parse_line(r#"@@report {"kind":"k","a":"0x1f","b":"42","c":"zz","d":-1,"e":[1,"0x2","no"]}"#).unwrap().unwrap();
    assert_eq!(p.u64("a"), Some(31));
    assert_eq!(p.u64("b"), Some(42));
    assert_eq!(p.u64("c"), None);
    assert_eq!(p.u64("d"), None);
    assert_eq!(p.i64("d"), Some(-1));
    assert_eq!(p.u64s("e"), None);
    assert_eq!(p.u64("missing"), None);
}
