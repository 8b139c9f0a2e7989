use super::*;
use alloc::vec;

const TESTS: &[&str] = &["panic", "undef", "bad-calls"];
const TABLE: Table = Table {
    owner: "kernel",
    words: &[
        Word::choice("bbml2", &["auto", "on", "off"], "BBML2"),
        Word::flag("bbml2_unsafe_override", "force"),
        Word::list("test", TESTS, "self-tests"),
        Word::size("hyp.pool", 16 << 20, 1 << 40, "frame pool"),
        Word::uint("split.iters", 1, 1000, "iterations"),
        Word::text("perf.events", "events"),
    ],
    foreign: &[("hyp.", "a hypervisor word, and no hypervisor took it")],
};

fn err(cmdline: &str) -> String {
    parse(cmdline, &TABLE).unwrap_err().to_string()
}

#[test]
fn accepts_every_kind_of_word() {
    let a = parse("bbml2=off  bbml2_unsafe_override test=undef,panic hyp.pool=32M split.iters=7", &TABLE).unwrap();
    assert_eq!(a.choice("bbml2"), Some("off"));
    assert!(a.flag("bbml2_unsafe_override"));
    assert_eq!(a.list("test"), ["undef", "panic"]);
    assert_eq!(a.size("hyp.pool"), Some(32 << 20));
    assert_eq!(a.uint("split.iters"), Some(7));
    assert_eq!(a.len(), 5);
    assert_eq!(a.words().collect::<Vec<_>>()[2], "test=undef,panic");
    let none = parse("  ", &TABLE).unwrap();
    assert!(none.is_empty() && none.list("test").is_empty() && none.choice("bbml2").is_none());
}

#[test]
fn unknown_words_are_named_with_a_suggestion_and_the_accepted_list() {
    let e = err("bbml=off");
    assert!(e.starts_with("unknown boot argument \"bbml=off\" (did you mean \"bbml2\"?)"), "{e}");
    assert!(e.contains("the kernel accepts: bbml2=auto|on|off, bbml2_unsafe_override, test=NAME[,NAME...]"), "{e}");
    assert!(e.contains("hyp.pool=SIZE, split.iters=N"), "{e}");
    assert!(!err("zzzzzzzz").contains("did you mean"));
    let e = err("hyp.slotpool=1G");
    assert!(e.contains("a hypervisor word, and no hypervisor took it"), "{e}");
}

#[test]
fn duplicates_are_refused_even_with_the_same_value() {
    assert_eq!(
        err("test=panic test=undef"),
        "boot argument given twice: \"test=panic\" and \"test=undef\" (give one word with a comma list)"
    );
    assert!(err("bbml2=on bbml2=on").starts_with("boot argument given twice"));
    assert!(err("bbml2_unsafe_override bbml2_unsafe_override").starts_with("boot argument given twice"));
    // Not next to each other (seeded bugs `bootargs-*-vs-previous-only` of `cargo xtask mutants`).
    assert!(err("test=panic bbml2=on test=undef").starts_with("boot argument given twice"));
    assert!(err("test=panic,undef,panic").contains("\"panic\" is listed twice"));
}

#[test]
fn bad_values_say_what_the_word_takes() {
    assert_eq!(
        err("bbml2=maybe"),
        "bad boot argument \"bbml2=maybe\": \"maybe\" is not one of them; it takes one of auto, on, off"
    );
    assert!(err("bbml2").contains("no value (write bbml2=auto|on|off)"));
    assert!(err("bbml2_unsafe_override=1").contains("a flag takes no value"));
    assert!(err("test=panic,panic").contains("\"panic\" is listed twice"));
    assert!(err("test=panic,").contains("an empty item"));
    assert!(err("test=nope").contains("\"nope\" is not one of them; it takes a comma list"));
    let e = err("hyp.pool=18446744073709551615");
    assert!(e.contains("out of range; it takes a size from 16M to 1T"), "{e}");
    assert!(err("hyp.pool=18446744073709551616").contains("too large for 64 bits"));
    assert!(err("hyp.pool=16777216T").contains("too large for 64 bits"));
    assert!(err("hyp.pool=2T").contains("out of range"));
    assert!(err("hyp.pool=8M").contains("out of range"));
    assert!(err("hyp.pool=").contains("no number"));
    assert!(err("hyp.pool=M").contains("no number"));
    assert!(err("hyp.pool=1.5G").contains("not a number"));
    assert!(err("hyp.pool=-1").contains("not a number"));
    assert!(err("split.iters=0").contains("out of range"));
    assert!(err("split.iters=1k").contains("not a number"));
}

#[test]
fn sizes_and_numbers() {
    assert_eq!(parse_size("0"), Ok(0));
    assert_eq!(parse_size("4096"), Ok(4096));
    assert_eq!(parse_size("64K"), Ok(64 << 10));
    assert_eq!(parse_size("16m"), Ok(16 << 20));
    assert_eq!(parse_size("1G"), Ok(1 << 30));
    assert_eq!(parse_size("1T"), Ok(1 << 40));
    assert_eq!(parse_size("16777215T"), Ok(16_777_215 << 40));
    assert_eq!(parse_size("16777216T"), Err(NumberError::Overflow));
    assert_eq!(parse_size("18446744073709551615"), Ok(u64::MAX));
    assert_eq!(parse_size("18446744073709551616"), Err(NumberError::Overflow));
    assert_eq!(parse_size("17179869184G"), Err(NumberError::Overflow));
    assert_eq!(parse_size(""), Err(NumberError::Empty));
    assert_eq!(parse_size("G"), Err(NumberError::Empty));
    assert_eq!(parse_size("1GB"), Err(NumberError::BadDigit));
    assert_eq!(parse_size("0x10"), Ok(16));
    assert_eq!(parse_size("0x10M"), Ok(16 << 20));
    assert_eq!(parse_size("0x"), Err(NumberError::Empty));
    assert_eq!(parse_size("0xz"), Err(NumberError::BadDigit));
    assert_eq!(parse_uint("0xffffffffffffffff"), Ok(u64::MAX));
    assert_eq!(parse_uint("0x10000000000000000"), Err(NumberError::Overflow));
    assert_eq!(parse_uint("0x412fd050"), Ok(0x412f_d050));
    assert_eq!(parse_size("+1"), Err(NumberError::BadDigit));
    assert_eq!(parse_uint("007"), Ok(7));
    for (b, s) in [(16 << 20, "16M"), (1 << 30, "1G"), (1536 << 10, "1536K"), (100, "100"), (0, "0"), (3 << 40, "3T")] {
        assert_eq!(format_size(b), s);
        assert_eq!(parse_size(s), Ok(b));
    }
}

#[test]
fn closest_word() {
    assert_eq!(TABLE.closest("bbml"), Some("bbml2"));
    assert_eq!(TABLE.closest("tset"), Some("test"));
    assert_eq!(TABLE.closest("split.iter"), Some("split.iters"));
    assert_eq!(TABLE.closest("qqqqqqqqq"), None);
    assert_eq!(edit_distance("kitten", "sitting"), 3);
    assert_eq!(edit_distance("", "abc"), 3);
}

mod props {
    use super::*;
    use proptest::prelude::*;

    fn word() -> impl Strategy<Value = String> {
        prop_oneof![
            "[a-z0-9_.=,-]{0,24}",
            (
                prop::sample::select(vec!["bbml2", "test", "hyp.pool", "split.iters", "bbml2_unsafe_override"]),
                "[=,a-zA-Z0-9]{0,20}"
            )
                .prop_map(|(a, b)| format!("{a}{b}")),
            any::<String>(),
        ]
    }

    /// Words of [`TABLE`] with whether each is valid on its own.
    const POOL: &[(&str, bool)] = &[
        ("bbml2=on", true),
        ("bbml2=off", true),
        ("bbml2=maybe", false),
        ("bbml2", false),
        ("bbml2_unsafe_override", true),
        ("bbml2_unsafe_override=1", false),
        ("test=panic", true),
        ("test=panic,undef", true),
        ("test=nope", false),
        ("hyp.pool=32M", true),
        ("hyp.pool=1M", false),
        ("split.iters=5", true),
        ("split.iters=0", false),
        ("perf.events=", true),
        ("perf.events=a,b", true),
        ("perf.event=a", false),
        ("hyp.other", false),
    ];

    /// What the parser must answer, word by word: an unknown name ends it (Unknown), then a
    /// name given before anywhere earlier in the line (Duplicate, naming the first), then a bad
    /// value (BadValue); a line with none of these is accepted.
    #[derive(Debug, PartialEq)]
    enum Verdict {
        Ok,
        Unknown(String),
        Duplicate(String, String),
        BadValue(String),
    }

    fn model(words: &[(&str, bool)]) -> Verdict {
        let mut seen: Vec<(&str, &str)> = Vec::new();
        for &(w, valid) in words {
            let name = w.split_once('=').map_or(w, |(n, _)| n);
            if TABLE.word(name).is_none() {
                return Verdict::Unknown(w.into());
            }
            if let Some((_, first)) = seen.iter().find(|(n, _)| *n == name) {
                return Verdict::Duplicate((*first).into(), w.into());
            }
            if !valid {
                return Verdict::BadValue(w.into());
            }
            seen.push((name, w));
        }
        Verdict::Ok
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]

        /// Lines of up to 8 words from [`POOL`] (repeats likely) against the model: the same
        /// verdict, and a duplicate names the first occurrence wherever it was in the line, not
        /// only as the previous word.
        #[test]
        fn lines_get_the_reference_model_s_verdict(picks in prop::collection::vec(0..POOL.len(), 0..8)) {
            let words: Vec<(&str, bool)> = picks.iter().map(|&i| POOL[i]).collect();
            let line = words.iter().map(|(w, _)| *w).collect::<Vec<_>>().join(" ");
            let got = match parse(&line, &TABLE) {
                Ok(_) => Verdict::Ok,
                Err(Error::Unknown { word, .. }) => Verdict::Unknown(word),
                Err(Error::Duplicate { first, second, .. }) => Verdict::Duplicate(first, second),
                Err(Error::BadValue { word, .. }) => Verdict::BadValue(word),
                Err(e) => panic!("unexpected error {e:?} for {line:?}"),
            };
            prop_assert_eq!(got, model(&words), "{}", line);
        }

        /// Any input: an answer, never a panic; an accepted line re-parses to the same Args, and
        /// each accepted word is one of the table's.
        #[test]
        fn parse_never_panics_and_is_consistent(words in prop::collection::vec(word(), 0..6)) {
            let line = words.join(" ");
            match parse(&line, &TABLE) {
                Ok(a) => {
                    let again: Vec<String> = a.words().map(String::from).collect();
                    prop_assert_eq!(parse(&again.join(" "), &TABLE).unwrap(), a.clone());
                    for w in a.words() {
                        let name = w.split_once('=').map_or(w, |(n, _)| n);
                        prop_assert!(TABLE.word(name).is_some());
                    }
                }
                Err(e) => prop_assert!(!e.to_string().is_empty()),
            }
        }

        /// Sizes: a value that fits round-trips through format_size; one that does not is an
        /// overflow error, never a wrapped number.
        #[test]
        fn sizes_are_exact_or_refused(n in any::<u64>(), unit in prop::sample::select(vec!["", "K", "M", "G", "T"])) {
            let shift = match unit { "" => 0, "K" => 10, "M" => 20, "G" => 30, _ => 40 };
            let r = parse_size(&format!("{n}{unit}"));
            match n.checked_mul(1u64 << shift) {
                Some(v) => { prop_assert_eq!(r, Ok(v)); prop_assert_eq!(parse_size(&format_size(v)), Ok(v)); }
                None => prop_assert_eq!(r, Err(NumberError::Overflow)),
            }
        }
    }
}

#[test]
fn a_boot_loaders_words_end_at_the_marker() {
    let fw = "coherent_pool=1M 8250.nr_uarts=1 vc_mem.mem_base=0x3ec00000 pgtlab test=panic bbml2=off";
    let (theirs, ours) = split_firmware(fw).unwrap();
    assert_eq!(theirs, ["coherent_pool=1M", "8250.nr_uarts=1", "vc_mem.mem_base=0x3ec00000"]);
    assert_eq!(ours, ["test=panic", "bbml2=off"]);
    assert!(parse_words(ours, &TABLE).is_ok());
    // Without the marker every word is ours, and a firmware word is refused with a hint.
    let (theirs, ours) = split_firmware("coherent_pool=1M test=panic").unwrap();
    assert!(theirs.is_empty() && ours.len() == 2);
    let e = parse_words(ours, &TABLE).unwrap_err().to_string();
    assert!(
        e.contains("unknown boot argument \"coherent_pool=1M\"") && e.contains("before the word \"pgtlab\""),
        "{e}"
    );
    assert_eq!(split_firmware("pgtlab"), Ok((vec![], vec![])));
    // A second marker would make the words before it the boot loader's: refused.
    let e = split_firmware("pgtlab test=irq pgtlab").unwrap_err();
    assert_eq!(e, Error::MarkerTwice { between: "test=irq".into() });
    assert!(e.to_string().contains("\"test=irq\", would be ignored"), "{e}");
    assert!(split_firmware("a=1 pgtlab pgtlab").is_err());
}

#[test]
fn text_words_keep_their_value_even_empty_but_need_the_equals_sign() {
    let a = parse("perf.events=INST_RETIRED,0x2d:el1", &TABLE).unwrap();
    assert_eq!(a.text("perf.events"), Some("INST_RETIRED,0x2d:el1"));
    assert_eq!(parse("perf.events=", &TABLE).unwrap().text("perf.events"), Some(""));
    assert!(err("perf.events").contains("no value"), "{}", err("perf.events"));
    assert!(
        err("perf.events=a perf.events=b").contains("twice") || parse("perf.events=a perf.events=b", &TABLE).is_err()
    );
}

/// Boundaries and rules the mutation run (`cargo xtask mutants --host bootargs`) found untested.
#[test]
fn sizes_and_numbers_take_their_bounds_and_nothing_past_them() {
    let a = parse("hyp.pool=16M split.iters=1", &TABLE).unwrap();
    assert_eq!((a.size("hyp.pool"), a.uint("split.iters")), (Some(16 << 20), Some(1)));
    let a = parse("hyp.pool=1T split.iters=1000", &TABLE).unwrap();
    assert_eq!((a.size("hyp.pool"), a.uint("split.iters")), (Some(1 << 40), Some(1000)));
    assert!(err(&format!("hyp.pool={}", (16 << 20) - 1)).contains("out of range"));
    assert!(err(&format!("hyp.pool={}", (1u64 << 40) + 1)).contains("out of range"));
    assert!(err("split.iters=0").contains("out of range"));
    assert!(err("split.iters=1001").contains("out of range"));
}

#[test]
fn flags_and_emptiness_read_back_as_given() {
    let a = parse("bbml2=on", &TABLE).unwrap();
    assert!(!a.flag("bbml2_unsafe_override"), "a flag not given is off");
    assert!(!a.flag("bbml2"), "a choice is not a flag");
    assert!(!a.is_empty());
}

#[test]
fn the_suggestion_is_the_nearest_word_by_distance_or_prefix() {
    // Distance alone (not a prefix either way).
    assert_eq!(TABLE.closest("bbml3"), Some("bbml2"));
    // Prefix alone, from 3 characters on (distance 8 here).
    assert_eq!(TABLE.closest("perf"), Some("perf.events"));
    assert_eq!(TABLE.closest("spl"), Some("split.iters"));
    assert_eq!(TABLE.closest("sp"), None, "2 characters are no prefix to go by");
    // The nearer of two candidates (distance 1 beats the flag's prefix match at 15)...
    assert_eq!(TABLE.closest("bbml2_"), Some("bbml2"));
    // ... and the first of two equally near ones.
    const TWINS: Table = Table {
        owner: "kernel",
        words: &[Word::flag("abcd", "x"), Word::flag("abce", "x"), Word::flag("zzzz", "x")],
        foreign: &[],
    };
    let twins = TWINS;
    assert_eq!(twins.closest("abcf"), Some("abcd"));
    assert_eq!(TABLE.closest("bbml2_unsafe_overrid"), Some("bbml2_unsafe_override"), "a later, nearer word wins");
    // Names past 64 characters get no suggestion; 64 still do.
    let long = |n: usize| format!("bbml2{}", "x".repeat(n - 5));
    assert_eq!(TABLE.closest(&long(64)), Some("bbml2"));
    assert_eq!(TABLE.closest(&long(65)), None);
}

#[test]
fn edit_distance_counts_insertions_deletions_and_substitutions() {
    for (a, b, d) in [
        ("", "", 0),
        ("", "abc", 3),
        ("abc", "", 3),
        ("abc", "abcd", 1),
        ("abcd", "abc", 1),
        ("abc", "abd", 1),
        ("ab", "ba", 2),
        ("kitten", "sitting", 3),
        ("bbml2", "bbml2", 0),
    ] {
        assert_eq!(edit_distance(a, b), d, "{a:?} -> {b:?}");
    }
}
