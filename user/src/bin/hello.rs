//! The smallest EL0 program: one line, exit status from its argument (`user=hello:3` exits 3).
#![no_std]
#![no_main]

user::entry!(main);

fn main(args: &str) -> i32 {
    user::println!("hello from EL0 on CPU {} (args {args:?})", user::sys::getcpu());
    args.parse().unwrap_or(0)
}
