//! Small device trees for the host tests of this crate.

use alloc::vec::Vec;
use board::FdtWriter;

/// Big-endian cells.
pub fn cells(v: &[u32]) -> Vec<u8> {
    v.iter().flat_map(|c| c.to_be_bytes()).collect()
}

/// Opens the root with `addr` address and `size` size cells and a `memory@0` node with `reg`.
pub fn root_with_memory(w: &mut FdtWriter, addr: u32, size: u32, reg: &[u32]) {
    w.begin_node("").unwrap();
    w.property("#address-cells", &cells(&[addr])).unwrap();
    w.property("#size-cells", &cells(&[size])).unwrap();
    w.begin_node("memory@0").unwrap();
    w.property("device_type", b"memory\0").unwrap();
    w.property("reg", &cells(reg)).unwrap();
    w.end_node().unwrap();
}

/// `/cpus` with one `cpu@0` (`reg` 0) and `extra` properties on it.
pub fn one_cpu(w: &mut FdtWriter, extra: &[(&str, Vec<u8>)]) {
    w.begin_node("cpus").unwrap();
    w.property("#address-cells", &cells(&[1])).unwrap();
    w.property("#size-cells", &cells(&[0])).unwrap();
    w.begin_node("cpu@0").unwrap();
    w.property("device_type", b"cpu\0").unwrap();
    w.property("reg", &cells(&[0])).unwrap();
    for (name, value) in extra {
        w.property(name, value).unwrap();
    }
    w.end_node().unwrap();
    w.end_node().unwrap();
}
