//! The atomics of the protocols between CPUs ([`crate::park`], [`crate::psci`]): `core`'s, except
//! in this crate's own tests, where each is a wrapper that, after every store (a `store`, a
//! `swap`, a successful `compare_exchange`), calls the running thread's store hook
//! ([`hook::set`]). A test then sees the state between any two stores of one function, in the
//! order they become visible, with the ordering each store used: an order of stores or a weaker
//! ordering that lets another CPU see a half-written state fails it.

pub use core::sync::atomic::Ordering;
#[cfg(not(test))]
pub use core::sync::atomic::{AtomicBool, AtomicU64, AtomicU8};
#[cfg(test)]
pub use hook::{AtomicBool, AtomicU64, AtomicU8};

/// The store hook of this crate's tests.
#[cfg(test)]
pub mod hook {
    extern crate std;
    use super::Ordering;
    use core::cell::RefCell;
    use std::boxed::Box;

    type Hook = Box<dyn FnMut(Ordering)>;

    std::thread_local! {
        static HOOK: RefCell<Option<Hook>> = const { RefCell::new(None) };
    }

    /// Calls `f` after every store of an atomic of this module on this thread, with the store's
    /// ordering, until [`clear`]. The hook itself may read the atomics (its own stores, if any,
    /// do not call it again).
    pub fn set(f: impl FnMut(Ordering) + 'static) {
        HOOK.with(|h| *h.borrow_mut() = Some(Box::new(f)));
    }

    /// No hook from now on.
    pub fn clear() {
        HOOK.with(|h| *h.borrow_mut() = None);
    }

    fn stored(o: Ordering) {
        let taken = HOOK.with(|h| h.borrow_mut().take());
        if let Some(mut f) = taken {
            f(o);
            HOOK.with(|h| {
                let mut h = h.borrow_mut();
                if h.is_none() {
                    *h = Some(f);
                }
            });
        }
    }

    macro_rules! hooked {
        ($name:ident, $inner:ty, $t:ty) => {
            /// `core`'s atomic of the same name, calling the store hook after each store.
            #[derive(Debug, Default)]
            pub struct $name($inner);

            impl $name {
                /// As `core`'s.
                pub const fn new(v: $t) -> Self {
                    Self(<$inner>::new(v))
                }
                /// As `core`'s.
                pub fn load(&self, o: Ordering) -> $t {
                    self.0.load(o)
                }
                /// As `core`'s, then the hook.
                pub fn store(&self, v: $t, o: Ordering) {
                    self.0.store(v, o);
                    stored(o);
                }
                /// As `core`'s, then the hook.
                pub fn swap(&self, v: $t, o: Ordering) -> $t {
                    let r = self.0.swap(v, o);
                    stored(o);
                    r
                }
                /// As `core`'s, then the hook if it stored.
                pub fn compare_exchange(&self, cur: $t, new: $t, ok: Ordering, fail: Ordering) -> Result<$t, $t> {
                    let r = self.0.compare_exchange(cur, new, ok, fail);
                    if r.is_ok() {
                        stored(ok);
                    }
                    r
                }
            }
        };
    }

    hooked!(AtomicU8, core::sync::atomic::AtomicU8, u8);
    hooked!(AtomicU64, core::sync::atomic::AtomicU64, u64);
    hooked!(AtomicBool, core::sync::atomic::AtomicBool, bool);
}
