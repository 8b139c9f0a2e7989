fn main() {
    // Both bare-metal binaries share lib/rt's linker script (position-independent image at 0).
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let script = root.join("../lib/rt/link.ld");
    println!("cargo:rerun-if-changed={}", script.display());
    if std::env::var("CARGO_CFG_TARGET_OS").as_deref() == Ok("none") {
        println!("cargo:rustc-link-arg-bins=-T{}", script.display());
    }
    embed_user_programs(root);
}

/// Writes `$OUT_DIR/user_programs.rs`: `PROGRAMS`, every EL0 program of `user/src/bin/` as
/// `(name, ELF bytes)`, from the directory the xtask built them in (`PGTLAB_USER_DIR`). Built
/// without it (a plain `cargo build -p kernel`), the list is empty and the kernel says so when
/// asked to run one.
fn embed_user_programs(root: &std::path::Path) {
    println!("cargo:rerun-if-env-changed=PGTLAB_USER_DIR");
    let bins = root.join("../user/src/bin");
    println!("cargo:rerun-if-changed={}", bins.display());
    let mut names: Vec<String> = std::fs::read_dir(&bins)
        .map(|d| d.flatten().filter_map(|e| e.file_name().to_str()?.strip_suffix(".rs").map(String::from)).collect())
        .unwrap_or_default();
    names.sort();
    let mut out = String::from(
        "/// The EL0 programs built into this kernel: (name, ELF file).\npub const PROGRAMS: &[(&str, &[u8])] = &[\n",
    );
    if let Ok(dir) = std::env::var("PGTLAB_USER_DIR") {
        for n in &names {
            let elf = std::path::Path::new(&dir).join(n);
            println!("cargo:rerun-if-changed={}", elf.display());
            out += &format!("    ({n:?}, include_bytes!({:?})),\n", elf.display().to_string());
        }
    }
    out += "];\n";
    let path = std::path::Path::new(&std::env::var("OUT_DIR").unwrap()).join("user_programs.rs");
    std::fs::write(path, out).unwrap();
}
