fn main() {
    // The bare-metal binaries share lib/rt's linker script (position-independent image at 0).
    let script = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../lib/rt/link.ld");
    println!("cargo:rerun-if-changed={}", script.display());
    if std::env::var("CARGO_CFG_TARGET_OS").as_deref() == Ok("none") {
        println!("cargo:rustc-link-arg-bins=-T{}", script.display());
    }
}
