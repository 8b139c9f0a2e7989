//! The workload on a fake kernel: every row measured each round, each setting of a mechanism
//! row measured, the overhead subtracted, the partner checked, failures reported.

use super::*;
use abi::report::ParsedRecord;
use std::cell::Cell;
use std::string::String;
use std::vec::Vec;

/// A kernel whose calls cost known instruction counts.
struct Fake {
    peer: &'static str,
    insns: Cell<u64>,
    cpu_insns: u64,
    partner_running: bool,
    partner_cpu: u64,
    fe: &'static [&'static str],
    lr: &'static [&'static str],
    set: Vec<(Mechanism, usize)>,
    fail_mprotect: bool,
    out: String,
    lines: Vec<String>,
}

/// `run` keeps its samples and the partner in statics (one measuring task per program): the
/// tests take turns.
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner())
}

/// What each instruction read costs itself (the overhead the workload subtracts).
const READ_COST: u64 = 3;

impl Fake {
    fn new(peer: &'static str, fe: &'static [&'static str], lr: &'static [&'static str]) -> Fake {
        Fake {
            peer,
            insns: Cell::new(0),
            cpu_insns: 0,
            partner_running: false,
            partner_cpu: 0,
            fe,
            lr,
            set: Vec::new(),
            fail_mprotect: false,
            out: String::new(),
            lines: Vec::new(),
        }
    }
    fn spend(&self, n: u64) {
        self.insns.set(self.insns.get() + n);
    }
    fn records(&self) -> Vec<ParsedRecord> {
        abi::report::parse_all(&self.out).into_iter().map(|r| r.unwrap()).collect()
    }
}

impl Os for Fake {
    fn peer(&self) -> &'static str {
        self.peer
    }
    fn ncpus(&self) -> u64 {
        4
    }
    fn getcpu(&mut self) -> u64 {
        self.spend(100);
        0
    }
    fn mmap(&mut self, bytes: u64) -> Result<u64, i64> {
        self.spend(1000);
        // Host memory the workload may touch: leaked, page aligned.
        let v = std::vec![0u8; (bytes + PAGE) as usize].leak();
        Ok((v.as_ptr() as u64 + PAGE - 1) & !(PAGE - 1))
    }
    fn munmap(&mut self, _addr: u64, _bytes: u64) -> Result<(), i64> {
        self.spend(500);
        Ok(())
    }
    fn mprotect(&mut self, _addr: u64, bytes: u64, _prot: u64) -> Result<(), i64> {
        self.spend(200 + bytes / PAGE);
        if self.fail_mprotect {
            return Err(22);
        }
        Ok(())
    }
    fn yield_now(&mut self) {
        self.cpu_insns += 300;
        if self.partner_running {
            // The partner runs once per yield of ours.
            PARTNER.cpu.store(self.partner_cpu, Ordering::Relaxed);
            PARTNER.started.store(true, Ordering::Relaxed);
            if PARTNER.stop.load(Ordering::Relaxed) {
                self.partner_running = false;
            } else {
                PARTNER.yields.fetch_add(1, Ordering::Relaxed);
                self.cpu_insns += 200;
            }
        }
    }
    fn pin(&mut self) -> Result<(), i64> {
        Ok(())
    }
    fn start_partner(&mut self) -> Result<(), i64> {
        self.partner_running = true;
        Ok(())
    }
    fn join_partner(&mut self) -> Result<(), i64> {
        assert!(!self.partner_running, "told to stop and run once more before the join");
        Ok(())
    }
    fn instructions(&self) -> u64 {
        self.spend(READ_COST);
        self.insns.get()
    }
    fn instructions_mask(&self) -> u64 {
        u64::MAX
    }
    fn cpu_instructions(&mut self) -> u64 {
        self.cpu_insns
    }
    fn variants(&self, m: Mechanism) -> &'static [&'static str] {
        match m {
            Mechanism::FlushElision => self.fe,
            Mechanism::LazyRelax => self.lr,
        }
    }
    fn default_variant(&self, m: Mechanism) -> usize {
        self.variants(m).len() - 1
    }
    fn set_variant(&mut self, m: Mechanism, v: usize) -> Result<(), i64> {
        assert!(v < self.variants(m).len());
        self.set.push((m, v));
        Ok(())
    }
    fn counts(&mut self) -> Counts {
        Counts::default()
    }
    fn say(&mut self, line: core::fmt::Arguments<'_>) {
        self.lines.push(std::format!("{line}"));
    }
    fn report(&mut self, r: &Record) {
        self.out += &std::format!("{r}\n");
    }
}

const PGTLAB_FE: &[&str] = &["baseline (flush everything)", "flush elision"];
const PGTLAB_LR: &[&str] = &["flushed", "lazy_relax"];
const ONE: &[&str] = &["linux"];

fn field<'a>(r: &'a ParsedRecord, k: &str) -> &'a serde_json::Value {
    r.fields.get(k).unwrap_or_else(|| panic!("no {k} in {r:?}"))
}

#[test]
fn every_row_and_setting_is_measured_each_round_with_the_overhead_subtracted() {
    let _serial = serial();
    let mut os = Fake::new("pgtlab", PGTLAB_FE, PGTLAB_LR);
    assert_eq!(run(&mut os, "rounds=5"), 0, "{:?}", os.lines);
    let recs = os.records();
    // 4 fixed rows + 3 mmap rows + 12 mprotect rows of 2 settings each.
    assert_eq!(recs.len(), 4 + 3 + 24);
    for r in &recs {
        assert_eq!(field(r, "n").as_u64(), Some(5), "{r:?}");
        assert_eq!(field(r, "bench").as_str(), Some(BENCH));
        assert_eq!(field(r, "peer").as_str(), Some("pgtlab"));
        let case = field(r, "case").as_str().unwrap();
        let row = field(r, "row").as_str().unwrap();
        let variant = field(r, "variant").as_str().unwrap();
        assert_eq!(case, std::format!("{row}, {variant}"));
    }
    let get = |case: &str| recs.iter().find(|r| field(r, "case").as_str() == Some(case)).unwrap();
    // The null call costs 100 in the fake; each instruction read costs 3 (the overhead, 3).
    let null = get("getcpu (null system call), pgtlab");
    assert_eq!(field(null, "median_insns").as_u64(), Some(100));
    assert_eq!(field(null, "overhead_insns").as_u64(), Some(READ_COST));
    assert_eq!(field(null, "raw_median_insns").as_u64(), Some(100 + READ_COST));
    // mprotect of 512 pages: 200 + 512.
    let m = get("NONE->RW 512 pages, flush elision");
    assert_eq!(field(m, "median_insns").as_u64(), Some(712));
    assert_eq!(field(m, "insns_per_page").as_u64(), Some(1));
    assert_eq!(field(m, "default").as_bool(), Some(true));
    assert_eq!(field(get("NONE->RW 512 pages, baseline (flush everything)"), "default").as_bool(), Some(false));
    // The yield round trip: a yield of ours and one of the partner's, the CPU's count.
    let y = get("sched_yield round trip (2 tasks, 1 CPU), pgtlab");
    assert_eq!(field(y, "median_insns").as_u64(), Some(500));
    assert_eq!(field(y, "insns_of").as_str(), Some("cpu"));
    // mmap + touch + munmap: 1000 + 500.
    assert_eq!(field(get("mmap + touch + munmap 16 pages, pgtlab"), "median_insns").as_u64(), Some(1500));
    // Settings alternate which goes first, and the defaults are back at the end.
    assert_eq!(os.set.last(), Some(&(Mechanism::LazyRelax, 1)));
    assert!(os.set.contains(&(Mechanism::FlushElision, 0)) && os.set.contains(&(Mechanism::FlushElision, 1)));
}

#[test]
fn a_side_without_switches_measures_the_same_rows_once() {
    let _serial = serial();
    let mut p = Fake::new("pgtlab", PGTLAB_FE, PGTLAB_LR);
    let mut l = Fake::new("linux", ONE, ONE);
    assert_eq!(run(&mut p, "rounds=2"), 0);
    assert_eq!(run(&mut l, "rounds=2"), 0);
    let rows = |f: &Fake, defaults_only: bool| -> Vec<String> {
        f.records()
            .iter()
            .filter(|r| !defaults_only || field(r, "default").as_bool() == Some(true))
            .map(|r| field(r, "row").as_str().unwrap().to_string())
            .collect()
    };
    assert_eq!(rows(&l, false).len(), 4 + 3 + 12);
    assert_eq!(rows(&l, false), rows(&p, true), "each row once per side, same names, same order");
    let mut names = rows(&l, false);
    names.sort();
    names.dedup();
    assert_eq!(names.len(), 19, "row names are unique");
}

#[test]
fn a_partner_on_another_cpu_or_a_failed_call_fails_the_run() {
    let _serial = serial();
    let mut os = Fake::new("linux", ONE, ONE);
    os.partner_cpu = 3;
    assert_eq!(run(&mut os, "rounds=2"), 1);
    assert!(os.lines.iter().any(|l| l.contains("no valid measurement")), "{:?}", os.lines);
    let y = os.records().into_iter().find(|r| field(r, "row").as_str().unwrap().starts_with("sched_yield")).unwrap();
    assert_eq!((field(&y, "n").as_u64(), field(&y, "invalid").as_u64()), (Some(0), Some(2)));
    let mut os = Fake::new("linux", ONE, ONE);
    os.fail_mprotect = true;
    assert_eq!(run(&mut os, "rounds=1"), 1);
    assert!(os.lines.iter().any(|l| l.contains("system calls failed")), "{:?}", os.lines);
}

#[test]
fn arguments() {
    assert_eq!(rounds("rounds=7").ok(), Some(7));
    assert_eq!(rounds("").ok(), Some(DEFAULT_ROUNDS));
    assert_eq!(rounds(&format!("rounds={MAX_ROUNDS}")).ok(), Some(MAX_ROUNDS), "the samples hold every round allowed");
    for (bad, says) in [
        ("rounds=x", "\"x\" is not a number from 1 to"),
        ("rounds=0", "is not a number from 1 to"),
        ("rounds=201", "is not a number from 1 to"),
        ("x=1,rounds=9", "no argument \"x\""),
        ("rounds=1,rounds=2", "given twice"),
        ("rounds=5,", "is not key=value"),
    ] {
        let e = rounds(bad).expect_err(bad).to_string();
        assert!(e.contains(says), "{bad}: {e}");
    }
    let mut os = Fake::new("linux", ONE, ONE);
    assert_eq!(run(&mut os, "rounds=oops"), 2);
    assert!(os.lines.iter().any(|l| l.contains("rounds=oops")), "{:?}", os.lines);
}
