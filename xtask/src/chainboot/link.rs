//! The host end of the serial line: a tty (a USB serial adapter, or a pty such as QEMU's
//! `-serial pty`) set to raw mode at a baud rate, or a Unix socket (QEMU's `-chardev socket`).

use anyhow::{bail, Context, Result};
use std::fs::{File, OpenOptions};
use std::io::{Read, Write};
use std::os::fd::AsRawFd;
use std::os::unix::fs::OpenOptionsExt;
use std::os::unix::net::UnixStream;
use std::path::Path;

/// Both directions of a line.
pub struct Link {
    /// Bytes from the board.
    pub reader: Box<dyn Read + Send>,
    /// Bytes to the board.
    pub writer: Box<dyn Write + Send>,
    /// What it is, for messages.
    pub describe: String,
}

/// Baud rates the Linux termios interface names (`Bnnn`).
const RATES: [(u32, libc::speed_t); 19] = [
    (9600, libc::B9600),
    (19200, libc::B19200),
    (38400, libc::B38400),
    (57600, libc::B57600),
    (115_200, libc::B115200),
    (230_400, libc::B230400),
    (460_800, libc::B460800),
    (500_000, libc::B500000),
    (576_000, libc::B576000),
    (921_600, libc::B921600),
    (1_000_000, libc::B1000000),
    (1_152_000, libc::B1152000),
    (1_500_000, libc::B1500000),
    (2_000_000, libc::B2000000),
    (2_500_000, libc::B2500000),
    (3_000_000, libc::B3000000),
    (3_500_000, libc::B3500000),
    (4_000_000, libc::B4000000),
    (4_800, libc::B4800),
];

/// The termios constant for `baud`, or an error listing the supported rates.
pub fn speed(baud: u32) -> Result<libc::speed_t> {
    match RATES.iter().find(|(b, _)| *b == baud) {
        Some(&(_, s)) => Ok(s),
        None => {
            let mut all: Vec<u32> = RATES.iter().map(|r| r.0).collect();
            all.sort();
            bail!("{baud} baud is not a rate a Linux tty can be set to; use one of {all:?}")
        }
    }
}

/// Parses a `--baud` value (a clap value parser): a rate a Linux tty can be set to.
pub fn baud_arg(s: &str) -> std::result::Result<u32, String> {
    let baud: u32 = s.parse().map_err(|e| format!("{s:?} is not a baud rate: {e}"))?;
    speed(baud).map_err(|e| e.to_string())?;
    Ok(baud)
}

/// Opens `spec`: `unix:PATH` for a Unix socket, else a tty device path.
pub fn open(spec: &str, baud: u32) -> Result<Link> {
    if let Some(path) = spec.strip_prefix("unix:") {
        let s = UnixStream::connect(path).with_context(|| format!("connecting to the socket {path}"))?;
        let r = s.try_clone()?;
        return Ok(Link { reader: Box::new(r), writer: Box::new(s), describe: format!("socket {path}") });
    }
    let f = open_tty(Path::new(spec), baud)?;
    let r = f.try_clone()?;
    Ok(Link { reader: Box::new(r), writer: Box::new(f), describe: format!("{spec} at {baud} baud") })
}

/// Opens a tty in raw mode, 8N1, no flow control, at `baud`.
pub fn open_tty(path: &Path, baud: u32) -> Result<File> {
    let speed = speed(baud)?;
    let f = OpenOptions::new()
        .read(true)
        .write(true)
        .custom_flags(libc::O_NOCTTY)
        .open(path)
        .with_context(|| format!("opening {} (is it the board's serial adapter, and may you use it? `ls -l` it; on Debian add yourself to the dialout group)", path.display()))?;
    let fd = f.as_raw_fd();
    // SAFETY: termios is plain old data; tcgetattr fills it for a valid fd (checked below).
    let mut t: libc::termios = unsafe { std::mem::zeroed() };
    // SAFETY: `fd` is open for the life of `f`; `t` is a valid termios to fill.
    if unsafe { libc::tcgetattr(fd, &mut t) } != 0 {
        bail!("{} is not a terminal (tcgetattr: {})", path.display(), std::io::Error::last_os_error());
    }
    // SAFETY: cfmakeraw and cfset*speed only edit the struct we own.
    unsafe {
        libc::cfmakeraw(&mut t);
        libc::cfsetispeed(&mut t, speed);
        libc::cfsetospeed(&mut t, speed);
    }
    t.c_cflag |= libc::CLOCAL | libc::CREAD;
    t.c_cflag &= !(libc::CRTSCTS | libc::CSTOPB | libc::PARENB);
    t.c_cc[libc::VMIN] = 1;
    t.c_cc[libc::VTIME] = 0;
    // SAFETY: `fd` is a terminal (tcgetattr succeeded) and `t` a complete termios.
    if unsafe { libc::tcsetattr(fd, libc::TCSANOW, &t) } != 0 {
        bail!("cannot set {} to raw {baud} baud: {}", path.display(), std::io::Error::last_os_error());
    }
    // Drop whatever was queued before we owned the line.
    // SAFETY: a valid terminal fd; tcflush only discards queued data.
    unsafe { libc::tcflush(fd, libc::TCIOFLUSH) };
    Ok(f)
}

/// A new pty: its master end and the path of its slave (tests).
#[cfg(test)]
pub fn pty() -> (File, String) {
    // SAFETY: posix_openpt returns a new fd or -1; grantpt/unlockpt/ptsname act on it, and the
    // fd is owned by the returned File from then on.
    unsafe {
        let m = libc::posix_openpt(libc::O_RDWR | libc::O_NOCTTY);
        assert!(m >= 0);
        assert_eq!(libc::grantpt(m), 0);
        assert_eq!(libc::unlockpt(m), 0);
        let n = std::ffi::CStr::from_ptr(libc::ptsname(m)).to_string_lossy().into_owned();
        (<File as std::os::fd::FromRawFd>::from_raw_fd(m), n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn standard_rates_only() {
        assert_eq!(speed(115_200).unwrap(), libc::B115200);
        assert_eq!(speed(921_600).unwrap(), libc::B921600);
        let e = speed(100_000).unwrap_err().to_string();
        assert!(e.contains("100000 baud") && e.contains("115200"), "{e}");
    }

    #[test]
    fn a_pty_opens_raw_and_carries_bytes() {
        let (master, name) = pty();
        let mut link = open(&name, 921_600).unwrap();
        assert!(link.describe.contains("921600 baud"));
        // Raw: no echo, no CR/LF translation, bytes as they are (0x03 is not an interrupt).
        (&master).write_all(b"a\r\n\x03\xff").unwrap();
        let mut got = [0u8; 5];
        link.reader.read_exact(&mut got).unwrap();
        assert_eq!(&got, b"a\r\n\x03\xff");
        link.writer.write_all(b"\n\x00z").unwrap();
        let mut back = [0u8; 3];
        (&master).read_exact(&mut back).unwrap();
        assert_eq!(&back, b"\n\x00z");
        assert!(open("/dev/null", 115_200).is_err(), "not a terminal");
    }
}
