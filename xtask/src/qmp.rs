//! A small QMP client (QEMU's JSON machine protocol, `-qmp unix:PATH,server=on,wait=off`): what
//! the xtask asks a running QEMU without disturbing the guest: where every vCPU is (at a time
//! limit, for the verdict), and the guest's memory (`pmemsave`, for the device-tree test).

use anyhow::{anyhow, bail, Context, Result};
use serde_json::{json, Value};
use std::io::{BufRead, BufReader, ErrorKind, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// A QMP socket path for one run: in the temporary directory (a socket path must stay under
/// ~108 bytes), unique per process and call.
pub fn socket_path() -> PathBuf {
    static SEQ: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let n = SEQ.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    std::env::temp_dir().join(format!("pgtlab-qmp-{}-{n}.sock", std::process::id()))
}

/// The QEMU arguments that open `path` for QMP.
pub fn qemu_args(path: &Path) -> [String; 2] {
    ["-qmp".into(), format!("unix:{},server=on,wait=off", path.display())]
}

/// The QEMU arguments that open `path` for QMP events, QEMU waiting for the connection before
/// it goes on. QEMU runs the machine as soon as a client connects, while a monitor drops every
/// event until its client has left capability negotiation: so the machine must also start
/// stopped (`-S`, [`EventWatch::start`] then resumes it) or a guest that ends at once ends
/// unseen.
pub fn event_args(path: &Path) -> [String; 2] {
    ["-qmp".into(), format!("unix:{},server=on,wait=on", path.display())]
}

/// How QEMU's machine ended, as its `SHUTDOWN` event says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Shutdown {
    /// The guest asked for it (power-off or reset), not the host.
    pub guest: bool,
    /// QEMU's reason: `guest-shutdown` (PSCI SYSTEM_OFF), `guest-reset` (SYSTEM_RESET, which
    /// `-no-reboot` turns into an end), `guest-panic`, `host-signal`, `host-qmp-quit`, ...
    pub reason: String,
}

impl Shutdown {
    /// The guest powered the machine off.
    pub fn powered_off(&self) -> bool {
        self.guest && self.reason == "guest-shutdown"
    }

    /// The guest reset the machine (or panicked, where QEMU sees it).
    pub fn reset(&self) -> bool {
        self.guest && matches!(self.reason.as_str(), "guest-reset" | "guest-panic")
    }
}

/// What a `SHUTDOWN` event `v` says, if it is one.
pub fn shutdown_of(v: &Value) -> Option<Shutdown> {
    if v.get("event")?.as_str()? != "SHUTDOWN" {
        return None;
    }
    let data = v.get("data");
    Some(Shutdown {
        guest: data.and_then(|d| d.get("guest")).and_then(Value::as_bool).unwrap_or(false),
        reason: data.and_then(|d| d.get("reason")).and_then(Value::as_str).unwrap_or("").to_string(),
    })
}

/// Reads a run's QMP events on a thread of its own: the machine's `SHUTDOWN`, once it comes.
pub struct EventWatch {
    shutdown: std::sync::Arc<std::sync::Mutex<Option<Shutdown>>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl EventWatch {
    /// Connects to the event socket `path` of a QEMU started with [`event_args`] (which waits
    /// for this), polling while `running` says QEMU is still there, at most `wait`; once
    /// events flow, resumes the machine when `resume` (QEMU was started with `-S` for this:
    /// see [`event_args`]).
    pub fn start(path: &Path, wait: Duration, resume: bool, running: impl FnMut() -> bool) -> Result<EventWatch> {
        let stream = connect_when_listening(path, wait, running)
            .with_context(|| format!("connecting to QEMU's QMP event socket {}", path.display()))?;
        let mut q = Qmp::handshake(stream)?;
        if resume {
            q.execute("cont", json!({}))?;
        }
        q.writer.set_read_timeout(None)?;
        let shutdown = std::sync::Arc::new(std::sync::Mutex::new(None));
        let seen = shutdown.clone();
        let thread = std::thread::spawn(move || {
            while let Ok(v) = q.read() {
                if let Some(s) = shutdown_of(&v) {
                    let mut g = seen.lock().unwrap_or_else(|p| p.into_inner());
                    g.get_or_insert(s);
                }
            }
        });
        Ok(EventWatch { shutdown, thread: Some(thread) })
    }

    /// The machine's end, once QEMU has exited (joins the reader, which ends with QEMU).
    pub fn finish(mut self) -> Option<Shutdown> {
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        self.shutdown.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }
}

/// Connects to the unix socket at `path` of a QEMU server (QMP, a chardev), which QEMU binds
/// before it listens: while the path is missing or refuses (the server between the two), tries
/// again every 20 ms as long as `running()` and at most `wait`; any other error ends at once.
pub fn connect_when_listening(
    path: &Path,
    wait: Duration,
    mut running: impl FnMut() -> bool,
) -> std::io::Result<UnixStream> {
    let t0 = Instant::now();
    loop {
        match UnixStream::connect(path) {
            Err(e)
                if matches!(e.kind(), ErrorKind::NotFound | ErrorKind::ConnectionRefused)
                    && running()
                    && t0.elapsed() < wait =>
            {
                std::thread::sleep(Duration::from_millis(20))
            }
            r => return r,
        }
    }
}

/// A connected QMP session in command mode.
pub struct Qmp {
    reader: BufReader<UnixStream>,
    writer: UnixStream,
}

impl Qmp {
    /// Connects to `path` (waiting up to `wait` for QEMU to create it) and leaves capability
    /// negotiation.
    pub fn connect(path: &Path, wait: Duration) -> Result<Qmp> {
        let stream = connect_when_listening(path, wait, || true)
            .with_context(|| format!("connecting to QEMU's QMP socket {}", path.display()))?;
        Qmp::handshake(stream)
    }

    /// QEMU's greeting read and capability negotiation left, on a connected `stream` (reads
    /// wait at most 10 s each).
    fn handshake(stream: UnixStream) -> Result<Qmp> {
        stream.set_read_timeout(Some(Duration::from_secs(10)))?;
        let writer = stream.try_clone()?;
        let mut q = Qmp { reader: BufReader::new(stream), writer };
        let greeting = q.read()?;
        if greeting.get("QMP").is_none() {
            bail!("QMP: no greeting from QEMU: {greeting}");
        }
        q.execute("qmp_capabilities", json!({}))?;
        Ok(q)
    }

    fn read(&mut self) -> Result<Value> {
        let mut line = String::new();
        if self.reader.read_line(&mut line)? == 0 {
            bail!("QMP: QEMU closed the connection");
        }
        serde_json::from_str(&line).with_context(|| format!("QMP: not JSON: {line:?}"))
    }

    /// Runs `command` and returns its `return` value (events in between are skipped).
    pub fn execute(&mut self, command: &str, arguments: Value) -> Result<Value> {
        let msg = json!({ "execute": command, "arguments": arguments });
        writeln!(self.writer, "{msg}")?;
        loop {
            let v = self.read()?;
            if let Some(r) = v.get("return") {
                return Ok(r.clone());
            }
            if let Some(e) = v.get("error") {
                return Err(anyhow!("QMP {command}: {e}"));
            }
        }
    }

    /// A human-monitor command's text (`info registers -a`, …).
    pub fn hmp(&mut self, command_line: &str) -> Result<String> {
        let r = self.execute("human-monitor-command", json!({ "command-line": command_line }))?;
        Ok(r.as_str().unwrap_or_default().to_string())
    }

    /// `len` bytes of guest physical memory at `addr`.
    pub fn read_memory(&mut self, addr: u64, len: u64) -> Result<Vec<u8>> {
        let file = socket_path().with_extension("mem");
        self.execute("pmemsave", json!({ "val": addr, "size": len, "filename": file.display().to_string() }))?;
        let data = std::fs::read(&file).with_context(|| format!("reading {}", file.display()));
        let _ = std::fs::remove_file(&file);
        data
    }

    /// Every vCPU's state as `info registers -a` gives it.
    pub fn cpus(&mut self) -> Result<Vec<CpuState>> {
        Ok(parse_registers(&self.hmp("info registers -a")?))
    }
}

/// One vCPU's state.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CpuState {
    /// CPU number.
    pub cpu: usize,
    /// The program counter.
    pub pc: u64,
    /// The exception level it runs at.
    pub el: u8,
}

/// Reads `CPU#n`, ` PC=` and `PSTATE=… ELnh` out of `info registers -a`.
pub fn parse_registers(text: &str) -> Vec<CpuState> {
    let mut out: Vec<CpuState> = Vec::new();
    for line in text.lines() {
        let l = line.trim();
        if let Some(n) = l.strip_prefix("CPU#") {
            if let Ok(cpu) = n.trim().parse() {
                out.push(CpuState { cpu, pc: 0, el: 0 });
            }
        } else if let (Some(c), Some(pc)) = (out.last_mut(), l.strip_prefix("PC=")) {
            c.pc = u64::from_str_radix(pc.split_whitespace().next().unwrap_or(""), 16).unwrap_or(0);
        } else if let (Some(c), true) = (out.last_mut(), l.starts_with("PSTATE=")) {
            if let Some(el) = l.split_whitespace().find_map(|w| w.strip_prefix("EL")) {
                c.el = el.chars().next().and_then(|d| d.to_digit(10)).unwrap_or(0) as u8;
            }
        }
    }
    out
}

/// Where every vCPU is, in one line: a few samples of [`Qmp::cpus`] (a CPU that moves shows
/// every PC seen; one whose PC stays 0 was never started or is off). For a CPU inside the hypervisor
/// (EL2), the guest's PC at its last exit is read from the hypervisor's table at `guest_pcs`
/// (the `hyp_boot` record's address of `hypervisor/src/cpu.rs`'s `GUEST_PCS`, one u64 per CPU).
pub fn describe_cpus(q: &mut Qmp, guest_pcs: Option<u64>) -> Result<String> {
    let mut samples: Vec<Vec<CpuState>> = Vec::new();
    for i in 0..3 {
        if i > 0 {
            std::thread::sleep(Duration::from_millis(50));
        }
        samples.push(q.cpus()?);
    }
    let n = samples.iter().map(Vec::len).min().unwrap_or(0);
    let table = match guest_pcs {
        Some(at) if n > 0 => q.read_memory(at, 8 * n as u64).ok(),
        _ => None,
    };
    let mut parts = Vec::new();
    for c in 0..n {
        let seen: Vec<&CpuState> = samples.iter().map(|s| &s[c]).collect();
        if seen.iter().all(|s| s.pc == 0) {
            parts.push(format!("CPU {c} off"));
            continue;
        }
        let mut pcs: Vec<String> = Vec::new();
        for s in &seen {
            let p = format!("EL{} {:#x}", s.el, s.pc);
            if !pcs.contains(&p) {
                pcs.push(p);
            }
        }
        let mut line = format!("CPU {c} at {}", pcs.join(", "));
        if seen.iter().any(|s| s.el == 2) {
            let guest =
                table.as_ref().and_then(|t| t.get(8 * c..8 * c + 8)).map(|b| u64::from_le_bytes(b.try_into().unwrap()));
            match guest {
                Some(pc) if pc != 0 => {
                    line.push_str(&format!(" (in the hypervisor; the guest's PC at its last exit {pc:#x})"))
                }
                _ => line.push_str(" (in the hypervisor)"),
            }
        }
        parts.push(line);
    }
    Ok(parts.join("; "))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

    /// A unix socket bound to `path` and not yet listening (what QEMU holds between its
    /// `bind` and its `listen`).
    fn bound_only(path: &Path) -> OwnedFd {
        // SAFETY: socket() returns a new descriptor or -1 (checked); it is owned from here on.
        let fd = unsafe { libc::socket(libc::AF_UNIX, libc::SOCK_STREAM, 0) };
        assert!(fd >= 0, "socket: {}", std::io::Error::last_os_error());
        // SAFETY: `fd` was just returned by socket() and nothing else owns it.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        // SAFETY: sockaddr_un is plain old data; all-zero is a valid value to fill in.
        let mut addr: libc::sockaddr_un = unsafe { std::mem::zeroed() };
        addr.sun_family = libc::AF_UNIX as libc::sa_family_t;
        let name = path.as_os_str().as_encoded_bytes();
        assert!(name.len() < addr.sun_path.len());
        for (d, s) in addr.sun_path.iter_mut().zip(name) {
            *d = *s as libc::c_char;
        }
        let len = std::mem::size_of::<libc::sockaddr_un>() as libc::socklen_t;
        // SAFETY: `addr` is a complete sockaddr_un of `len` bytes; `fd` is an open socket.
        let r = unsafe { libc::bind(fd.as_raw_fd(), &addr as *const _ as *const libc::sockaddr, len) };
        assert_eq!(r, 0, "bind: {}", std::io::Error::last_os_error());
        fd
    }

    #[test]
    fn a_socket_bound_before_it_listens_is_waited_for_not_refused() {
        let path = std::env::temp_dir().join(format!("pgtlab-bound-{}.sock", std::process::id()));
        let _ = std::fs::remove_file(&path);
        let fd = bound_only(&path);
        assert_eq!(
            UnixStream::connect(&path).unwrap_err().kind(),
            ErrorKind::ConnectionRefused,
            "bound, not listening"
        );
        // The server listens 200 ms later; the connection waits for it (at most 10 s).
        let raw = fd.as_raw_fd();
        let server = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(200));
            // SAFETY: `raw` is the bound socket `fd`, open until this thread is joined.
            assert_eq!(unsafe { libc::listen(raw, 1) }, 0);
        });
        let got = connect_when_listening(&path, Duration::from_secs(10), || true);
        server.join().unwrap();
        assert!(got.is_ok(), "{got:?}");
        // A server that went away is not waited for: at most one try after `running` says so.
        drop(fd);
        let mut asked = 0;
        let err = connect_when_listening(&path, Duration::from_secs(10), || {
            asked += 1;
            false
        })
        .unwrap_err();
        assert_eq!((err.kind(), asked), (ErrorKind::ConnectionRefused, 1));
        let _ = std::fs::remove_file(&path);
    }

    #[test]
    fn shutdown_events_say_who_ended_the_machine() {
        let off = json!({"event": "SHUTDOWN", "data": {"guest": true, "reason": "guest-shutdown"}});
        let s = shutdown_of(&off).unwrap();
        assert!(s.powered_off() && !s.reset());
        let reset = json!({"event": "SHUTDOWN", "data": {"guest": true, "reason": "guest-reset"}});
        assert!(shutdown_of(&reset).unwrap().reset());
        let signal = json!({"event": "SHUTDOWN", "data": {"guest": false, "reason": "host-signal"}});
        let s = shutdown_of(&signal).unwrap();
        assert!(!s.powered_off() && !s.reset());
        assert_eq!(shutdown_of(&json!({"event": "RESUME"})), None);
        assert_eq!(shutdown_of(&json!({"return": {}})), None);
    }

    #[test]
    fn registers_of_every_cpu_are_read() {
        let text = "\r\nCPU#0\r\n PC=0000000040080000 X00=0000000040000000 X01=0000000000000000\r\n\
                    X02=0\r\nPSTATE=000003c5 ---- EL1h  SVCR=00000000 --  BTYPE=0    FPU disabled\r\n\r\n\
                    CPU#1\r\n PC=0000000000000000 X00=0\r\nPSTATE=400003c9 -Z-- EL2h  SVCR=00000000\r\n";
        assert_eq!(
            parse_registers(text),
            [CpuState { cpu: 0, pc: 0x4008_0000, el: 1 }, CpuState { cpu: 1, pc: 0, el: 2 }]
        );
        assert!(parse_registers("garbage").is_empty());
    }
}
