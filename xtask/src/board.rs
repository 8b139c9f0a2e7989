//! The machines `cargo xtask run --board B` boots: QEMU's `virt` (its DTB written by QEMU) and
//! QEMU's models of real boards, each fed the board's own DTB from Debian's backports arm64
//! kernel package (`crate::debian::file_from_kernel_package`), as its firmware or U-Boot would
//! pass it. One table: the QEMU machine, the QEMU version it needs, the CPUs and RAM the model
//! has, where the DTB's console (`/chosen/stdout-path`) is on QEMU's serial ports, and Linux's
//! console name.

/// A machine to boot.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Board {
    /// QEMU `virt` (GICv2 or v3, any CPU model, up to 8 CPUs): QEMU writes the DTB.
    #[default]
    Virt,
    /// Raspberry Pi 4 Model B (`-M raspi4b`): 4 Cortex-A72 (fixed), 2 GiB (fixed; QEMU's DTB
    /// gives the guest the 960 MiB below the VideoCore's memory), GIC-400, spin-table, no PSCI
    /// firmware, console on the mini UART (`serial1` = QEMU's second serial port).
    Pi4,
    /// Xilinx ZCU102 (`-M xlnx-zcu102,virtualization=on`): 4 Cortex-A53 at EL2, GIC-400, PSCI
    /// over SMC answered by QEMU, console on the first Cadence UART.
    Zcu102,
    /// NXP i.MX 8M Plus EVK (`-M imx8mp-evk`): 4 Cortex-A53 at EL2, GICv3, PSCI over SMC
    /// answered by QEMU, console on the second i.MX UART (`-serial null -serial stdio`).
    Imx8mpEvk,
}

/// The Pi 4 Linux console's baud rate (`Board::linux_console`). QEMU's model of the mini UART
/// (hw/char/bcm2835_aux.c, 10.0.2) ignores LCR.DLAB: when Linux's 8250 driver sets the baud
/// rate it writes the divisor latch, whose low byte QEMU sends as a character and whose high
/// byte lands in IER. At 115200 the divisor is 610 (0x262): IER = 0x02, the THR-empty
/// interrupt, which the model raises whenever it is enabled (its transmitter is always empty),
/// while the driver's own copy of IER says it is off, so its handler never turns it off: a
/// level interrupt stuck high on CPU 0 from the moment Linux opens the console until a user
/// program writes to it (RCU stalls, soft lockups; ~250 s to user space under the hypervisor,
/// tens of seconds alone, the same storm). At 230400 the divisor is 305 (0x131): IER = 0x01,
/// the receive interrupt, raised only when input is waiting; the real mini UART honours DLAB
/// and takes any rate. [`MINI_UART_BASE_BAUD`] is what Linux reports for the port on the model.
pub const PI4_LINUX_BAUD: u32 = 230_400;

/// The mini UART's `base_baud` as Linux's `8250_bcm2835aux` reports it on QEMU's raspi4b
/// (`fe215040.serial: ttyS1 at MMIO 0xfe215040 (irq = 23, base_baud = 70312500)`).
pub const MINI_UART_BASE_BAUD: u32 = 70_312_500;

/// What QEMU 10's mini UART model takes as IER after Linux's 8250 driver programs `baud`
/// from `base_baud`: the divisor latch's high byte (DLAB is ignored), of which it keeps bits 0
/// (receive interrupt) and 1 (THR-empty interrupt, always pending on the model).
pub fn qemu_mini_uart_ier_after_baud(base_baud: u32, baud: u32) -> u32 {
    // Linux: uart_get_divisor = DIV_ROUND_CLOSEST(uartclk, 16 * baud), uartclk = 16 * base_baud.
    let divisor = (base_baud + baud / 2) / baud;
    (divisor >> 8) & 0x3
}

/// How a board's CPU count is given to QEMU.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Smp {
    /// Any count from 1 to this.
    UpTo(u32),
    /// The model always has exactly this many (QEMU refuses `-smp` otherwise).
    Fixed(u32),
}

/// How a board's RAM is given to QEMU.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ram {
    /// Any whole number of MiB up to this many bytes.
    UpTo(u64),
    /// The model always has this many bytes.
    Fixed(u64),
}

/// One GiB.
pub const GIB: u64 = 1 << 30;

impl Board {
    /// Every board, `virt` first.
    pub const ALL: [Board; 4] = [Board::Virt, Board::Pi4, Board::Zcu102, Board::Imx8mpEvk];

    /// The name users give (`--board NAME`).
    pub fn name(self) -> &'static str {
        match self {
            Board::Virt => "virt",
            Board::Pi4 => "pi4",
            Board::Zcu102 => "zcu102",
            Board::Imx8mpEvk => "imx8mp-evk",
        }
    }

    /// The board named `s` (its name, or the QEMU machine's: `raspi4b`, `xlnx-zcu102`).
    pub fn from_name(s: &str) -> Option<Board> {
        let s = s.to_ascii_lowercase();
        Board::ALL.into_iter().find(|b| b.name() == s || b.qemu_machine() == s).or(match s.as_str() {
            "rpi4" | "raspberrypi4" | "pi4b" => Some(Board::Pi4),
            "imx8mp" => Some(Board::Imx8mpEvk),
            _ => None,
        })
    }

    /// The names, for messages.
    pub fn names() -> String {
        Board::ALL.iter().map(|b| b.name()).collect::<Vec<_>>().join(", ")
    }

    /// What it is, for messages and the README's table.
    pub fn description(self) -> &'static str {
        match self {
            Board::Virt => "QEMU virt (its own DTB)",
            Board::Pi4 => "Raspberry Pi 4 Model B",
            Board::Zcu102 => "Xilinx ZynqMP ZCU102",
            Board::Imx8mpEvk => "NXP i.MX 8M Plus EVK",
        }
    }

    /// QEMU's machine type.
    pub fn qemu_machine(self) -> &'static str {
        match self {
            Board::Virt => "virt",
            Board::Pi4 => "raspi4b",
            Board::Zcu102 => "xlnx-zcu102",
            Board::Imx8mpEvk => "imx8mp-evk",
        }
    }

    /// The oldest QEMU with the model (raspi4b came in 9.0, imx8mp-evk in 9.1; xlnx-zcu102 is
    /// older but only 10.0 is tested with the backports DTB).
    pub fn min_qemu(self) -> crate::qemu_pkg::Version {
        use crate::qemu_pkg::Version;
        match self {
            Board::Virt => Version(7, 2, 0),
            Board::Pi4 => Version(9, 0, 0),
            Board::Zcu102 => Version(10, 0, 0),
            Board::Imx8mpEvk => Version(9, 1, 0),
        }
    }

    /// The board's DTB in Debian's kernel package (`None`: QEMU writes it).
    pub fn dtb(self) -> Option<&'static str> {
        match self {
            Board::Virt => None,
            Board::Pi4 => Some("broadcom/bcm2711-rpi-4-b.dtb"),
            Board::Zcu102 => Some("xilinx/zynqmp-zcu102-rev1.0.dtb"),
            Board::Imx8mpEvk => Some("freescale/imx8mp-evk.dtb"),
        }
    }

    /// The CPU model the board has (`None`: `virt` takes `--cpu`).
    pub fn cpu(self) -> Option<&'static str> {
        match self {
            Board::Virt => None,
            Board::Pi4 => Some("cortex-a72"),
            Board::Zcu102 | Board::Imx8mpEvk => Some("cortex-a53"),
        }
    }

    /// The interrupt controller the board has (`None`: `virt` takes `--gic`).
    pub fn gic(self) -> Option<u8> {
        match self {
            Board::Virt => None,
            Board::Pi4 | Board::Zcu102 => Some(2),
            Board::Imx8mpEvk => Some(3),
        }
    }

    /// CPUs. The ZCU102 model's `-smp` counts its Cortex-R5Fs too past 4; only the A53s are
    /// given here. The i.MX 8M Plus model makes as many A53s as `-smp` says (default 1: with
    /// fewer CPUs than its DTB lists, QEMU's PSCI refuses CPU_ON for the missing ones with
    /// INVALID_PARAMETERS), so `-smp` is always passed.
    pub fn smp(self) -> Smp {
        match self {
            Board::Virt => Smp::UpTo(8),
            Board::Pi4 => Smp::Fixed(4),
            Board::Zcu102 | Board::Imx8mpEvk => Smp::UpTo(4),
        }
    }

    /// RAM. ZCU102: QEMU's boot code writes one memory node from 0 for all of `-m`, but past
    /// 2 GiB the model's RAM continues at 0x8_0000_0000 (the DTB would then call the devices
    /// below 4 GiB RAM), so 2 GiB at most. i.MX 8M Plus: from 0x4000_0000, 3 GiB at most.
    pub fn ram(self) -> Ram {
        match self {
            Board::Virt => Ram::UpTo(1 << 40),
            Board::Pi4 => Ram::Fixed(2 * GIB),
            Board::Zcu102 => Ram::UpTo(2 * GIB),
            Board::Imx8mpEvk => Ram::UpTo(3 * GIB),
        }
    }

    /// Where the model's RAM starts: QEMU's loader places its boot stub there and an Image
    /// (`text_offset` 0) 2 MiB above (`hypcore::load`). `virt` and the i.MX 8M Plus from 1 GiB,
    /// the Pi 4 and the ZCU102 from 0.
    pub fn ram_base(self) -> u64 {
        match self {
            Board::Virt | Board::Imx8mpEvk => GIB,
            Board::Pi4 | Board::Zcu102 => 0,
        }
    }

    /// RAM when `--mem` is not given: `virt` 1 GiB, the boards 2 GiB.
    pub fn default_mem(self) -> &'static str {
        match self {
            Board::Virt => "1G",
            _ => "2G",
        }
    }

    /// QEMU's serial ports: the DTB's console (`/chosen/stdout-path`) on stdio, the ports
    /// before it to `null`. `virt`: `-nographic` does it (serial 0 and the monitor on stdio).
    pub fn console_args(self) -> Vec<String> {
        match self {
            Board::Virt => vec!["-nographic".into()],
            b => b.serial_args("stdio"),
        }
    }

    /// Which of QEMU's serial ports (`-serial`, in order) carries the DTB's console.
    pub fn console_port(self) -> usize {
        match self {
            // stdout-path = serial1 = the mini UART (QEMU's second port); the PL011 is the first.
            Board::Pi4 => 1,
            Board::Virt | Board::Zcu102 => 0,
            // stdout-path = serial1 = UART2.
            Board::Imx8mpEvk => 1,
        }
    }

    /// No display, monitor or audio, and the DTB's console on `console` (`stdio`,
    /// `chardev:ID`, ...), the serial ports before it to `null`.
    pub fn serial_args(self, console: &str) -> Vec<String> {
        let mut a: Vec<String> = ["-display", "none", "-monitor", "none"].map(String::from).into();
        if self != Board::Virt {
            // QEMU 7.2 (virt's) has no -audio; the boards' QEMU does.
            a.extend(["-audio".into(), "none".into()]);
        }
        for _ in 0..self.console_port() {
            a.extend(["-serial".into(), "null".into()]);
        }
        a.extend(["-serial".into(), console.into()]);
        a
    }

    /// Linux's command line for its console on this board (`console=` and what the model
    /// needs). ZCU102: the model has no PMU firmware, so the Cadence UART's clocks never come
    /// and `ttyPS0` never registers: the early console stays on (`keep_bootcon`) and `/init`,
    /// without a console, writes through `/dev/kmsg` (no timestamps, no rate limit). Pi 4: the
    /// model lacks the always-on block at 0xfef00000 (an access is an external abort): its
    /// drivers (the AON interrupt controller, the HDMI I2C, the DVP clock) stay out, and unused
    /// clocks are left alone (the clock framework would read the missing DVP gate); the console
    /// runs at [`PI4_LINUX_BAUD`] (why: there).
    pub fn linux_console(self) -> &'static str {
        match self {
            Board::Virt => "console=ttyAMA0",
            Board::Pi4 => {
                "console=ttyS1,230400 clk_ignore_unused \
                 initcall_blacklist=brcmstb_l2_driver_init,brcmstb_i2c_driver_init,clk_dvp_driver_init"
            }
            Board::Zcu102 => "console=ttyPS0,115200 earlycon keep_bootcon printk.time=0 printk.devkmsg=on",
            Board::Imx8mpEvk => "console=ttymxc1,115200",
        }
    }

    /// `-M` for this board: `virt` with its GIC version and options; the others as they are
    /// (the ZCU102 with EL2, `virtualization=on`, unless booting a kernel alone at EL1).
    pub fn machine(self, gic: u8, virtualization: bool, mte: bool) -> String {
        match self {
            Board::Virt => {
                let mut m = format!("virt,gic-version={gic}");
                if virtualization {
                    m.push_str(",virtualization=on");
                }
                if mte {
                    m.push_str(",mte=on");
                }
                m
            }
            Board::Zcu102 if virtualization => "xlnx-zcu102,virtualization=on".into(),
            b => b.qemu_machine().into(),
        }
    }

    /// Refuses what this board's model cannot be: another CPU model or GIC, a CPU count or a
    /// RAM size the model does not have, MTE.
    pub fn check(self, cpu: &str, gic: u8, smp: u32, mem_bytes: u64, mte: bool) -> Result<(), String> {
        if self == Board::Virt {
            return Ok(());
        }
        let name = self.name();
        if let Some(c) = self.cpu() {
            if cpu != c {
                return Err(format!("--board {name} has {c} CPUs (QEMU's model fixes them): --cpu {cpu} is not one"));
            }
        }
        if let Some(g) = self.gic() {
            if gic != g {
                return Err(format!("--board {name} has a GICv{g}: --gic {gic} is not what the board has"));
            }
        }
        match self.smp() {
            Smp::Fixed(n) if smp != n => {
                return Err(format!(
                    "--board {name} always has {n} CPUs (QEMU refuses --smp {smp}); give the guest fewer with \
                     --bootargs hyp.cpus=N"
                ))
            }
            Smp::UpTo(n) if smp > n => return Err(format!("--board {name} has at most {n} CPUs (--smp {smp})")),
            _ => {}
        }
        match self.ram() {
            Ram::Fixed(b) if mem_bytes != b => {
                return Err(format!("--board {name} always has {} MiB of RAM (--mem {} MiB)", b >> 20, mem_bytes >> 20))
            }
            Ram::UpTo(b) if mem_bytes > b => {
                return Err(format!(
                    "--board {name} takes at most {} MiB of RAM (--mem {} MiB)",
                    b >> 20,
                    mem_bytes >> 20
                ))
            }
            _ => {}
        }
        if mte {
            return Err(format!("--board {name}: --mte is a virt option (the board's cores have no MTE)"));
        }
        Ok(())
    }
}

impl std::fmt::Display for Board {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_aliases_resolve() {
        for b in Board::ALL {
            assert_eq!(Board::from_name(b.name()), Some(b));
            assert_eq!(Board::from_name(b.qemu_machine()), Some(b));
        }
        assert_eq!(Board::from_name("raspi4b"), Some(Board::Pi4));
        assert_eq!(Board::from_name("IMX8MP"), Some(Board::Imx8mpEvk));
        assert_eq!(Board::from_name("pi5"), None);
        assert_eq!(Board::names(), "virt, pi4, zcu102, imx8mp-evk");
    }

    #[test]
    fn console_goes_to_stdio_on_the_port_the_dtb_names() {
        assert_eq!(Board::Virt.console_args(), ["-nographic"]);
        let a = Board::Imx8mpEvk.console_args();
        let ports: Vec<&str> = a.windows(2).filter(|w| w[0] == "-serial").map(|w| w[1].as_str()).collect();
        assert_eq!(ports, ["null", "stdio"]);
        let a = Board::Zcu102.console_args();
        assert_eq!(a.iter().filter(|x| *x == "-serial").count(), 1);
        let a = Board::Pi4.serial_args("chardev:s");
        let ports: Vec<&str> = a.windows(2).filter(|w| w[0] == "-serial").map(|w| w[1].as_str()).collect();
        assert_eq!(ports, ["null", "chardev:s"]);
        assert_eq!(Board::Virt.serial_args("pty"), ["-display", "none", "-monitor", "none", "-serial", "pty"]);
        assert!(a.contains(&"-monitor".to_string()), "no monitor on stdio: the console is the only thing there");
    }

    #[test]
    fn each_board_refuses_what_its_model_does_not_have() {
        assert!(Board::Virt.check("cortex-a76", 2, 8, 16 * GIB, true).is_ok());
        assert!(Board::Pi4.check("cortex-a72", 2, 4, 2 * GIB, false).is_ok());
        assert!(Board::Pi4.check("max", 2, 4, 2 * GIB, false).unwrap_err().contains("cortex-a72"));
        let e = Board::Pi4.check("cortex-a72", 2, 1, 2 * GIB, false).unwrap_err();
        assert!(e.contains("always has 4 CPUs") && e.contains("hyp.cpus"), "{e}");
        assert!(Board::Pi4.check("cortex-a72", 2, 4, GIB, false).unwrap_err().contains("2048 MiB"));
        assert!(Board::Pi4.check("cortex-a72", 3, 4, 2 * GIB, false).unwrap_err().contains("GICv2"));
        assert!(Board::Zcu102.check("cortex-a72", 2, 4, GIB, false).unwrap_err().contains("cortex-a53"));
        assert!(Board::Zcu102.check("cortex-a53", 2, 1, 2 * GIB, false).is_ok());
        assert!(Board::Zcu102.check("cortex-a53", 2, 4, 4 * GIB, false).unwrap_err().contains("at most 2048 MiB"));
        assert!(Board::Imx8mpEvk.check("cortex-a53", 3, 5, GIB, false).unwrap_err().contains("at most 4 CPUs"));
        assert!(Board::Imx8mpEvk.check("cortex-a53", 3, 4, GIB, true).unwrap_err().contains("--mte"));
    }

    /// The Pi 4 Linux console's rate leaves QEMU's mini UART without its always-pending
    /// THR-empty interrupt (bit 1), and the command line uses that rate. Seeded: with
    /// `console=ttyS1,115200` (before) this fails, and Linux took ~250 s to user space.
    #[test]
    fn pi4_linux_console_rate_leaves_the_mini_uart_quiet() {
        let words = Board::Pi4.linux_console();
        let baud: u32 = words
            .split_whitespace()
            .find_map(|w| w.strip_prefix("console=ttyS1,"))
            .and_then(|b| b.parse().ok())
            .expect("console=ttyS1,BAUD");
        assert_eq!(baud, PI4_LINUX_BAUD);
        assert_eq!(qemu_mini_uart_ier_after_baud(MINI_UART_BASE_BAUD, baud) & 0x2, 0, "{baud} enables THR-empty");
        // The rate Linux was given before: divisor 0x262, IER 0x02.
        assert_eq!(qemu_mini_uart_ier_after_baud(MINI_UART_BASE_BAUD, 115_200), 0x2);
        assert_eq!(qemu_mini_uart_ier_after_baud(MINI_UART_BASE_BAUD, 230_400), 0x1);
    }

    #[test]
    fn machine_strings() {
        assert_eq!(Board::Virt.machine(3, true, true), "virt,gic-version=3,virtualization=on,mte=on");
        assert_eq!(Board::Virt.machine(2, false, false), "virt,gic-version=2");
        assert_eq!(Board::Zcu102.machine(2, true, false), "xlnx-zcu102,virtualization=on");
        assert_eq!(Board::Zcu102.machine(2, false, false), "xlnx-zcu102");
        assert_eq!(Board::Pi4.machine(2, true, false), "raspi4b");
        assert!(Board::ALL.iter().all(|b| (b.dtb().is_none()) == (*b == Board::Virt)));
        for b in Board::ALL {
            if let Some(d) = b.dtb() {
                assert!(crate::debian::KERNEL_PACKAGE_FILES.contains(&d), "{d} is fetched with the kernel package");
            }
        }
    }
}
