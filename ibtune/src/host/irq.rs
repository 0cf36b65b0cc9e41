//! Interrupts: `/proc/interrupts`, a device's MSI vectors and the affinity
//! of each IRQ under `/proc/irq/N/`.
//!
//! Why it exists: pinning an HCA's completion vectors next to the real-time
//! cores (and keeping them off those cores) is the single largest latency
//! lever the thesis measured, so ibtune has to know exactly which IRQs belong
//! to which device and where each one is allowed to run.

use super::cpulist::CpuSet;
use super::model::Irq;
use super::root::HostRoot;

/// One numbered line of `/proc/interrupts`.
///
/// Why it exists: both IRQ discovery (names for MSI vectors, the fallback
/// search by name) and ibexporter's per-CPU interrupt counts read the same
/// table, so it is parsed once into this shape.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InterruptLine {
    /// IRQ number (the label before the colon).
    pub irq: u32,
    /// Per-CPU counts, in CPU column order.
    pub counts: Vec<u64>,
    /// Interrupt chip (`IR-PCI-MSIX-0000:41:00.0`, `IO-APIC`, ...).
    pub chip: String,
    /// Action name(s), e.g. `mlx5_comp3@pci:0000:41:00.0`; may be empty.
    pub name: String,
}

/// True for the hwirq/trigger column (`5-edge`, `1048576-edge`, `level`)
/// that sits between the chip and the action names.
fn is_trigger_token(t: &str) -> bool {
    matches!(t, "edge" | "level" | "-edge" | "-level")
        || t.ends_with("-edge")
        || t.ends_with("-level")
        || t.ends_with("-virq")
        || t.ends_with("-fasteoi")
}

/// Parses the text of `/proc/interrupts`.
///
/// Lines whose label is not a number (`NMI`, `LOC`, `ERR`, ...) are skipped,
/// as is anything that does not look like an interrupt line. The number of
/// count columns comes from the `CPU0 CPU1 ...` header when there is one.
/// Never panics, whatever the input.
pub fn parse_interrupts(text: &str) -> Vec<InterruptLine> {
    parse_interrupts_checked(text).0
}

/// [`parse_interrupts`], plus one problem per line that is not what the
/// kernel writes (no header, a line without `label:`, a numbered IRQ with
/// the wrong number of counts or a repeated number, a label that is not a
/// short word). Such lines are read as before; the problems let `show`,
/// `plan` and `apply` warn that the IRQ set may be wrong.
///
/// Why it exists: a damaged `/proc/interrupts` (a snapshot edited by hand,
/// a tree built by someone else) must not change which IRQs are pinned
/// without a word.
pub fn parse_interrupts_checked(text: &str) -> (Vec<InterruptLine>, Vec<String>) {
    let mut ncpus: Option<usize> = None;
    let mut out: Vec<InterruptLine> = Vec::new();
    let mut problems = Vec::new();
    let mut problem = |n: usize, line: &str, why: &str| {
        if problems.len() < MAX_PROBLEMS {
            let shown: String = line.trim().chars().take(60).collect();
            problems.push(format!("/proc/interrupts line {n}: {why}: {shown:?}"));
        }
    };
    for (n, line) in text.lines().enumerate().map(|(i, l)| (i + 1, l)) {
        let trimmed = line.trim();
        if trimmed.is_empty() {
            continue;
        }
        let Some((label, rest)) = trimmed.split_once(':') else {
            // The header: "CPU0 CPU1 ...".
            if ncpus.is_none() && trimmed.split_whitespace().all(|t| t.starts_with("CPU")) {
                ncpus = Some(trimmed.split_whitespace().count());
            } else {
                problem(n, line, "not a header and no 'label:'");
            }
            continue;
        };
        if ncpus.is_none() {
            problem(n, line, "comes before the CPU header");
        }
        let Ok(irq) = label.trim().parse::<u32>() else {
            let l = label.trim();
            if l.is_empty() || l.len() > 8 || !l.chars().all(|c| c.is_ascii_alphanumeric()) {
                problem(
                    n,
                    line,
                    "the label is neither an IRQ number nor a short word",
                );
            }
            continue;
        };
        let mut tokens = rest.split_whitespace().peekable();
        let mut counts = Vec::new();
        while let Some(t) = tokens.peek() {
            if ncpus.is_some_and(|n| counts.len() >= n) {
                break;
            }
            match t.parse::<u64>() {
                Ok(v) => {
                    counts.push(v);
                    tokens.next();
                }
                Err(_) => break,
            }
        }
        if ncpus.is_some_and(|c| counts.len() != c) {
            problem(
                n,
                line,
                "the number of per-CPU counts differs from the header",
            );
        }
        if out.iter().any(|l| l.irq == irq) {
            problem(n, line, "this IRQ number was listed before");
        }
        let chip = tokens.next().unwrap_or_default().to_string();
        let mut rest: Vec<&str> = tokens.collect();
        if rest.first().is_some_and(|t| is_trigger_token(t)) {
            rest.remove(0);
        }
        out.push(InterruptLine {
            irq,
            counts,
            chip,
            name: rest.join(" "),
        });
    }
    (out, problems)
}

/// Reads `/proc/interrupts` and parses it; empty when unreadable.
///
/// Why it exists: discovery reads the table once and hands it to every
/// device, instead of each device re-reading it.
pub fn read_interrupts(root: &HostRoot) -> (Vec<InterruptLine>, Vec<String>) {
    match root.read("/proc/interrupts") {
        Ok(t) => parse_interrupts_checked(&t),
        Err(e) => (
            Vec::new(),
            vec![format!("{e}: IRQs are found from msi_irqs only")],
        ),
    }
}

/// At most this many problems are reported for one `/proc/interrupts`.
const MAX_PROBLEMS: usize = 20;

/// The CPUs an IRQ may run on: `/proc/irq/N/smp_affinity_list`, falling back
/// to the hex mask in `smp_affinity`.
///
/// Why it exists: verify and drift checks compare affinities as sets, and
/// some kernels or snapshots only carry the mask form.
pub fn read_irq_affinity(root: &HostRoot, irq: u32) -> Option<CpuSet> {
    read_list_or_mask(
        root,
        &format!("/proc/irq/{irq}/smp_affinity_list"),
        &format!("/proc/irq/{irq}/smp_affinity"),
    )
}

/// The CPUs an IRQ actually fires on (`effective_affinity_list`, or the
/// `effective_affinity` mask), when the kernel reports it.
///
/// Why it exists: with managed IRQs the requested affinity and the effective
/// one differ; verify shows both.
pub fn read_irq_effective_affinity(root: &HostRoot, irq: u32) -> Option<CpuSet> {
    read_list_or_mask(
        root,
        &format!("/proc/irq/{irq}/effective_affinity_list"),
        &format!("/proc/irq/{irq}/effective_affinity"),
    )
}

fn read_list_or_mask(root: &HostRoot, list: &str, mask: &str) -> Option<CpuSet> {
    if let Some(t) = root.read_opt(list) {
        if let Ok(s) = CpuSet::parse_list(&t) {
            return Some(s);
        }
    }
    root.read_opt(mask)
        .and_then(|t| CpuSet::parse_mask(&t).ok())
}

/// True when an interrupt name belongs to a device called `dev_name`: it
/// starts with the name and the name is not merely a prefix of a longer
/// device number (`mlx5_1` must not claim `mlx5_10`'s vectors).
fn name_starts_with_device(name: &str, dev_name: &str) -> bool {
    if dev_name.is_empty() {
        return false;
    }
    match name.strip_prefix(dev_name) {
        Some(rest) => !rest.starts_with(|c: char| c.is_ascii_digit()),
        None => false,
    }
}

/// The interrupts of one RDMA device.
///
/// Preferred source: the PCI function's `msi_irqs/` directory (under
/// `/sys/class/infiniband/<dev>/device/`, or `/sys/bus/pci/devices/<pci>/`),
/// with names joined from `/proc/interrupts` (`source = "msi_irqs"`).
/// Fallback, for kernels or snapshots without it: the `/proc/interrupts`
/// lines whose name contains the PCI address or starts with the device name
/// (`source = "proc_interrupts"`). Each IRQ carries its affinity and
/// effective affinity; `is_async` marks the async/event vector.
pub fn device_irqs(
    root: &HostRoot,
    pci_addr: Option<&str>,
    dev_name: &str,
    lines: &[InterruptLine],
) -> Vec<Irq> {
    let mut msi: Vec<u32> = Vec::new();
    let mut dirs = Vec::new();
    if !dev_name.is_empty() && !dev_name.contains('/') && dev_name != ".." {
        dirs.push(format!("/sys/class/infiniband/{dev_name}/device/msi_irqs"));
    }
    if let Some(p) = pci_addr.filter(|p| !p.is_empty() && !p.contains('/') && *p != "..") {
        dirs.push(format!("/sys/bus/pci/devices/{p}/msi_irqs"));
    }
    for d in &dirs {
        msi = root
            .list(d)
            .iter()
            .filter_map(|n| n.parse::<u32>().ok())
            .collect();
        if !msi.is_empty() {
            break;
        }
    }
    msi.sort_unstable();
    msi.dedup();

    let found: Vec<(u32, Option<String>, &str)> = if !msi.is_empty() {
        msi.into_iter()
            .map(|irq| {
                let name = lines
                    .iter()
                    .find(|l| l.irq == irq)
                    .map(|l| l.name.clone())
                    .filter(|n| !n.is_empty());
                (irq, name, "msi_irqs")
            })
            .collect()
    } else {
        let mut v: Vec<(u32, Option<String>, &str)> = lines
            .iter()
            .filter(|l| {
                pci_addr.is_some_and(|p| !p.is_empty() && l.name.contains(p))
                    || name_starts_with_device(&l.name, dev_name)
            })
            .map(|l| (l.irq, Some(l.name.clone()), "proc_interrupts"))
            .collect();
        v.sort_by_key(|x| x.0);
        v.dedup_by_key(|x| x.0);
        v
    };

    found
        .into_iter()
        .map(|(irq, name, source)| Irq {
            irq,
            is_async: name.as_deref().is_some_and(|n| n.contains("async")),
            name,
            source: source.to_string(),
            affinity: read_irq_affinity(root, irq),
            effective_affinity: read_irq_effective_affinity(root, irq),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const SAMPLE: &str = "           CPU0       CPU1       CPU2       CPU3       \n\
  0:         44          0          0          0   IO-APIC   2-edge      timer\n\
  9:          0          0          0          0   IO-APIC   9-fasteoi   acpi\n\
 16:          0          0          0          0   IO-APIC  16-fasteoi   ehci_hcd:usb1, i801_smbus\n\
 17:          0          0          0          0   IO-APIC  17-fasteoi\n\
130:       1500          0          0          0  IR-PCI-MSIX-0000:41:00.0    0-edge      mlx5_async0@pci:0000:41:00.0\n\
131:          0       2000          0          0  IR-PCI-MSIX-0000:41:00.0    1-edge      mlx5_comp0@pci:0000:41:00.0\n\
132:          0          0          0          0  IR-PCI-MSI 1048576-edge      mlx5_comp1@pci:0000:41:00.0\n\
NMI:          0          0          0          0   Non-maskable interrupts\n\
LOC:     123456     234567     345678     456789   Local timer interrupts\n\
ERR:          0\n\
MIS:          0\n\
garbage line without colon\n\
 99999999999: 1 2 x\n\
 77:\n\
 78: 5\n";

    #[test]
    fn parses_numbered_lines_and_skips_the_rest() {
        let v = parse_interrupts(SAMPLE);
        let irqs: Vec<u32> = v.iter().map(|l| l.irq).collect();
        assert_eq!(irqs, [0, 9, 16, 17, 130, 131, 132, 77, 78]);
        assert_eq!(v[0].counts, [44, 0, 0, 0]);
        assert_eq!(v[0].chip, "IO-APIC");
        assert_eq!(v[0].name, "timer");
        assert_eq!(v[2].name, "ehci_hcd:usb1, i801_smbus");
        assert_eq!(v[3].name, "");
        assert_eq!(v[4].chip, "IR-PCI-MSIX-0000:41:00.0");
        assert_eq!(v[4].name, "mlx5_async0@pci:0000:41:00.0");
        assert_eq!(v[5].counts, [0, 2000, 0, 0]);
        assert_eq!(v[6].chip, "IR-PCI-MSI");
        assert_eq!(v[6].name, "mlx5_comp1@pci:0000:41:00.0");
        assert_eq!(v[7].counts, Vec::<u64>::new());
        assert_eq!(v[7].chip, "");
        assert_eq!(v[8].counts, [5]);
    }

    #[test]
    fn garbage_lines_are_problems() {
        let good = "           CPU0       CPU1\n 24:  1  0  IO-APIC  5-edge  mlx5_comp0@pci:0000:3b:00.0\nNMI:  0  0  Non-maskable interrupts\nERR:  0\n";
        let (lines, problems) = parse_interrupts_checked(good);
        assert_eq!(lines.len(), 1);
        assert!(problems.is_empty(), "{problems:?}");
        let bad = format!(
            "{good}garbage without colon\n25: x  mlx5_comp1\n24:  1  0  IO-APIC  x\n@@@: 1\n"
        );
        let (lines, problems) = parse_interrupts_checked(&bad);
        // The lines are read as before; each odd one is reported.
        assert_eq!(lines.len(), 3);
        assert_eq!(problems.len(), 4, "{problems:?}");
        assert!(problems[0].contains("line 5"), "{problems:?}");
        assert!(problems[2].contains("listed before"), "{problems:?}");
        let (_, p) = parse_interrupts_checked(" 24: 1 0 IO-APIC x\n");
        assert!(p[0].contains("before the CPU header"), "{p:?}");
    }

    #[test]
    fn header_bounds_the_count_columns() {
        // A name that is itself a number must not be read as a count.
        let v = parse_interrupts("  CPU0\n 5: 7 chip 12\n");
        assert_eq!(v[0].counts, [7]);
        assert_eq!(v[0].chip, "chip");
        assert_eq!(v[0].name, "12");
    }

    fn fixture() -> (tempfile::TempDir, HostRoot) {
        let dir = tempfile::tempdir().unwrap();
        let root = HostRoot::new(dir.path()).unwrap();
        root.mkdir_all("/proc/irq/130").unwrap();
        root.write("/proc/irq/130/smp_affinity_list", b"0-3\n")
            .unwrap();
        root.mkdir_all("/proc/irq/131").unwrap();
        root.write("/proc/irq/131/smp_affinity", b"00000000,00000002\n")
            .unwrap();
        root.write("/proc/irq/131/effective_affinity_list", b"1\n")
            .unwrap();
        (dir, root)
    }

    #[test]
    fn falls_back_to_proc_interrupts_by_pci_address() {
        let (_d, root) = fixture();
        let lines = parse_interrupts(SAMPLE);
        let irqs = device_irqs(&root, Some("0000:41:00.0"), "mlx5_0", &lines);
        assert_eq!(
            irqs.iter().map(|i| i.irq).collect::<Vec<_>>(),
            [130, 131, 132]
        );
        assert!(irqs.iter().all(|i| i.source == "proc_interrupts"));
        assert!(irqs[0].is_async);
        assert!(!irqs[1].is_async);
        assert_eq!(
            irqs[0].affinity.as_ref().map(|s| s.to_list()).as_deref(),
            Some("0-3")
        );
        assert_eq!(
            irqs[1].affinity.as_ref().map(|s| s.to_list()).as_deref(),
            Some("1")
        );
        assert_eq!(
            irqs[1]
                .effective_affinity
                .as_ref()
                .map(|s| s.to_list())
                .as_deref(),
            Some("1")
        );
        assert_eq!(irqs[2].affinity, None);
    }

    #[test]
    fn prefers_msi_irqs() {
        let (_d, root) = fixture();
        root.mkdir_all("/sys/class/infiniband/mlx5_0/device/msi_irqs")
            .unwrap();
        root.write("/sys/class/infiniband/mlx5_0/device/msi_irqs/131", b"msix")
            .unwrap();
        root.write("/sys/class/infiniband/mlx5_0/device/msi_irqs/200", b"msix")
            .unwrap();
        let lines = parse_interrupts(SAMPLE);
        let irqs = device_irqs(&root, Some("0000:41:00.0"), "mlx5_0", &lines);
        assert_eq!(irqs.iter().map(|i| i.irq).collect::<Vec<_>>(), [131, 200]);
        assert!(irqs.iter().all(|i| i.source == "msi_irqs"));
        assert_eq!(irqs[0].name.as_deref(), Some("mlx5_comp0@pci:0000:41:00.0"));
        assert_eq!(irqs[1].name, None);
    }

    #[test]
    fn name_prefix_match_respects_device_numbers() {
        let lines =
            parse_interrupts(" 5: 0 chip 1-edge mlx5_10-comp\n 6: 0 chip 1-edge hfi1_1 sdma0\n");
        let dir = tempfile::tempdir().unwrap();
        let root = HostRoot::new(dir.path()).unwrap();
        assert!(device_irqs(&root, None, "mlx5_1", &lines).is_empty());
        let h = device_irqs(&root, None, "hfi1_1", &lines);
        assert_eq!(h.len(), 1);
        assert_eq!(h[0].name.as_deref(), Some("hfi1_1 sdma0"));
        assert!(device_irqs(&root, None, "", &lines).is_empty());
    }

    proptest! {
        #[test]
        fn parse_interrupts_never_panics(s in "\\PC{0,200}") {
            let _ = parse_interrupts(&s);
        }

        #[test]
        fn parse_interrupts_never_panics_on_likely_text(
            s in "([ 0-9A-Z:]{0,12}[ \\t]+[0-9a-z\\-@:.,_ ]{0,40}\n){0,8}"
        ) {
            let _ = parse_interrupts(&s);
        }
    }
}
