//! `counters::interrupts`.

use ibnoise::counters::interrupts::*;

const TABLE: &str = "           CPU0       CPU1       CPU2       CPU3\n\
 24:          1          0          0          0  IO-APIC   5-edge      ACPI:Ged\n\
 29:          0        100          2          0  PCI-MSIX-0000:00:03.0   1-edge      virtio1-input.0\n\
 30:          0          0          0          0  PCI-MSIX-0000:00:03.0   2-edge\n\
NMI:          0          0          0          0   Non-maskable interrupts\n\
LOC:       1000       2000         50         60   Local timer interrupts\n\
RES:          5          7          0          1   Rescheduling interrupts\n\
ERR:          0\n";

#[test]
fn columns_follow_the_header() {
    assert_eq!(columns(TABLE, &[1, 3]), vec![1, 3]);
    assert_eq!(columns(TABLE, &[7]), Vec::<usize>::new());
}

#[test]
fn total_sums_only_the_asked_columns() {
    assert_eq!(total_of(TABLE, &[1]), 100 + 2000 + 7);
    assert_eq!(total_of(TABLE, &[0]), 1 + 1000 + 5);
}

#[test]
fn sources_name_the_irq_and_its_action() {
    let s = parse_sources(TABLE, &[1]);
    let v = s.iter().find(|l| l.source == "29:virtio1-input.0").unwrap();
    assert_eq!((v.count, v.what.as_str()), (100, "PCI-MSIX-0000:00:03.0"));
    let loc = s.iter().find(|l| l.source == "LOC").unwrap();
    assert_eq!(
        (loc.count, loc.what.as_str()),
        (2000, "Local timer interrupts")
    );
    assert!(s.iter().any(|l| l.source == "30"));
}

#[test]
fn delta_keeps_the_sources_that_moved_largest_first() {
    let a = parse_sources(TABLE, &[1]);
    let later = TABLE
        .replace("2000", "2100")
        .replace("    100 ", "    103 ");
    let b = parse_sources(&later, &[1]);
    let d = delta(&a, &b);
    assert_eq!(d.len(), 2, "{d:?}");
    assert_eq!((d[0].source.as_str(), d[0].count), ("LOC", 100));
    assert_eq!(
        (d[1].source.as_str(), d[1].count),
        ("29:virtio1-input.0", 3)
    );
}

#[test]
fn the_live_table_counts_something_on_some_cpu() {
    let cpus = ibhost::rt::allowed_cpus();
    let mut t = InterruptTable::open(&cpus).unwrap();
    let a = t.total().unwrap();
    std::thread::sleep(std::time::Duration::from_millis(30));
    let b = t.total().unwrap();
    assert!(b >= a);
    assert!(!t.sources().is_empty());
}
