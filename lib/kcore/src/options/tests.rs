//! Every word of the table reaches a field of [`Options`] (none is read by a name the table
//! does not have, none is accepted and then ignored), and the rules between words hold.

use super::*;
use alloc::vec;

/// Words that only mean something together with another (given with it here).
fn companions(word: &str) -> &'static str {
    match word {
        "percpu.seed" => " user=percpu:modes=seeded",
        "pools.frame" => " pools.slot=0x1000",
        "pools.slot" => " pools.frame=0x1000",
        _ => "",
    }
}

/// Values to try for `w`: every choice, both ends of a range, a text.
fn samples(w: &Word) -> Vec<String> {
    use bootargs::Value;
    match w.value {
        Value::Flag => vec![String::from(w.name)],
        Value::Choice(c) => c.iter().map(|v| format!("{}={v}", w.name)).collect(),
        Value::List(items) => items.iter().rev().take(2).map(|v| format!("{}={v}", w.name)).collect(),
        Value::Uint { min, max } | Value::Size { min, max } => {
            vec![format!("{}={min}", w.name), format!("{}={max}", w.name)]
        }
        Value::Text if w.name == "user" => vec![String::from("user=hello")],
        Value::Text => vec![format!("{}=INST_RETIRED", w.name)],
    }
}

#[test]
fn every_word_changes_the_options() {
    let default = Options::default();
    for w in WORDS {
        // The options of the word's values (and of its absence), each with its companion:
        // at least two must differ, or the word is accepted and then ignored.
        let mut lines: Vec<String> = samples(w).iter().map(|s| format!("{s}{}", companions(w.name))).collect();
        lines.push(String::from(companions(w.name).trim()));
        let mut seen: Vec<Options> = Vec::new();
        for line in &lines {
            if let Ok((o, _)) = Options::parse(line) {
                // `words` always differs; compare everything else.
                let o = Options { words: vec![], ..o };
                if !seen.contains(&o) {
                    seen.push(o);
                }
            }
        }
        assert!(seen.len() >= 2, "{} is accepted but changes nothing ({lines:?})", w.name);
    }
    assert_eq!(default.sched.tick_hz, 100);
    assert!(default.user.flush_elision && default.user.lazy_relax && default.percpu.tables && default.mm.contpte);
    assert_eq!((default.mm.bbml2, default.mm.rodata), (Bbml2Arg::Auto, Rodata::Full));
}

#[test]
fn words_are_typed_once() {
    let (o, fw) = Options::parse(
        "coherent_pool=1M pgtlab bbml2=on bbml2_unsafe_override bbml2_test_disallow_cpu=2 rodata=on contpte=off \
         test=irq,percpu bench=split split.iters=3 tick_hz=1000 user=hello+stale:rounds=2 asid_bits=4 \
         lazy_relax=off perf.events=INST_RETIRED perf.walker=skip_level3 pools.frame=0x10 pools.slot=0x20 cycle.cpu=3 dirty.largest=2M",
    )
    .unwrap();
    assert_eq!(fw, ["coherent_pool=1M"]);
    assert_eq!(o.mm.bbml2, Bbml2Arg::On);
    assert!(o.mm.bbml2_unsafe_override && !o.mm.contpte);
    assert_eq!((o.mm.disallow_cpu, o.mm.rodata), (Some(2), Rodata::On));
    assert_eq!(o.tests.names, ["irq", "percpu"]);
    assert_eq!((o.tests.pools, o.tests.cycle_cpu, o.tests.dirty_no_1g), (Some((0x10, 0x20)), Some(3), true));
    assert_eq!((o.bench.name, o.bench.split_iters), (Some("split"), Some(3)));
    assert_eq!(o.sched.tick_hz, 1000);
    assert_eq!(
        o.sched.programs,
        [Program { name: "hello", args: String::new() }, Program { name: "stale", args: "rounds=2".into() }]
    );
    assert_eq!((o.user.asid_bits, o.user.lazy_relax, o.user.flush_elision), (4, false, true));
    assert_eq!(o.perf.events.as_deref(), Some("INST_RETIRED"));
    assert_eq!(o.perf.walker, Some(WalkerMode::SkipLevel3));
    assert_eq!(o.words.len(), 18);
}

#[test]
fn rules_between_words() {
    let e = |s: &str| Options::parse(s).unwrap_err().to_string();
    assert!(e("test=panic,irq").contains("test=panic ends the run, so irq would never run; put it last"));
    assert!(Options::parse("test=irq,panic").is_ok());
    assert!(e("percpu.seed=no-guard").contains("acts only on the seeded method"));
    assert!(e("user=percpu:modes=seeded").contains("needs percpu.seed=no-guard"));
    assert_eq!(Options::parse("percpu.seed=no-sync-cpu1").unwrap().0.percpu.seed, PercpuSeed::NoSyncCpu1);
    let last = abi::MAX_CPUS - 1;
    assert_eq!(Options::parse(&format!("bbml2_test_disallow_cpu={last}")).unwrap().0.mm.disallow_cpu, Some(last));
    assert!(Options::parse(&format!("bbml2_test_disallow_cpu={}", abi::MAX_CPUS)).is_err(), "no such CPU");
    assert!(e("user=nosuch").contains("nosuch"));
    assert!(e("user=:x").contains("an empty program name"));
    assert!(e("bbml=off").contains("bbml2"), "a typo is refused with the closest word");
    assert!(e("tick_hz=1 tick_hz=2").contains("tick_hz"));
    assert!(e("hyp.pool=1M").contains("no hypervisor took it off"));
}
