//! What a guest gets besides memory: the CPU's SVE and SME at the full vector length with their
//! state intact across traps (the hypervisor never touches FP/SIMD), MTE's registers on an MTE
//! CPU, and any kernel format QEMU boots (a raw binary without the Image header is loaded where
//! QEMU loads one).

use tests::{boot, config};

#[test]
fn sve_and_sme_state_survive_traps_at_the_full_vector_length() {
    let run = boot(config(|c| {
        c.smp = 1;
        c.bootargs = "test=sve-state".into();
    }));
    run.expect_exit(0);
    let f = run.record("hyp_features");
    assert_eq!((f.bool("sve"), f.bool("sme")), (Some(true), Some(true)), "{}", run.dump());
    let s = run.record("sve_state");
    // QEMU's max implements 2048-bit SVE and SME; ZCR_EL2/SMCR_EL2 must not cap them.
    assert_eq!(s.u64("vl_bits"), Some(2048), "{}", run.dump());
    assert_eq!(s.u64("svl_bits"), Some(2048), "{}", run.dump());
    run.expect_output("survived an HVC in streaming mode");
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
