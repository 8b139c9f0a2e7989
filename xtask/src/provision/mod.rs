//! What this machine has and what the xtask fetches for it, once, without touching the system
//! beyond Debian's own packages: a toolchain that builds `aarch64-unknown-none`
//! ([`toolchain`]), Debian packages installed with apt when root ([`system`]), files from
//! Debian's arm64 packages with the machine's own apt sources ([`debian`]), a QEMU new
//! enough for the board models ([`qemu_pkg`]), and the firmware that boots boards and UEFI
//! machines: EDK2, U-Boot, TF-A ([`firmware`]); what this host's KVM offers ([`kvm`]) and the
//! KVM host model's files ([`kvm_model`]: Debian's arm64 Linux and QEMU, to run the KVM path
//! on a host that is not arm64); an aarch64 C compiler ([`cross_gcc`]) and KVM's dirty-log selftest
//! built with it from Debian's kernel source ([`kvm_selftest`]) for `bench split`'s Linux peers.

pub mod cloud_kernel;
pub mod cross_gcc;
pub mod debian;
pub mod firmware;
pub mod kvm;
pub mod kvm_model;
pub mod kvm_selftest;
pub mod qemu_pkg;
pub mod system;
pub mod toolchain;
