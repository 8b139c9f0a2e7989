//! How the xtask's children end with it.
//!
//! Every long-running child (QEMU, `cargo test`) is started through [`supervised`]:
//!
//! * it gets `PR_SET_PDEATHSIG = SIGKILL`, so if the xtask dies in any way (a crash, SIGKILL,
//!   a signal it does not catch) the kernel kills the child at once: no QEMU is ever left running
//!   under PID 1 with no time limit;
//! * it runs in a process group of its own, so a SIGINT typed at the terminal reaches the xtask
//!   alone, which then ends the whole group (cargo test, its test binaries and their QEMUs) and
//!   says so.
//!
//! [`install`] catches SIGINT, SIGTERM and SIGHUP (a SIGINT ignored by the shell that started
//! the xtask in the background included). On one of them it records the signal ([`caught`]),
//! sends SIGTERM to every supervised group and, after [`GRACE`], SIGKILL. The code waiting for
//! the child sees it end and [`caught`] set and returns the verdict [`abi::exit::INTERRUPTED`];
//! if nothing is waiting for a child (a build, a download), the handler ends the xtask itself
//! with that code once the grace is over.

use std::os::unix::process::CommandExt;
use std::process::{Child, Command};
use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// The signal that stopped the xtask (0: none).
static CAUGHT: AtomicI32 = AtomicI32::new(0);
/// Process groups of the supervised children still running.
static GROUPS: Mutex<Vec<i32>> = Mutex::new(Vec::new());
/// How long children get between SIGTERM and SIGKILL, and the waiting code to give its verdict.
pub const GRACE: Duration = Duration::from_secs(5);

/// The signal the xtask was stopped by, if any.
pub fn caught() -> Option<i32> {
    match CAUGHT.load(Ordering::SeqCst) {
        0 => None,
        s => Some(s),
    }
}

/// A signal's name, for messages (`SIGTERM`), or its number.
pub fn name(sig: i32) -> String {
    match sig {
        libc::SIGINT => "SIGINT".into(),
        libc::SIGTERM => "SIGTERM".into(),
        libc::SIGHUP => "SIGHUP".into(),
        libc::SIGKILL => "SIGKILL".into(),
        s => format!("signal {s}"),
    }
}

/// Catches SIGINT, SIGTERM and SIGHUP for the rest of the process (see the module doc). Called
/// once by the xtask's `main`; the test harness does not (its QEMUs die with it by
/// `PR_SET_PDEATHSIG`).
pub fn install() -> std::io::Result<()> {
    let mut signals = signal_hook::iterator::Signals::new([libc::SIGINT, libc::SIGTERM, libc::SIGHUP])?;
    std::thread::Builder::new().name("signals".into()).spawn(move || {
        for sig in signals.forever() {
            if caught().is_none() {
                std::thread::spawn(move || on_signal(sig));
            } else {
                // A second signal while the first is handled: no more grace.
                signal_groups(libc::SIGKILL);
                eprintln!("xtask: exit {} (interrupted: {} received twice)", abi::exit::INTERRUPTED, name(sig));
                std::process::exit(abi::exit::INTERRUPTED as i32);
            }
        }
    })?;
    Ok(())
}

fn on_signal(sig: i32) {
    CAUGHT.store(sig, Ordering::SeqCst);
    eprintln!("xtask: {} received: ending every process the xtask started", name(sig));
    signal_groups(libc::SIGTERM);
    let t0 = Instant::now();
    while t0.elapsed() < GRACE && !GROUPS.lock().unwrap().is_empty() {
        std::thread::sleep(Duration::from_millis(20));
    }
    signal_groups(libc::SIGKILL);
    // The code waiting for a child gives the verdict and exits; give it the time to.
    std::thread::sleep(GRACE);
    eprintln!("xtask: exit {} (interrupted: {} received)", abi::exit::INTERRUPTED, name(sig));
    std::process::exit(abi::exit::INTERRUPTED as i32);
}

fn signal_groups(sig: i32) {
    for &g in GROUPS.lock().unwrap().iter() {
        // SAFETY: kill(2) on a process group this process created (its leader is our child and
        // is not reaped until `Supervised::wait` removes the group from the list, so the id
        // cannot have been reused); no memory is involved.
        unsafe { libc::kill(-g, sig) };
    }
}

/// A child started by [`supervised`]; its group leaves the list when it has been waited for
/// (or dropped: then it is killed first).
pub struct Supervised {
    pub child: Child,
    group: i32,
    reaped: bool,
}

impl Supervised {
    /// Waits for the child (see [`Child::wait`]) and forgets its group.
    pub fn wait(&mut self) -> std::io::Result<std::process::ExitStatus> {
        let r = self.child.wait();
        self.forget();
        r
    }

    /// [`Child::try_wait`]; a child that has ended leaves the list.
    pub fn try_wait(&mut self) -> std::io::Result<Option<std::process::ExitStatus>> {
        let r = self.child.try_wait();
        if matches!(r, Ok(Some(_))) {
            self.forget();
        }
        r
    }

    /// SIGKILL to the child's whole group.
    pub fn kill(&mut self) {
        if !self.reaped {
            // SAFETY: as in `signal_groups`: our own child's group, not yet reaped.
            unsafe { libc::kill(-self.group, libc::SIGKILL) };
        }
    }

    fn forget(&mut self) {
        self.reaped = true;
        GROUPS.lock().unwrap().retain(|&g| g != self.group);
    }
}

impl Drop for Supervised {
    fn drop(&mut self) {
        if !self.reaped {
            self.kill();
            let _ = self.wait();
        }
    }
}

/// Runs `cmd` to its end, [`supervised`]: a signal to the xtask ends it with its whole group
/// (cargo and the rustc processes it started, an installer) and the xtask with the code
/// `interrupted`; nothing it started outlives the xtask.
pub fn status(cmd: &mut Command) -> anyhow::Result<std::process::ExitStatus> {
    use anyhow::Context;
    let program = cmd.get_program().to_string_lossy().into_owned();
    let mut child = supervised(cmd).with_context(|| format!("running {program}"))?;
    let status = child.wait().with_context(|| format!("waiting for {program}"))?;
    if let Some(sig) = caught() {
        return Err(anyhow::Error::new(crate::error::ExitWith(crate::error::Verdict::new(
            abi::exit::INTERRUPTED,
            format!("the xtask got {} and ended {program}", name(sig)),
        ))));
    }
    Ok(status)
}

/// Spawns `cmd` in a process group of its own, killed by the kernel if this thread ends first
/// (`PR_SET_PDEATHSIG`: the thread that spawns a child must be the one that waits for it), and
/// ended with the xtask on SIGINT, SIGTERM or SIGHUP.
pub fn supervised(cmd: &mut Command) -> std::io::Result<Supervised> {
    let parent = std::process::id() as i32;
    // SAFETY: the closure runs in the child between fork and exec and calls only
    // async-signal-safe functions (setpgid, prctl, getppid, _exit).
    unsafe {
        cmd.pre_exec(move || {
            if libc::setpgid(0, 0) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL as libc::c_ulong, 0, 0, 0) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            // The parent may have died before the prctl: then nothing would kill us.
            if libc::getppid() != parent {
                libc::_exit(1);
            }
            Ok(())
        });
    }
    // Holding the list across the spawn: a signal handled meanwhile sees the new group.
    let mut groups = GROUPS.lock().unwrap();
    if let Some(sig) = caught() {
        return Err(std::io::Error::other(format!("the xtask is ending ({} received)", name(sig))));
    }
    let child = cmd.spawn()?;
    let group = child.id() as i32;
    groups.push(group);
    Ok(Supervised { child, group, reaped: false })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_supervised_child_has_its_own_group_and_dies_with_its_thread() {
        // The child is spawned by a thread that ends right away: PR_SET_PDEATHSIG kills it.
        let pid = std::thread::spawn(|| {
            let mut s = supervised(Command::new("sleep").arg("30")).expect("sleep");
            let pid = s.child.id() as i32;
            // SAFETY: getpgid on our own child.
            assert_eq!(unsafe { libc::getpgid(pid) }, pid, "its own process group");
            s.reaped = true; // leave it running: the thread's end must take it down
            std::mem::forget(s);
            pid
        })
        .join()
        .unwrap();
        let t0 = Instant::now();
        loop {
            let mut status = 0;
            // SAFETY: waitpid on our own child, status written into a local.
            let r = unsafe { libc::waitpid(pid, &mut status, libc::WNOHANG) };
            if r == pid {
                assert!(libc::WIFSIGNALED(status) && libc::WTERMSIG(status) == libc::SIGKILL, "status {status:#x}");
                break;
            }
            assert!(t0.elapsed() < Duration::from_secs(60), "the child outlived the thread that started it");
            std::thread::sleep(Duration::from_millis(20));
        }
        GROUPS.lock().unwrap().retain(|&g| g != pid);
    }

    #[test]
    fn kill_and_drop_end_the_whole_group() {
        use std::io::BufRead;
        // A shell whose own child sleeps: both are in the group, both must go.
        let mut cmd = Command::new("sh");
        cmd.args(["-c", "sleep 30 & echo $!; wait"]).stdout(std::process::Stdio::piped());
        let mut s = supervised(&mut cmd).expect("sh");
        let group = s.group;
        assert!(GROUPS.lock().unwrap().contains(&group));
        let mut line = String::new();
        std::io::BufReader::new(s.child.stdout.take().unwrap()).read_line(&mut line).unwrap();
        let sleeper: u32 = line.trim().parse().expect("the sleeper's pid");
        drop(s);
        assert!(!GROUPS.lock().unwrap().contains(&group));
        // The shell's child is not ours to reap: it must be gone or a zombie.
        let t0 = Instant::now();
        while let Ok(stat) = std::fs::read_to_string(format!("/proc/{sleeper}/stat")) {
            let state = stat.rsplit(')').next().unwrap_or("").split_whitespace().next().unwrap_or("");
            if state == "Z" || state == "X" {
                break;
            }
            assert!(t0.elapsed() < Duration::from_secs(60), "the group's other process survived: {stat}");
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}
