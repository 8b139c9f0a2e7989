//! Test helpers: real DTBs dumped from QEMU at test time, and a tiny tree builder for
//! synthetic (and deliberately broken) DTBs.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};

use board::FdtWriter;

/// One QEMU `virt` configuration.
#[derive(Debug, Clone, Copy)]
pub struct Qemu {
    pub gic: u8,
    pub virtualization: bool,
    pub cpu: &'static str,
    pub smp: u32,
    pub mem: &'static str,
    /// Size of the initrd file to pass with `-initrd` (plus a dummy `-kernel`).
    pub initrd: Option<usize>,
    pub append: Option<&'static str>,
}

impl Default for Qemu {
    fn default() -> Self {
        Qemu { gic: 3, virtualization: true, cpu: "max", smp: 4, mem: "1G", initrd: None, append: None }
    }
}

pub const QEMU: &str = "qemu-system-aarch64";

fn out_dir() -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("board-dtbs");
    std::fs::create_dir_all(&dir).expect("create test output dir");
    dir
}

impl Qemu {
    pub fn name(&self) -> String {
        format!(
            "gic{}-{}-{}-smp{}-{}{}{}",
            self.gic,
            if self.virtualization { "virt" } else { "novirt" },
            self.cpu,
            self.smp,
            self.mem,
            self.initrd.map(|n| format!("-initrd{n}")).unwrap_or_default(),
            self.append.map(|a| format!("-append{}", a.len())).unwrap_or_default(),
        )
    }

    /// Dumps the DTB QEMU would hand the guest (`-M virt,...,dumpdtb=FILE`). Fails the test
    /// (never skips) when QEMU is missing.
    pub fn dtb(&self) -> Vec<u8> {
        static SEQ: AtomicUsize = AtomicUsize::new(0);
        let dir = out_dir();
        // Unique per call: tests run in parallel and may dump the same configuration.
        let seq = SEQ.fetch_add(1, Ordering::Relaxed);
        let name = format!("{}-{}-{seq}", self.name(), std::process::id());
        let file = dir.join(format!("{name}.dtb"));
        let machine = format!(
            "virt,virtualization={},gic-version={},dumpdtb={}",
            if self.virtualization { "on" } else { "off" },
            self.gic,
            file.display()
        );
        let mut cmd = Command::new(QEMU);
        cmd.args(["-M", &machine, "-cpu", self.cpu, "-smp", &self.smp.to_string()]).args([
            "-m",
            self.mem,
            "-nographic",
        ]);
        if let Some(size) = self.initrd {
            let kernel = dir.join(format!("{name}.kernel"));
            let initrd = dir.join(format!("{name}.initrd"));
            std::fs::write(&kernel, [0u8; 64]).unwrap();
            std::fs::write(&initrd, vec![0x5au8; size]).unwrap();
            cmd.arg("-kernel").arg(&kernel).arg("-initrd").arg(&initrd);
        }
        if let Some(append) = self.append {
            cmd.args(["-append", append]);
        }
        let out = match cmd.stdin(Stdio::null()).output() {
            Ok(out) => out,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => panic!(
                "{QEMU} not found: these tests need real DTBs from QEMU's virt board; \
                 install it with `apt-get install qemu-system-arm`"
            ),
            Err(e) => panic!("cannot run {QEMU}: {e}"),
        };
        assert!(
            out.status.success(),
            "{QEMU} {:?} failed: {}",
            cmd.get_args().collect::<Vec<_>>(),
            String::from_utf8_lossy(&out.stderr)
        );
        let dtb = std::fs::read(&file).unwrap_or_else(|e| panic!("read {}: {e}", file.display()));
        for f in ["dtb", "kernel", "initrd"] {
            let _ = std::fs::remove_file(dir.join(format!("{name}.{f}")));
        }
        dtb
    }
}

/// A node of a synthetic tree.
#[derive(Debug, Clone)]
pub struct N {
    pub name: String,
    pub props: Vec<(String, Vec<u8>)>,
    pub kids: Vec<N>,
}

pub fn cells(v: &[u32]) -> Vec<u8> {
    v.iter().flat_map(|c| c.to_be_bytes()).collect()
}

pub fn s(v: &str) -> Vec<u8> {
    let mut b = v.as_bytes().to_vec();
    b.push(0);
    b
}

impl N {
    pub fn new(name: &str) -> Self {
        N { name: name.into(), props: vec![], kids: vec![] }
    }
    pub fn p(mut self, name: &str, value: Vec<u8>) -> Self {
        self.props.push((name.into(), value));
        self
    }
    pub fn kid(mut self, kid: N) -> Self {
        self.kids.push(kid);
        self
    }
    /// The node at `path` (`/` = self).
    pub fn at(&mut self, path: &str) -> &mut N {
        let mut cur = self;
        for comp in path.split('/').filter(|c| !c.is_empty()) {
            cur = cur.kids.iter_mut().find(|k| k.name == comp).unwrap_or_else(|| panic!("no {comp}"));
        }
        cur
    }
    pub fn set(&mut self, name: &str, value: Vec<u8>) -> &mut Self {
        match self.props.iter_mut().find(|(n, _)| n == name) {
            Some(p) => p.1 = value,
            None => self.props.push((name.into(), value)),
        }
        self
    }
    pub fn unset(&mut self, name: &str) -> &mut Self {
        self.props.retain(|(n, _)| n != name);
        self
    }
    pub fn remove_kid(&mut self, name: &str) -> &mut Self {
        self.kids.retain(|k| k.name != name);
        self
    }
    fn write(&self, w: &mut FdtWriter) {
        w.begin_node(&self.name).unwrap();
        for (n, v) in &self.props {
            w.property(n, v).unwrap();
        }
        for k in &self.kids {
            k.write(w);
        }
        w.end_node().unwrap();
    }
    pub fn dtb(&self) -> Vec<u8> {
        self.dtb_with_reserve(&[])
    }
    pub fn dtb_with_reserve(&self, rsv: &[(u64, u64)]) -> Vec<u8> {
        let mut w = FdtWriter::new();
        for &(a, s) in rsv {
            w.add_mem_reserve(a, s).unwrap();
        }
        self.write(&mut w);
        w.finish().unwrap()
    }
}

/// A small but complete board: 2 cells everywhere, RAM at 1 GiB, PL011, GICv3, PSCI, 2 CPUs.
pub fn base_tree() -> N {
    N::new("")
        .p("#address-cells", cells(&[2]))
        .p("#size-cells", cells(&[2]))
        .p("compatible", s("test,board"))
        .p("model", s("Test Board"))
        .p("interrupt-parent", cells(&[1]))
        .kid(N::new("chosen").p("stdout-path", s("/uart@9000000")).p("bootargs", s("console=ttyAMA0")))
        .kid(N::new("memory@40000000").p("device_type", s("memory")).p("reg", cells(&[0, 0x4000_0000, 0, 0x2000_0000])))
        .kid(
            N::new("uart@9000000")
                .p("compatible", [s("arm,pl011"), s("arm,primecell")].concat())
                .p("reg", cells(&[0, 0x0900_0000, 0, 0x1000]))
                .p("clock-frequency", cells(&[48_000_000])),
        )
        .kid(
            N::new("intc@8000000")
                .p("compatible", s("arm,gic-v3"))
                .p("phandle", cells(&[1]))
                .p("reg", cells(&[0, 0x0800_0000, 0, 0x10000, 0, 0x080a_0000, 0, 0xf6_0000])),
        )
        .kid(N::new("psci").p("compatible", s("arm,psci-1.0")).p("method", s("hvc")))
        .kid(
            N::new("cpus")
                .p("#address-cells", cells(&[1]))
                .p("#size-cells", cells(&[0]))
                .kid(N::new("cpu@0").p("device_type", s("cpu")).p("reg", cells(&[0])).p("enable-method", s("psci")))
                .kid(N::new("cpu@1").p("device_type", s("cpu")).p("reg", cells(&[1])).p("enable-method", s("psci"))),
        )
}

/// The blob with `totalsize` cut down to the end of its blocks (QEMU pads to 1 MiB):
/// `board::dtb_used_len`.
pub fn compact(dtb: &[u8]) -> Vec<u8> {
    let end = board::dtb_used_len(dtb).expect("a well-formed blob");
    let mut v = dtb[..end].to_vec();
    v[4..8].copy_from_slice(&(end as u32).to_be_bytes());
    v
}

/// xorshift64*: deterministic, so a failure reproduces.
pub struct Rng(pub u64);

impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    pub fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}
