//! A run against an earlier one: a verdict per row from the two runs' spreads, and the checks
//! that refuse a comparison which cannot mean anything.

use super::rows::{s, Row};
use serde_json::Value;

/// The verdict on one row's change.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    Better,
    Worse,
    WithinNoise,
}

impl Verdict {
    pub fn name(self) -> &'static str {
        match self {
            Verdict::Better => "better",
            Verdict::Worse => "worse",
            Verdict::WithinNoise => "within noise",
        }
    }
}

/// Lower is better. The noise band is half the larger relative p10-p90 spread of the two runs
/// (0 for exact counts: any change of an instruction count is real).
pub fn verdict(old: &Row, new: &Row) -> (f64, Verdict) {
    let change = if old.median == 0.0 { 0.0 } else { new.median / old.median - 1.0 };
    let noise = old.spread.max(new.spread) / 2.0;
    let v = if change < -noise && new.median < old.median {
        Verdict::Better
    } else if change > noise && new.median > old.median {
        Verdict::Worse
    } else {
        Verdict::WithinNoise
    };
    (change, v)
}

/// The comparison table of `new` against `old` (rows matched by machine, workload, setting).
pub fn compare(old: &[Row], new: &[Row]) -> String {
    let name = |r: &Row| format!("{}: {} / {}", r.machine, r.group, r.setting);
    let same = |a: &Row, b: &Row| a.machine == b.machine && a.group == b.group && a.setting == b.setting;
    let w = old.iter().chain(new).map(|r| name(r).len()).max().unwrap_or(10).max(27);
    let mut out = format!(
        "{:<w$} {:>14} {:>14} {:>9} {:>8}  verdict\n",
        "machine: workload / setting", "before", "now", "change", "noise"
    );
    for n in new {
        match old.iter().find(|o| same(o, n)) {
            Some(o) => {
                let (d, v) = verdict(o, n);
                out += &format!(
                    "{:<w$} {:>14.0} {:>14.0} {:>+8.1}% {:>7.1}%  {}\n",
                    name(n),
                    o.median,
                    n.median,
                    d * 100.0,
                    o.spread.max(n.spread) * 50.0,
                    v.name()
                );
            }
            None => out += &format!("{:<w$} {:>14} {:>14.0} {:>9} {:>8}  new row\n", name(n), "-", n.median, "", ""),
        }
    }
    for o in old.iter().filter(|o| !new.iter().any(|n| same(o, n))) {
        out += &format!("{:<w$} {:>14.0} {:>14}  (row gone)\n", name(o), o.median, "-");
    }
    out
}

/// Checks an earlier run's saved `.jsonl` before `--compare` uses it: every line a record of
/// benchmark `which` (its `bench` field), taken on the same accelerator (`accel`) and in the same mode as this run (`icount`: an
/// instruction count against a wall time would read as a thousand-fold change), and at least
/// one row to compare with. `Err` says what is wrong.
pub fn check_earlier(which: &str, icount: bool, accel: &str, text: &str) -> std::result::Result<(), String> {
    let mode_name = |i: bool| if i { "--icount (instructions)" } else { "wall-time" };
    let mut rows = 0;
    for (i, line) in text.lines().enumerate().filter(|(_, l)| !l.trim().is_empty()) {
        let v: Value = serde_json::from_str(line).map_err(|e| format!("line {} is not JSON: {e}", i + 1))?;
        let o = v.as_object().ok_or_else(|| format!("line {} is not a JSON object", i + 1))?;
        match s(o, "bench") {
            Some(b) if b == which => {}
            Some(b) => return Err(format!("line {} is a row of benchmark {b:?}, not {which:?}", i + 1)),
            None => return Err(format!("line {} is not a benchmark row (no \"bench\" field)", i + 1)),
        }
        match o.get("icount").and_then(Value::as_bool) {
            Some(was) if was != icount => {
                return Err(format!(
                    "a {} run cannot be compared with this {} run: run both the same way",
                    mode_name(was),
                    mode_name(icount)
                ))
            }
            None if which != "pgtable" => {
                return Err(format!("line {} does not say how it was measured (no \"icount\" field)", i + 1))
            }
            _ => {}
        }
        // A row without the field was taken on TCG (as every row before KVM runs).
        let was = s(o, "accel").unwrap_or("tcg");
        if was != accel {
            return Err(format!(
                "a run on --accel {was} cannot be compared with this run on --accel {accel}: a real core against \
                 an emulator reads as a change of the code (run both on the same accelerator)"
            ));
        }
        rows += 1;
    }
    if rows == 0 {
        return Err(format!("no rows of benchmark {which:?}: nothing to compare with"));
    }
    // Rows that name the benchmark but carry no figure (no median) compare nothing either.
    let mode = if icount { super::Mode::Icount } else { super::Mode::Wall };
    match super::rows::rows(which, text, mode) {
        Ok(r) if !r.is_empty() => Ok(()),
        Ok(_) => Err(format!(
            "its {rows} rows of benchmark {which:?} carry no figure ({}): nothing to compare with",
            if icount { "median_insns or insns" } else { "median_ns or median_us" }
        )),
        Err(e) => Err(format!("{e:#}")),
    }
}

/// The host a saved run measured (its rows' `host` and `core` fields, from a run off TCG).
pub fn host_of(text: &str) -> Option<String> {
    let v: Value = serde_json::from_str(text.lines().find(|l| !l.trim().is_empty())?).ok()?;
    let o = v.as_object()?;
    let host = s(o, "host")?;
    Some(match (s(o, "core"), s(o, "midr")) {
        (Some(c), Some(m)) => format!("{c} (MIDR {m}) on {host}"),
        _ => host.to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runs_on_two_accelerators_do_not_compare_and_two_hosts_do() {
        let row = |extra: &str| {
            format!("{{\"bench\":\"exits\",\"icount\":false,\"machine\":\"host\",\"case\":\"null\",\"median_ns\":100{extra}}}\n")
        };
        let tcg = row("");
        let kvm =
            row(",\"accel\":\"kvm\",\"host\":\"Linux 6.12 with KVM\",\"core\":\"Cortex-A76\",\"midr\":\"0x414fd0b1\"");
        let e = check_earlier("exits", false, "kvm", &tcg).unwrap_err();
        assert!(e.contains("--accel tcg") && e.contains("--accel kvm"), "{e}");
        assert!(check_earlier("exits", false, "tcg", &kvm).unwrap_err().contains("--accel kvm"));
        assert_eq!(check_earlier("exits", false, "kvm", &kvm), Ok(()));
        assert_eq!(host_of(&kvm).as_deref(), Some("Cortex-A76 (MIDR 0x414fd0b1) on Linux 6.12 with KVM"));
        assert_eq!(host_of(&tcg), None);
    }

    #[test]
    fn rows_without_a_figure_compare_nothing() {
        let empty =
            "{\"bench\":\"exits\",\"icount\":false}\n{\"bench\":\"exits\",\"icount\":false,\"machine\":\"max\"}\n";
        let e = check_earlier("exits", false, "tcg", empty).unwrap_err();
        assert!(e.contains("carry no figure"), "{e}");
        let one = "{\"bench\":\"exits\",\"icount\":false,\"machine\":\"max\",\"case\":\"null\",\"median_ns\":100}\n";
        assert_eq!(check_earlier("exits", false, "tcg", one), Ok(()));
    }

    fn r(median: f64, spread: f64) -> Row {
        Row { machine: "max".into(), group: "g".into(), setting: "s".into(), median, lo: None, hi: None, spread }
    }

    #[test]
    fn verdicts_follow_the_spreads() {
        assert_eq!(verdict(&r(100.0, 0.2), &r(85.0, 0.1)).1, Verdict::Better);
        assert_eq!(verdict(&r(100.0, 0.2), &r(95.0, 0.1)).1, Verdict::WithinNoise);
        assert_eq!(verdict(&r(100.0, 0.2), &r(111.0, 0.0)).1, Verdict::Worse);
        assert_eq!(verdict(&r(100.0, 0.0), &r(101.0, 0.0)).1, Verdict::Worse, "exact counts: any change is real");
        assert_eq!(verdict(&r(100.0, 0.0), &r(100.0, 0.0)).1, Verdict::WithinNoise);
        let t = compare(&[r(100.0, 0.2)], &[r(85.0, 0.1), Row { group: "h".into(), ..r(1.0, 0.0) }]);
        assert!(t.contains("better") && t.contains("new row"), "{t}");
    }

    #[test]
    fn a_comparison_that_cannot_mean_anything_is_refused() {
        let wall =
            "{\"bench\":\"mprotect\",\"machine\":\"max-1cpu\",\"case\":\"a\",\"median_ns\":10,\"median_insns\":5,\"icount\":false}\n";
        let icount = wall.replace("false", "true");
        assert_eq!(check_earlier("mprotect", false, "tcg", wall), Ok(()));
        assert_eq!(check_earlier("mprotect", true, "tcg", &icount), Ok(()));
        let e = check_earlier("mprotect", false, "tcg", &icount).unwrap_err();
        assert!(e.contains("--icount") && e.contains("wall-time"), "{e}");
        assert!(check_earlier("mprotect", true, "tcg", wall).is_err());
        assert!(check_earlier("mprotect", false, "tcg", "").unwrap_err().contains("no rows"));
        assert!(check_earlier("mprotect", false, "tcg", "\n\n").unwrap_err().contains("no rows"));
        assert!(check_earlier("split", false, "tcg", wall).unwrap_err().contains("\"mprotect\", not \"split\""));
        assert!(check_earlier("mprotect", false, "tcg", "{\"kind\":\"banner\"}\n")
            .unwrap_err()
            .contains("not a benchmark row"));
        assert!(check_earlier("mprotect", false, "tcg", "not json\n").unwrap_err().contains("line 1 is not JSON"));
        let pgtable = "{\"bench\":\"pgtable\",\"phase\":\"map\",\"median_ns\":1}\n";
        assert_eq!(check_earlier("pgtable", false, "tcg", pgtable), Ok(()), "the host benchmark has one mode");
    }
}
