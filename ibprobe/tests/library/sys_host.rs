//! `sys::host`.

use ibprobe::sys::host::*;
use std::sync::atomic::Ordering;

#[test]
fn anonymous_map_is_zeroed_and_shared_between_threads() {
    let m = std::sync::Arc::new(SharedMap::anonymous(100).unwrap());
    assert_eq!(m.words().len(), 512);
    assert!(m.words().iter().all(|w| w.load(Ordering::Relaxed) == 0));
    let m2 = m.clone();
    std::thread::spawn(move || m2.words()[7].store(42, Ordering::Release))
        .join()
        .unwrap();
    assert_eq!(m.words()[7].load(Ordering::Acquire), 42);
}

#[test]
fn file_map_is_seen_by_a_second_mapping() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("ring");
    let a = SharedMap::file(&p, 8192, true).unwrap();
    let b = SharedMap::file(&p, 8192, false).unwrap();
    a.words()[3].store(9, Ordering::Release);
    assert_eq!(b.words()[3].load(Ordering::Acquire), 9);
    assert!(
        SharedMap::file(&p, 1 << 20, false).is_err(),
        "too short a file must be refused"
    );
}
