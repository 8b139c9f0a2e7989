//! The `@@report` records (one JSON object per line) that the hypervisor and the kernel print,
//! gathered from a run's output and shown as tables; and backtrace symbolization.

use crate::build::Images;
use abi::report::{parse_line, ParsedRecord};
use std::collections::BTreeMap;

/// Replaces `image+0x…` in a backtrace line with `function+0x…` from the right ELF (lines
/// starting with `hyp:` belong to the hypervisor, others to the kernel).
pub fn symbolize_line(line: &str, images: &Images) -> String {
    let Some(pos) = line.find("image+0x") else { return line.to_string() };
    let hex: String = line[pos + 8..].chars().take_while(|c| c.is_ascii_hexdigit()).collect();
    let Ok(off) = u64::from_str_radix(&hex, 16) else { return line.to_string() };
    let elf = if line.starts_with("hyp") { &images.hypervisor_elf } else { &images.kernel_elf };
    match crate::build::symbolize(elf, off) {
        Some(sym) => format!("{line}  {sym}"),
        None => line.to_string(),
    }
}

/// The first `kernel:` line of `output` that names `word` and says it was refused (e.g.
/// `kernel: bbml2=on refused: no FEAT_BBM …`), trimmed.
pub fn kernel_line_about<'a>(output: &'a str, word: &str) -> Option<&'a str> {
    output.lines().map(str::trim).find(|l| l.starts_with("kernel:") && l.contains(word) && l.contains("refused"))
}

/// Every well-formed record in `output`, and the problems with the malformed ones.
pub fn collect(output: &str) -> (Vec<ParsedRecord>, Vec<String>) {
    let mut records = Vec::new();
    let mut errors = Vec::new();
    for line in output.lines() {
        match parse_line(line) {
            Some(Ok(r)) => records.push(r),
            Some(Err(e)) => errors.push(e.to_string()),
            None => {}
        }
    }
    (records, errors)
}

/// The first record of `kind` in `records`.
pub fn first<'a>(records: &'a [ParsedRecord], kind: &str) -> Option<&'a ParsedRecord> {
    records.iter().find(|r| r.kind == kind)
}

fn cell(r: &ParsedRecord, key: &str) -> String {
    match r.fields.get(key) {
        None => String::new(),
        Some(serde_json::Value::String(s)) => s.clone(),
        Some(v) => v.to_string(),
    }
}

/// A plain-text table: one row per record, one column per field (in first-seen order).
pub fn table(records: &[&ParsedRecord]) -> String {
    let mut cols: Vec<String> = Vec::new();
    for r in records {
        for k in r.fields.keys() {
            if k != "kind" && !cols.contains(k) {
                cols.push(k.clone());
            }
        }
    }
    let rows: Vec<Vec<String>> = records.iter().map(|r| cols.iter().map(|c| cell(r, c)).collect()).collect();
    let widths: Vec<usize> =
        cols.iter().enumerate().map(|(i, c)| rows.iter().map(|r| r[i].len()).max().unwrap_or(0).max(c.len())).collect();
    let line = |cells: &[String]| {
        cells.iter().zip(&widths).map(|(c, w)| format!("{c:>w$}")).collect::<Vec<_>>().join("  ").trim_end().to_string()
    };
    let mut out = line(&cols);
    out.push('\n');
    out.push_str(&widths.iter().map(|w| "-".repeat(*w)).collect::<Vec<_>>().join("  "));
    out.push('\n');
    for r in &rows {
        out.push_str(&line(r));
        out.push('\n');
    }
    out
}

/// Aligned columns: the first `left` columns left-aligned, the others right-aligned, two
/// spaces apart, a header line first.
pub fn aligned(header: &[String], rows: &[Vec<String>], left: usize) -> String {
    let widths: Vec<usize> = (0..header.len())
        .map(|i| rows.iter().map(|r| r[i].len()).chain([header[i].len()]).max().unwrap_or(0))
        .collect();
    let fmt = |cells: &[String]| {
        cells
            .iter()
            .zip(&widths)
            .enumerate()
            .map(|(i, (c, w))| if i < left { format!("{c:<w$}") } else { format!("{c:>w$}") })
            .collect::<Vec<_>>()
            .join("  ")
            .trim_end()
            .to_string()
    };
    let mut out = fmt(header) + "\n";
    for r in rows {
        out += &(fmt(r) + "\n");
    }
    out
}

/// Prints a table per record kind found in `output` (and any malformed record lines).
pub fn print_tables(output: &str) {
    let (records, errors) = collect(output);
    let mut by_kind: BTreeMap<&str, Vec<&ParsedRecord>> = BTreeMap::new();
    for r in &records {
        by_kind.entry(r.kind.as_str()).or_default().push(r);
    }
    for (kind, rs) in by_kind {
        println!("\n== {kind} ==\n{}", table(&rs));
    }
    for e in errors {
        eprintln!("xtask: warning: {e}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tables_have_a_column_per_field() {
        let out = "x\n@@report {\"kind\":\"banner\",\"cpu\":0,\"core\":\"QEMU max\"}\n\
                   @@report {\"kind\":\"banner\",\"cpu\":1,\"bbm\":2}\n@@report {broken\n";
        let (records, errors) = collect(out);
        assert_eq!(records.len(), 2);
        assert_eq!(errors.len(), 1);
        let refs: Vec<&ParsedRecord> = records.iter().collect();
        let t = table(&refs);
        let lines: Vec<&str> = t.lines().collect();
        assert_eq!(lines[0].split_whitespace().collect::<Vec<_>>(), ["cpu", "core", "bbm"]);
        assert!(lines[2].contains("QEMU max"));
        assert!(lines[3].trim_end().ends_with('2'));
    }
}
