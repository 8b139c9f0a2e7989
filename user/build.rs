fn main() {
    // EL0 programs: static position-independent executables linked at 0 with their own script
    // (the kernel's loader places them; see lib/uspace/src/elf.rs).
    let script = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("link.ld");
    println!("cargo:rerun-if-changed={}", script.display());
    if std::env::var("CARGO_CFG_TARGET_OS").as_deref() == Ok("none") {
        println!("cargo:rustc-link-arg-bins=-T{}", script.display());
    }
}
