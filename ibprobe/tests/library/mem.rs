//! `sys::mem`.

use std::io;

use ibprobe::sys::mem::*;

#[test]
fn regions_are_aligned_as_asked() {
    for align in [1, 64, 4096, 64 << 10, 2 << 20] {
        let r = Region::new(
            10_000,
            &Placement {
                align,
                ..Placement::default()
            },
        )
        .unwrap();
        assert_eq!(r.addr() % align as u64, 0, "align {align}: {r:?}");
        assert_eq!(r.addr() % page_size() as u64, 0);
        assert_eq!(r.len(), 10_000usize.div_ceil(page_size()) * page_size());
        assert!(r.as_slice().iter().all(|&b| b == 0));
    }
    let e = Region::new(
        100,
        &Placement {
            align: 3000,
            ..Placement::default()
        },
    )
    .unwrap_err();
    assert!(e.to_string().contains("alignment 3000"), "{e}");
}

#[test]
fn binding_to_node_0_and_to_a_missing_node() {
    if !std::path::Path::new("/sys/devices/system/node/node0").exists() {
        let why = "no /sys/devices/system/node/node0: a kernel without NUMA support has nothing to bind to";
        ibtools_tests::skip("binding_to_node_0_and_to_a_missing_node", why);
        return;
    }
    let r = Region::new(
        8 * page_size(),
        &Placement {
            node: Some(0),
            lock: true,
            ..Placement::default()
        },
    )
    .unwrap();
    assert_eq!(r.node(), Some(0));
    assert_eq!(r.resident_pages().unwrap(), 8);
    assert!(r.describe().contains("node 0"), "{}", r.describe());
    let e = Region::new(
        4096,
        &Placement {
            node: Some(4000),
            ..Placement::default()
        },
    )
    .unwrap_err();
    let m = e.to_string();
    assert!(m.contains("NUMA node 4000 does not exist"), "{m}");
    assert!(!m.contains('\n'));
}

#[test]
fn a_private_file_is_new_0600_and_allocated() {
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("ring");
    let f = create_private_file(&p, 64 << 10).unwrap();
    let m = f.metadata().unwrap();
    assert_eq!(m.permissions().mode() & 0o777, 0o600);
    assert_eq!(m.len(), 64 << 10);
    assert!(m.blocks() * 512 >= 64 << 10, "allocated, not sparse: {m:?}");
    let e = create_private_file(&p, 4096).unwrap_err();
    assert_eq!(e.kind(), io::ErrorKind::AlreadyExists, "{e}");
    assert!(p.exists(), "somebody else's file is left alone");
    let link = dir.path().join("link");
    std::os::unix::fs::symlink(dir.path().join("elsewhere"), &link).unwrap();
    assert!(
        create_private_file(&link, 4096).is_err(),
        "never through a symlink"
    );
    assert!(!dir.path().join("elsewhere").exists());
}

#[test]
fn free_space_is_read_and_within_the_total() {
    let s = fs_space(std::path::Path::new("/")).unwrap();
    assert!(s.total > 0 && s.free <= s.total, "{s:?}");
}
