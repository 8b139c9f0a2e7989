//! The hypervisor's own memory: a heap inside its image (BSS, `rt::heap`) and the page-table frame pool
//! (its pieces are decided by `hypcore::plan` at boot and handed over with [`add_frames`]).
//! Physical ranges and their arithmetic are `hypcore::range`'s.

use buddy_system_allocator::FrameAllocator;
use spin::Mutex;

pub use hypcore::range::Range;
pub use hypcore::{BLOCK_1G, BLOCK_2M, PAGE};

/// Heap for the hypervisor's own data (DTB copies, board description, guest DTB).
const HEAP_SIZE: usize = 4 << 20;

rt::heap_space!(
    /// The heap's first block: not cleared at entry (`rt::heap`).
    static HEAP_SPACE: HEAP_SIZE
);

#[global_allocator]
static HEAP: rt::heap::BssHeap = rt::heap::BssHeap::new();

/// 4 KiB frames by frame number.
pub static FRAMES: Mutex<FrameAllocator<32>> = Mutex::new(FrameAllocator::new());

/// Makes the heap usable. Call once, on the boot CPU, before anything allocates.
pub fn init_heap() {
    HEAP.init(&HEAP_SPACE);
}

/// Pages handed to the frame pool.
static POOL_PAGES: core::sync::atomic::AtomicU64 = core::sync::atomic::AtomicU64::new(0);

/// Hands `r` (page aligned, owned by the hypervisor, mapped) to the frame pool.
pub fn add_frames(r: Range) {
    if !r.is_empty() {
        FRAMES.lock().add_frame((r.start / PAGE) as usize, (r.end / PAGE) as usize);
        POOL_PAGES.fetch_add(r.len() / PAGE, core::sync::atomic::Ordering::Relaxed);
    }
}

/// Pages in the frame pool (COUNTER_READ `FramePoolPages`).
pub fn frame_pool_pages() -> u64 {
    POOL_PAGES.load(core::sync::atomic::Ordering::Relaxed)
}

/// Copies `len` bytes from `src` to `dst` 32 bytes at a time with pairs of 64-bit registers,
/// the tail byte by byte: the compiler's memcpy on this FP-free, strict-alignment target moves
/// one byte per load, too slow for a guest kernel of tens of MiB.
///
/// Unaligned ends (a boot loader may put an initrd anywhere) fall back to the byte copy.
///
/// # Safety
///
/// `len` bytes are readable at `src` and writable at `dst`, and the two ranges do not overlap
/// unless `dst` is below `src` (each 32-byte block is read whole before it is written, and the
/// tail goes forwards, so a copy downwards never overwrites a byte it has yet to read).
pub unsafe fn copy_fast(dst: u64, src: u64, len: u64) {
    let blocks = if (dst | src).is_multiple_of(8) { len / 32 } else { 0 };
    if blocks > 0 {
        // SAFETY: the caller's contract; both ranges are 8-byte aligned (checked above); the
        // loop touches exactly `32 * blocks` bytes of each.
        unsafe {
            core::arch::asm!(
                "2:",
                "ldp {a}, {b}, [{src}], #16",
                "ldp {c}, {d}, [{src}], #16",
                "stp {a}, {b}, [{dst}], #16",
                "stp {c}, {d}, [{dst}], #16",
                "subs {n}, {n}, #1",
                "b.ne 2b",
                src = inout(reg) src => _,
                dst = inout(reg) dst => _,
                n = inout(reg) blocks => _,
                a = out(reg) _, b = out(reg) _, c = out(reg) _, d = out(reg) _,
                options(nostack),
            )
        }
    }
    for i in blocks * 32..len {
        // SAFETY: inside both ranges (the caller's contract).
        unsafe { core::ptr::write_volatile((dst + i) as *mut u8, core::ptr::read_volatile((src + i) as *const u8)) };
    }
}

/// Moves `len` bytes from `src` to `dst`, which may overlap (a memmove), at [`copy_fast`]'s pace:
/// forwards when the destination is below the source, else backwards in pieces no longer than
/// the distance between the two, so no piece overlaps its own destination.
///
/// # Safety
///
/// `len` bytes are readable at `src` and writable at `dst`.
pub unsafe fn move_bytes(dst: u64, src: u64, len: u64) {
    if dst == src || len == 0 {
        return;
    }
    if dst < src || dst >= src + len {
        // Forwards: copy_fast reads each 32-byte block before writing it, and every write lands
        // below bytes still to be read.
        // SAFETY: the caller's contract; see above for the overlap.
        unsafe { copy_fast(dst, src, len) };
        return;
    }
    let piece = (dst - src).min(1 << 20);
    let mut end = len;
    while end > 0 {
        let start = end.saturating_sub(piece);
        // SAFETY: [src + start, src + end) and its destination [dst + start, dst + end) do not
        // overlap (their distance is at least the piece's length); the bytes above `end` were
        // moved already and the destination lies above every source byte still to be read.
        unsafe { copy_fast(dst + start, src + start, end - start) };
        end = start;
    }
}

/// The `DC ZVA` block in bytes, if EL2 may use it (DCZID_EL0: DZP clear, a block of at least 16
/// bytes, which [`zero`]'s stores then never split).
fn zva_block() -> Option<u64> {
    let dczid: u64;
    // SAFETY: reads DCZID_EL0; no memory touched.
    unsafe { core::arch::asm!("mrs {}, dczid_el0", out(reg) dczid, options(nomem, nostack, preserves_flags)) };
    let block = 4u64 << (dczid & 0xf);
    (dczid & 0x10 == 0 && block >= 16).then_some(block)
}

/// Writes `len` zero bytes at `dst` of normal memory (the EL2 MMU on): `DC ZVA` over the whole
/// blocks inside (one instruction per block, usually 64 bytes: the guest's RAM left over from
/// loading is tens of MiB), stores around them.
///
/// # Safety
///
/// `len` bytes are writable at `dst`, mapped as normal memory (`DC ZVA` faults on device memory).
pub unsafe fn zero(dst: u64, len: u64) {
    let r = Range::new(dst, dst + len);
    let Some((b, w)) = zva_block().and_then(|b| Some((b, hypcore::range::whole_blocks(r, b)?))) else {
        // SAFETY: the caller's contract.
        return unsafe { zero_stores(dst, len) };
    };
    // SAFETY: the caller's contract; [w.start, w.end) is inside `r`, both ends multiples of `b`.
    unsafe {
        zero_stores(r.start, w.start - r.start);
        core::arch::asm!(
            "2:",
            "dc zva, {p}",
            "add {p}, {p}, {b}",
            "cmp {p}, {end}",
            "b.lo 2b",
            p = inout(reg) w.start => _,
            b = in(reg) b,
            end = in(reg) w.end,
            options(nostack),
        );
        zero_stores(w.end, r.end - w.end);
    }
}

/// Writes `len` zero bytes at `dst`, 16 at a time where aligned.
///
/// # Safety
///
/// `len` bytes are writable at `dst`.
unsafe fn zero_stores(dst: u64, len: u64) {
    let head = (dst.next_multiple_of(16) - dst).min(len);
    let blocks = (len - head) / 16;
    for i in 0..head {
        // SAFETY: inside the range (the caller's contract).
        unsafe { core::ptr::write_volatile((dst + i) as *mut u8, 0) };
    }
    if blocks > 0 {
        // SAFETY: the caller's contract; [dst + head, dst + head + 16 * blocks) is inside the
        // range and 16-byte aligned.
        unsafe {
            core::arch::asm!(
                "2:",
                "stp xzr, xzr, [{p}], #16",
                "subs {n}, {n}, #1",
                "b.ne 2b",
                p = inout(reg) dst + head => _,
                n = inout(reg) blocks => _,
                options(nostack),
            )
        }
    }
    for i in head + blocks * 16..len {
        // SAFETY: inside the range (the caller's contract).
        unsafe { core::ptr::write_volatile((dst + i) as *mut u8, 0) };
    }
}
