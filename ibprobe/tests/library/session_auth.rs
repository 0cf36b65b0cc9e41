//! `probe::session::auth`.

use ibprobe::probe::session::auth::*;

#[test]
fn proofs_check_the_key_the_role_and_the_nonces() {
    let a = Secret::from_bytes(b"0123456789abcdef0123\n").unwrap();
    let b = Secret::from_bytes(b"0123456789abcdef0124").unwrap();
    let (cn, sn) = (Secret::nonce().unwrap(), Secret::nonce().unwrap());
    assert_ne!(cn, sn);
    let p = a.proof(Role::Client, &cn, &sn);
    assert!(a.verify(Role::Client, &cn, &sn, &p));
    assert!(!b.verify(Role::Client, &cn, &sn, &p), "another key");
    assert!(!a.verify(Role::Server, &cn, &sn, &p), "the other role");
    assert!(!a.verify(Role::Client, &sn, &cn, &p), "swapped nonces");
    assert!(!a.verify(Role::Client, &cn, &sn, "not base64!"));
    // The trailing newline is not part of the key.
    let a2 = Secret::from_bytes(b"0123456789abcdef0123").unwrap();
    assert!(a2.verify(Role::Client, &cn, &sn, &p));
    let e = Secret::from_bytes(b"short\n").unwrap_err();
    assert!(e.contains("fewer than 16"), "{e}");
    assert_eq!(format!("{a:?}"), "Secret(..)");
}

#[test]
fn files_must_be_private_regular_and_small() {
    use std::os::unix::fs::PermissionsExt;
    let d = tempfile::tempdir().unwrap();
    let f = d.path().join("key");
    std::fs::write(&f, "0123456789abcdef-secret-key\n").unwrap();
    std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o644)).unwrap();
    let e = Secret::load(&f).unwrap_err();
    assert!(e.contains("chmod 600"), "{e}");
    assert!(!e.contains("secret-key"), "{e}");
    std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o600)).unwrap();
    Secret::load(&f).unwrap();
    let e = Secret::load(d.path()).unwrap_err();
    assert!(e.contains("directory"), "{e}");
}
