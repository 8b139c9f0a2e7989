//! `pgtlab-dirty`: a Linux user program that writes known pages at a known rate while the
//! hypervisor runs dirty logging and pre-copy migration underneath the guest (`hyp.migrate`,
//! hypervisor/src/migrate.rs).
//!
//! It locks `pages=N` anonymous pages in memory, finds their guest-physical addresses in
//! `/proc/self/pagemap`, maps the hypervisor's control page through `/dev/mem` (its address is
//! the `pgtlab_ctl` environment variable the kernel command line sets), registers the pages
//! there, then writes them round-robin at `rate=R` pages per second: each write stores the next
//! value of a counter in the page's first word, which is how the hypervisor tells a written page
//! from a clean one. Between writes it counts units of CPU work: the work rate before the run
//! (baseline, `baseline_ms`) against the rate during it is the guest's slowdown. It starts the
//! run (`scenario=1|2`, `threshold=PAGES`, `rounds=N`), keeps writing until the hypervisor says
//! the run is over, and prints a `linux_dirty` report record. Exit status 0 when the hypervisor
//! found the mirror equal to the guest's memory and no written page missing from a bitmap.
// An aarch64 Linux program: on the host (`cargo clippy --workspace`, `cargo test --workspace`)
// it is only the stub `main` at the end; everything else is the module `dirty`, behind one gate.
#![cfg_attr(target_os = "none", no_std, no_main)]

/// The program.
#[cfg(target_os = "none")]
mod dirty;

/// The host build: says where this binary runs and exits with `USAGE`.
#[cfg(not(target_os = "none"))]
fn main() {
    eprintln!("pgtlab-dirty runs on aarch64-unknown-none: the Linux guest runs it (`cargo xtask run --guest linux`)");
    std::process::exit(abi::exit::USAGE as i32);
}
