//! The PMU's instruction count through `perf_event_open`: the calling thread's at EL0 + EL1,
//! read from EL0 without a system call (`kernel.perf_user_access = 1`, `config1:1`, the
//! counter named by the event's `perf_event_mmap_page`), and a whole CPU's, read with `read`.

use crate::sys::{self, Errno};

/// `PERF_TYPE_HARDWARE`.
const TYPE_HARDWARE: u64 = 0;
/// `PERF_COUNT_HW_INSTRUCTIONS` (arm64: INST_RETIRED, event 0x08).
const HW_INSTRUCTIONS: u64 = 1;
/// `sizeof(struct perf_event_attr)`, version 8.
const ATTR_SIZE: u64 = 136;
/// Flag bits of the attribute: pinned, exclude_hv (EL2 is not the kernel's).
const PINNED: u64 = 1 << 2;
const EXCLUDE_HV: u64 = 1 << 6;
/// `config1` of the arm64 PMU: 64-bit counter (`long`), EL0 access (`rdpmc`).
const CONFIG1_LONG: u64 = 1 << 0;
const CONFIG1_RDPMC: u64 = 1 << 1;
/// `perf_event_mmap_page`: `lock`, `index`, `capabilities` (bit 2: cap_user_rdpmc),
/// `pmc_width`.
const PAGE_LOCK: usize = 8;
const PAGE_INDEX: usize = 12;
const PAGE_CAPS: usize = 40;
const PAGE_WIDTH: usize = 48;
const CAP_USER_RDPMC: u64 = 1 << 2;

fn attr(config1: u64) -> [u64; 17] {
    let mut a = [0u64; 17];
    a[0] = TYPE_HARDWARE | (ATTR_SIZE << 32);
    a[1] = HW_INSTRUCTIONS;
    a[5] = PINNED | EXCLUDE_HV;
    a[7] = config1;
    a
}

/// The calling thread's instruction counter, readable at EL0.
pub struct TaskCounter {
    page: *const u8,
    /// PMU counter number + 1 (31 + 1 would be the cycle counter, never for instructions).
    index: u32,
    mask: u64,
}

fn write_file(path: &[u8], data: &[u8]) -> Result<(), Errno> {
    let fd = sys::open(path, sys::O_WRONLY)?;
    let r = sys::write(fd, data);
    sys::close(fd);
    r.map(|_| ())
}

impl TaskCounter {
    /// Opens the counter (64 bits where the PMU has them, else its width) and maps its page.
    pub fn open() -> Result<TaskCounter, Errno> {
        write_file(b"/proc/sys/kernel/perf_user_access\0", b"1")?;
        let fd = match sys::perf_event_open(&attr(CONFIG1_RDPMC | CONFIG1_LONG), 0, -1) {
            Ok(fd) => fd,
            // Without 64-bit counters (PMUv3p5) the long flag is refused for EL0 access.
            Err(_) => sys::perf_event_open(&attr(CONFIG1_RDPMC), 0, -1)?,
        };
        let page = sys::mmap(4096, sys::PROT_READ, sys::MAP_SHARED, fd as i64, 0)? as *const u8;
        let mut c = TaskCounter { page, index: 0, mask: 0 };
        // SAFETY: the event's page, mapped for the life of the process.
        let (caps, width) = unsafe {
            (
                core::ptr::read_volatile(page.add(PAGE_CAPS) as *const u64),
                core::ptr::read_volatile(page.add(PAGE_WIDTH) as *const u16),
            )
        };
        c.index = c.read_index();
        if caps & CAP_USER_RDPMC == 0 || c.index == 0 || c.index > 31 {
            return Err(Errno("perf_event user access (cap_user_rdpmc, index)", c.index as i64));
        }
        c.mask = if width >= 64 { u64::MAX } else { (1u64 << width) - 1 };
        Ok(c)
    }

    fn read_index(&self) -> u32 {
        // SAFETY: the event's page (see `open`).
        unsafe { core::ptr::read_volatile(self.page.add(PAGE_INDEX) as *const u32) }
    }

    /// The page's sequence count: it changes whenever the kernel reprograms the counter.
    pub fn lock(&self) -> u64 {
        // SAFETY: the event's page (see `open`).
        let l = unsafe { core::ptr::read_volatile(self.page.add(PAGE_LOCK) as *const u32) } as u64;
        l | (self.read_index() as u64) << 32
    }

    /// The counter's width as a mask.
    pub fn mask(&self) -> u64 {
        self.mask
    }

    /// The raw counter (differences of two reads, masked, are instructions).
    #[inline(always)]
    pub fn read(&self) -> u64 {
        read_pmevcntr(self.index - 1)
    }
}

/// `mrs` of event counter `n` (0..=30), after `isb`.
#[inline(always)]
fn read_pmevcntr(n: u32) -> u64 {
    macro_rules! counters {
        ($($i:literal),*) => {
            match n {
                $($i => {
                    let v: u64;
                    // SAFETY: the kernel lets this thread read its event's counter at EL0
                    // (PMUSERENR_EL0.ER, perf_user_access); no memory is touched.
                    unsafe {
                        core::arch::asm!(
                            "isb",
                            concat!("mrs {}, pmevcntr", $i, "_el0"),
                            out(reg) v,
                            options(nomem, nostack, preserves_flags)
                        )
                    };
                    v
                })*
                _ => 0,
            }
        };
    }
    counters!(
        0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29,
        30
    )
}

/// One CPU's instruction count (every task, EL0 + EL1), read with `read(2)`.
pub struct CpuCounter {
    fd: u64,
}

impl CpuCounter {
    /// Opens the counter of CPU `cpu` (needs root).
    pub fn open(cpu: u64) -> Result<CpuCounter, Errno> {
        Ok(CpuCounter { fd: sys::perf_event_open(&attr(0), -1, cpu as i64)? })
    }

    /// The count so far.
    pub fn read(&self) -> u64 {
        let mut b = [0u8; 8];
        match sys::read(self.fd, &mut b) {
            Ok(8) => u64::from_le_bytes(b),
            _ => 0,
        }
    }
}
