//! CRC-32 with the CPU's CRC32 instructions (FEAT_CRC32: `CRC32B`/`CRC32X` divide by the
//! reflected IEEE polynomial, the one `abi::crc32` tables), where ID_AA64ISAR0_EL1.CRC32 says the
//! CPU has them: 8 bytes per instruction instead of a table look-up per byte. A loader checks a
//! whole kernel Image's CRC on every boot (`abi::image`'s stamp), which the table makes the
//! largest part of the hypervisor's boot.

#[cfg(target_arch = "aarch64")]
use abi::crc32::Engine;

/// ID_AA64ISAR0_EL1.CRC32, bits [19:16]: 1 = CRC32B/H/W/X and CRC32CB/... implemented.
pub const fn has_crc32(isar0: u64) -> bool {
    (isar0 >> 16) & 0xf != 0
}

/// The fastest engine this CPU has: its CRC32 instructions, else the table.
#[cfg(target_arch = "aarch64")]
pub fn engine() -> Engine {
    if has_crc32(crate::read_sysreg!("id_aa64isar0_el1")) {
        with_instructions
    } else {
        abi::crc32::table
    }
}

/// The engine [`engine`] returns where ID_AA64ISAR0_EL1 names the instructions.
#[cfg(target_arch = "aarch64")]
fn with_instructions(state: u32, bytes: &[u8]) -> u32 {
    // SAFETY: only `engine` hands this function out, after ID_AA64ISAR0_EL1 said the CPU
    // implements the CRC32 instructions.
    unsafe { crc32_insns(state, bytes) }
}

/// # Safety
/// The CPU must implement FEAT_CRC32.
#[cfg(target_arch = "aarch64")]
#[target_feature(enable = "crc")]
unsafe fn crc32_insns(mut c: u32, bytes: &[u8]) -> u32 {
    // SAFETY: reinterpreting bytes as u64 words is valid for any bit pattern.
    let (head, words, tail) = unsafe { bytes.align_to::<u64>() };
    for &b in head {
        // SAFETY: FEAT_CRC32 (the caller's contract); register-only.
        unsafe {
            core::arch::asm!("crc32b {c:w}, {c:w}, {b:w}", c = inout(reg) c, b = in(reg) u32::from(b), options(pure, nomem, nostack))
        };
    }
    let blocks = words.len() / 8;
    if blocks > 0 {
        // SAFETY: FEAT_CRC32; the loop reads exactly the first `64 * blocks` bytes of `words`,
        // which are 8-byte aligned (`align_to`).
        unsafe {
            core::arch::asm!(
                "2:",
                "ldp {a}, {b}, [{p}], #16",
                "ldp {d}, {e}, [{p}], #16",
                "crc32x {c:w}, {c:w}, {a}",
                "crc32x {c:w}, {c:w}, {b}",
                "ldp {a}, {b}, [{p}], #16",
                "crc32x {c:w}, {c:w}, {d}",
                "crc32x {c:w}, {c:w}, {e}",
                "ldp {d}, {e}, [{p}], #16",
                "crc32x {c:w}, {c:w}, {a}",
                "crc32x {c:w}, {c:w}, {b}",
                "crc32x {c:w}, {c:w}, {d}",
                "crc32x {c:w}, {c:w}, {e}",
                "subs {n}, {n}, #1",
                "b.ne 2b",
                c = inout(reg) c,
                p = inout(reg) words.as_ptr() => _,
                n = inout(reg) blocks => _,
                a = out(reg) _, b = out(reg) _, d = out(reg) _, e = out(reg) _,
                options(readonly, nostack),
            )
        }
    }
    for &w in &words[blocks * 8..] {
        // SAFETY: FEAT_CRC32; register-only.
        unsafe {
            core::arch::asm!("crc32x {c:w}, {c:w}, {w}", c = inout(reg) c, w = in(reg) w, options(pure, nomem, nostack))
        };
    }
    for &b in tail {
        // SAFETY: as for the head.
        unsafe {
            core::arch::asm!("crc32b {c:w}, {c:w}, {b:w}", c = inout(reg) c, b = in(reg) u32::from(b), options(pure, nomem, nostack))
        };
    }
    c
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_isar0_field_decides() {
        // QEMU's cortex-a53 / a72 value (CRC32 = 1 among AES, SHA1, SHA2), and none.
        assert!(has_crc32(0x0000_0000_0001_1120));
        assert!(!has_crc32(0x0000_0000_0000_1120));
        assert!(!has_crc32(0xffff_ffff_fff0_ffff));
    }
}
