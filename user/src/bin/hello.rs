//! The smallest EL0 program: one line, exit status from its argument (`user=hello:3` exits 3).
#![cfg_attr(target_os = "none", no_std, no_main)]

user::entry!(run);

fn run(args: &str) -> i32 {
    user::println!("hello from EL0 on CPU {} (args {args:?})", user::sys::getcpu());
    args.parse().unwrap_or(0)
}
