//! What a guest gets besides memory: the CPU's SVE and SME at the full vector length with their
//! state intact across traps (the hypervisor never touches FP/SIMD), MTE's registers on an MTE
//! CPU, and any kernel format QEMU boots (a raw binary without the Image header is loaded where
//! QEMU loads one).

use tests::{boot, config};

#[test]
fn sve_and_sme_state_survive_traps_at_the_full_vector_length() {
    // With a slot pool, the traps include dirty-log calls whose stage-2 work runs the
    // hypervisor's vector routines (the SVE fill of new tables, saving whole Z registers).
    let run = boot(config(|c| {
        c.smp = 1;
        c.bootargs = "test=sve-state hyp.slotpool=16M".into();
    }));
    run.expect_exit(0);
    let f = run.record("hyp_features");
    assert_eq!((f.bool("sve"), f.bool("sme")), (Some(true), Some(true)), "{}", run.dump());
    let s = run.record("sve_state");
    // QEMU's max implements 2048-bit SVE and SME; ZCR_EL2/SMCR_EL2 must not cap them.
    assert_eq!(s.u64("vl_bits"), Some(2048), "{}", run.dump());
    assert_eq!(s.u64("svl_bits"), Some(2048), "{}", run.dump());
    assert_eq!(s.u64("dirty_log_rounds"), Some(3), "{}", run.dump());
    run.expect_output("pgtable's vector routines kept Z0-Z31 and P0-P15");
    run.expect_output("survived an HVC in streaming mode, and the dirty-log calls");
}

/// The hypervisor's vector routines on a CPU whose NEON traps in streaming mode (no
/// FEAT_SME_FA64) and whose 384-bit vector length tiles no table (the NEON fill with Z saves
/// runs, not the SVE one): the dirty-log calls a guest makes in streaming mode take the scalar
/// loops (NEON there would fault the hypervisor), and every register survives the others.
#[test]
fn vector_routines_keep_to_general_registers_in_streaming_mode_without_fa64() {
    let run = boot(config(|c| {
        c.smp = 1;
        c.bootargs = "test=sve-state hyp.slotpool=16M".into();
        c.qemu_args = [
            xtask::launch::qemu_arg::parse("-global max-arm-cpu.sme_fa64=off").unwrap(),
            xtask::launch::qemu_arg::parse("-global max-arm-cpu.sve-max-vq=3").unwrap(),
        ]
        .concat();
    }));
    run.expect_exit(0);
    let f = run.record("hyp_features");
    assert_eq!((f.bool("sme"), f.bool("sme_fa64")), (Some(true), Some(false)), "{}", run.dump());
    let s = run.record("sve_state");
    assert_eq!(s.u64("vl_bits"), Some(384), "{}", run.dump());
    assert_eq!(s.u64("dirty_log_rounds"), Some(3), "{}", run.dump());
    run.expect_output("survived an HVC in streaming mode, and the dirty-log calls");
}

#[test]
fn mte_registers_are_the_guests_on_an_mte_cpu() {
    let run = boot(config(|c| {
        c.smp = 1;
        c.mte = true;
        c.bootargs = "test=mte-regs".into();
    }));
    run.expect_exit(0);
    assert_eq!(run.record("hyp_features").bool("mte2"), Some(true));
    run.expect_output("kernel: mte-regs: GCR_EL1 and RGSR_EL1");
}

#[test]
fn a_raw_binary_is_loaded_where_qemu_loads_one() {
    // The kernel Image without its header magic is a raw binary (it relocates itself anyway).
    let image = std::fs::read(&tests::images().kernel).unwrap();
    let mut raw = image.clone();
    raw[0x38..0x3c].copy_from_slice(&[0; 4]);
    let path = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("kernel-raw.bin");
    std::fs::write(&path, &raw).unwrap();
    let run = boot(config(|c| {
        c.smp = 2;
        c.guest = Some(xtask::launch::Guest { kernel: path.clone(), initrd: None, append: String::new() });
    }));
    run.expect_exit(0);
    let hb = run.record("hyp_boot");
    assert_eq!(hb.str("kernel_kind"), Some("raw"), "{}", run.dump());
    let base = hb.u64s("guest_ram").unwrap()[0];
    assert_eq!(hb.u64("kernel"), Some(base + 0x8_0000), "RAM base + 512 KiB, as QEMU\n{}", run.dump());
    run.expect_output("kernel: 2 of 2 CPUs online");
}
