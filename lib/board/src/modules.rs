//! `/chosen/module@…`: the guest described by a boot loader the way U-Boot users hand Xen its
//! domain (Xen's `docs/misc/arm/device-tree/booting.txt`): one node per file the boot loader
//! loaded, a child of `/chosen`, with
//!
//! * `compatible`: always `"multiboot,module"`, and usually one specific string:
//!   `"multiboot,kernel"`, `"multiboot,ramdisk"`, `"multiboot,device-tree"`. A module with only
//!   the generic string is the kernel if it is the first such, the ramdisk if the second (Xen's
//!   rule); a third is refused.
//! * `reg`: where the file is in RAM and its length, one (address, size) pair in `/chosen`'s
//!   `#address-cells` / `#size-cells` (both required once there are modules).
//! * `bootargs` (the kernel only): the guest's command line.
//!
//! Strict, like every input: exactly one kernel, at most one ramdisk and one device tree, no
//! empty or overlapping module, no specific string without the generic one, no compatible this
//! hypervisor does not take (an XSM policy, a second domain's kernel), `bootargs` only on the
//! kernel. A tree without module nodes has no [`GuestModules`]: the guest then comes from the
//! initrd (a guest bundle or a lone kernel).

use alloc::string::String;
use alloc::vec::Vec;

use crate::error::{bad_prop, missing_prop, BoardError};
use crate::tree::{decode_pairs, Tree};
use crate::Region;

/// The generic compatible every module carries.
pub const MODULE: &str = "multiboot,module";
/// The guest's kernel.
pub const KERNEL: &str = "multiboot,kernel";
/// The guest's initramfs.
pub const RAMDISK: &str = "multiboot,ramdisk";
/// A device tree for the guest.
pub const DEVICE_TREE: &str = "multiboot,device-tree";

/// One module node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Module {
    /// The node's path.
    pub path: String,
    /// Where the file is.
    pub region: Region,
}

/// The guest the module nodes describe.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GuestModules {
    /// The kernel (an arm64 Image or a raw binary).
    pub kernel: Module,
    /// The kernel node's `bootargs`.
    pub bootargs: Option<String>,
    /// The initramfs.
    pub ramdisk: Option<Module>,
    /// A device tree for the guest (the hypervisor refuses it: the guest's tree is the
    /// board's, changed as docs/ARCHITECTURE.md lists).
    pub device_tree: Option<Module>,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    Kernel,
    Ramdisk,
    DeviceTree,
}

/// The module nodes under `/chosen` (node `c`); `Ok(None)` without any.
pub(crate) fn parse_modules(t: &Tree, c: usize) -> Result<Option<GuestModules>, BoardError> {
    let mut found: Vec<(Kind, Module, Option<String>)> = Vec::new();
    let mut generic = 0;
    for m in t.children(c) {
        let path = &t.path(m);
        let compat = t.prop_strs(m, "compatible")?.unwrap_or_default();
        let specific: Vec<&str> =
            compat.iter().copied().filter(|s| s.starts_with("multiboot,") && *s != MODULE).collect();
        if !compat.contains(&MODULE) {
            if !specific.is_empty() {
                return Err(bad_prop(path, "compatible", "a multiboot module must list \"multiboot,module\" too"));
            }
            continue;
        }
        if compat.iter().any(|s| !s.starts_with("multiboot,")) {
            return Err(bad_prop(
                path,
                "compatible",
                "not a module this hypervisor takes (it takes multiboot,kernel, multiboot,ramdisk, multiboot,device-tree)",
            ));
        }
        let kind =
            match specific.as_slice() {
                [] => {
                    generic += 1;
                    match generic {
                        1 => Kind::Kernel,
                        2 => Kind::Ramdisk,
                        _ => return Err(bad_prop(
                            path,
                            "compatible",
                            "a third module with only \"multiboot,module\": name what it is (multiboot,kernel, ...)",
                        )),
                    }
                }
                [KERNEL] => Kind::Kernel,
                [RAMDISK] => Kind::Ramdisk,
                [DEVICE_TREE] => Kind::DeviceTree,
                [_] => return Err(bad_prop(path, "compatible", "an unknown multiboot module kind")),
                _ => return Err(bad_prop(path, "compatible", "more than one multiboot module kind")),
            };
        let cells = t.cells(c)?;
        let reg = t.prop(m, "reg").ok_or_else(|| missing_prop(path, "reg"))?;
        let pairs = decode_pairs(reg, cells).map_err(|why| bad_prop(path, "reg", why))?;
        let region = match pairs.as_slice() {
            [(base, size)] if *size > 0 && base.checked_add(*size).is_some() => Region::new(*base, *size),
            [_] => return Err(bad_prop(path, "reg", "an empty module, or one past the end of the address space")),
            _ => return Err(bad_prop(path, "reg", "one (address, size) pair: where the boot loader put the file")),
        };
        let bootargs = t.prop_str(m, "bootargs")?.map(String::from);
        if bootargs.is_some() && kind != Kind::Kernel {
            return Err(bad_prop(path, "bootargs", "only the kernel module takes a command line"));
        }
        if found.iter().any(|(_, o, _)| o.region.overlaps(&region)) {
            return Err(bad_prop(path, "reg", "overlaps another module"));
        }
        if found.iter().any(|(k, _, _)| *k == kind) {
            return Err(bad_prop(path, "compatible", "a second module of the same kind (one guest: one of each)"));
        }
        found.push((kind, Module { path: String::from(path), region }, bootargs));
    }
    if found.is_empty() {
        return Ok(None);
    }
    let take = |k: Kind| found.iter().find(|(x, _, _)| *x == k).map(|(_, m, b)| (m.clone(), b.clone()));
    let Some((kernel, bootargs)) = take(Kind::Kernel) else {
        return Err(missing_prop(t.path(c), "module@… with \"multiboot,kernel\": modules without a kernel"));
    };
    Ok(Some(GuestModules {
        kernel,
        bootargs,
        ramdisk: take(Kind::Ramdisk).map(|(m, _)| m),
        device_tree: take(Kind::DeviceTree).map(|(m, _)| m),
    }))
}
