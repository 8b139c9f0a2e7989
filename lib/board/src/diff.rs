//! Two device trees compared node by node: which nodes one has and the other not, which
//! properties differ, in what order children come, and the header fields a guest reads (boot
//! CPU, memory reservations). The guest-DTB test holds the hypervisor's guest tree to QEMU's own
//! with it (`tests/tests/guest_view.rs`), and its list is what docs/ARCHITECTURE.md shows.

use alloc::format;
use alloc::string::{String, ToString};
use alloc::vec::Vec;
use core::fmt;

use crate::error::BoardError;
use crate::tree::Tree;
use crate::validate;

/// One difference; "left" and "right" are the two trees in the order given to [`compare`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Difference {
    /// A node (with its subtree) only one tree has.
    Node {
        /// Its path.
        path: String,
        /// `true`: only the left tree has it.
        only_left: bool,
    },
    /// A property absent on one side or with another value.
    Property {
        /// The node's path.
        path: String,
        /// The property.
        name: String,
        /// The left tree's value.
        left: Option<Vec<u8>>,
        /// The right tree's value.
        right: Option<Vec<u8>>,
    },
    /// The same children in another order.
    Order {
        /// The parent's path.
        path: String,
    },
    /// A header field (`boot_cpuid_phys`) or the memory reservation block.
    Header {
        /// Which.
        what: &'static str,
        /// The left tree's.
        left: String,
        /// The right tree's.
        right: String,
    },
}

impl Difference {
    /// The node path the difference is at ("" for the header).
    pub fn path(&self) -> &str {
        match self {
            Self::Node { path, .. } | Self::Property { path, .. } | Self::Order { path } => path,
            Self::Header { .. } => "",
        }
    }

    /// The property's name, for a property difference.
    pub fn property(&self) -> Option<&str> {
        match self {
            Self::Property { name, .. } => Some(name),
            _ => None,
        }
    }
}

/// A property value the way `dtc` shows it: strings, cells, or bytes.
pub fn show_value(v: &[u8]) -> String {
    let strings = !v.is_empty()
        && v.last() == Some(&0)
        && v.split(|&b| b == 0)
            .take(v.split(|&b| b == 0).count() - 1)
            .all(|s| !s.is_empty() && s.iter().all(|&b| (0x20..0x7f).contains(&b)));
    if strings {
        let parts: Vec<String> = v[..v.len() - 1]
            .split(|&b| b == 0)
            .map(|s| format!("\"{}\"", core::str::from_utf8(s).unwrap_or("?")))
            .collect();
        return parts.join(", ");
    }
    if v.is_empty() {
        return String::from("(empty)");
    }
    if v.len().is_multiple_of(4) {
        let cells: Vec<String> =
            v.chunks(4).map(|c| format!("{:#x}", u32::from_be_bytes([c[0], c[1], c[2], c[3]]))).collect();
        return format!("<{}>", cells.join(" "));
    }
    let bytes: Vec<String> = v.iter().map(|b| format!("{b:02x}")).collect();
    format!("[{}]", bytes.join(" "))
}

impl fmt::Display for Difference {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let opt = |v: &Option<Vec<u8>>| v.as_deref().map_or(String::from("(absent)"), show_value);
        match self {
            Self::Node { path, only_left: true } => write!(f, "{path}: only in the left tree"),
            Self::Node { path, only_left: false } => write!(f, "{path}: only in the right tree"),
            Self::Property { path, name, left, right } => {
                write!(f, "{path}: {name} = {} | {}", opt(left), opt(right))
            }
            Self::Order { path } => write!(f, "{path}: the same children in another order"),
            Self::Header { what, left, right } => write!(f, "header {what}: {left} | {right}"),
        }
    }
}

fn tree_of(blob: &[u8]) -> Result<(validate::Parsed<'_>, Vec<(u64, u64)>), BoardError> {
    let p = validate::parse(blob)?;
    let rsv = validate::mem_reserve(p.bytes, &p.header)?;
    Ok((p, rsv))
}

/// Compares `left` and `right` (whole DTBs) node by node. Every difference, in the left tree's
/// order (nodes only the right tree has after their siblings).
pub fn compare(left: &[u8], right: &[u8]) -> Result<Vec<Difference>, BoardError> {
    let (validate::Parsed { header: lh, tree: lt, .. }, lrsv) = tree_of(left)?;
    let (validate::Parsed { header: rh, tree: rt, .. }, rrsv) = tree_of(right)?;
    let mut out = Vec::new();
    if lh.boot_cpuid_phys != rh.boot_cpuid_phys {
        out.push(Difference::Header {
            what: "boot_cpuid_phys",
            left: lh.boot_cpuid_phys.to_string(),
            right: rh.boot_cpuid_phys.to_string(),
        });
    }
    if lrsv != rrsv {
        let show = |v: &Vec<(u64, u64)>| v.iter().map(|(a, s)| format!("{a:#x}+{s:#x}")).collect::<Vec<_>>().join(", ");
        out.push(Difference::Header { what: "memory reservations", left: show(&lrsv), right: show(&rrsv) });
    }
    node(&lt, 0, &rt, 0, &mut out);
    Ok(out)
}

fn node(lt: &Tree, li: usize, rt: &Tree, ri: usize, out: &mut Vec<Difference>) {
    let path = lt.path(li);
    let lprops = lt.props(li);
    let rprops = rt.props(ri);
    for p in lprops {
        let other = rprops.iter().find(|q| q.name == p.name);
        if other.map(|q| q.value) != Some(p.value) {
            out.push(Difference::Property {
                path: path.clone(),
                name: p.name.to_string(),
                left: Some(p.value.to_vec()),
                right: other.map(|q| q.value.to_vec()),
            });
        }
    }
    for q in rprops.iter().filter(|q| !lprops.iter().any(|p| p.name == q.name)) {
        out.push(Difference::Property {
            path: path.clone(),
            name: q.name.to_string(),
            left: None,
            right: Some(q.value.to_vec()),
        });
    }
    let lkids: Vec<usize> = lt.children(li).collect();
    let rkids: Vec<usize> = rt.children(ri).collect();
    let name = |t: &Tree, i: usize| t.nodes[i].name.to_string();
    let common_l: Vec<String> =
        lkids.iter().map(|&c| name(lt, c)).filter(|n| rkids.iter().any(|&r| name(rt, r) == *n)).collect();
    let common_r: Vec<String> =
        rkids.iter().map(|&c| name(rt, c)).filter(|n| lkids.iter().any(|&l| name(lt, l) == *n)).collect();
    if common_l != common_r {
        out.push(Difference::Order { path: path.clone() });
    }
    for &c in &lkids {
        match rkids.iter().find(|&&r| name(rt, r) == name(lt, c)) {
            Some(&r) => node(lt, c, rt, r, out),
            None => out.push(Difference::Node { path: lt.path(c), only_left: true }),
        }
    }
    for &r in rkids.iter().filter(|&&r| !lkids.iter().any(|&l| name(lt, l) == name(rt, r))) {
        out.push(Difference::Node { path: rt.path(r), only_left: false });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::FdtWriter;

    fn tree(psci: &str, extra: bool, order: bool) -> Vec<u8> {
        let mut w = FdtWriter::new();
        w.begin_node("").unwrap();
        w.property_u32("#address-cells", 2).unwrap();
        w.property_u32("#size-cells", 2).unwrap();
        let kids: &[&str] = if order { &["b", "a"] } else { &["a", "b"] };
        for k in kids {
            w.begin_node(k).unwrap();
            w.end_node().unwrap();
        }
        w.begin_node("psci").unwrap();
        w.property_str("method", psci).unwrap();
        if extra {
            w.property_u32("cpu_on", 0xc400_0003).unwrap();
        }
        w.end_node().unwrap();
        if extra {
            w.begin_node("extra@1").unwrap();
            w.end_node().unwrap();
        }
        w.end_node().unwrap();
        w.finish().unwrap()
    }

    #[test]
    fn finds_every_kind_of_difference() {
        let a = tree("hvc", false, false);
        assert_eq!(compare(&a, &a).unwrap(), Vec::new());
        let b = tree("smc", true, true);
        let d = compare(&a, &b).unwrap();
        let shown: Vec<String> = d.iter().map(|x| x.to_string()).collect();
        assert_eq!(
            shown,
            [
                "/: the same children in another order",
                "/psci: method = \"hvc\" | \"smc\"",
                "/psci: cpu_on = (absent) | <0xc4000003>",
                "/extra@1: only in the right tree",
            ],
            "{d:?}"
        );
        assert_eq!(d[1].property(), Some("method"));
        assert_eq!(d[3].path(), "/extra@1");
        assert!(compare(&a, b"not a dtb at all, not at all").is_err());
    }

    #[test]
    fn values_show_as_dtc_shows_them() {
        assert_eq!(show_value(b"arm,psci-1.0\0arm,psci\0"), "\"arm,psci-1.0\", \"arm,psci\"");
        assert_eq!(show_value(&[0, 0, 0, 1, 0, 0, 0, 9]), "<0x1 0x9>");
        assert_eq!(show_value(&[]), "(empty)");
        assert_eq!(show_value(&[0]), "[00]");
        assert_eq!(show_value(&[1, 2, 3]), "[01 02 03]");
    }
}
