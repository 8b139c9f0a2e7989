fn main() {
    // The same position-independent layout as the other bare-metal binaries (lib/rt's linker
    // script): BSS and the boot stacks after the loaded bytes, `__image_end` after them.
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let script = root.join("../lib/rt/link.ld");
    println!("cargo:rerun-if-changed={}", script.display());
    if std::env::var("CARGO_CFG_TARGET_OS").as_deref() == Ok("none") {
        println!("cargo:rustc-link-arg-bins=-T{}", script.display());
    }
}
