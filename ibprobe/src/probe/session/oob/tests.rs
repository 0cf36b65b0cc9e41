//! The framing and the messages end to end over a real TCP pair.
use super::*;
use serde_json::json;

fn pair() -> (Oob, Oob) {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    let c = std::thread::spawn(move || {
        Oob::connect(&format!("127.0.0.1:{port}"), 1, Duration::from_secs(2)).unwrap()
    });
    let s = Oob::accept(&l, Duration::from_millis(300)).unwrap();
    (c.join().unwrap(), s)
}

/// Reads the Hello and, when it is good, welcomes the client.
fn welcome(s: &mut Oob) -> Result<Hello, OobError> {
    let h = s.read_hello()?;
    s.send(&Reply::Welcome {
        endpoint: json!({"port": 10}),
    })
    .unwrap();
    Ok(h)
}

#[test]
fn hello_welcome_done_round_trip() {
    let (mut c, mut s) = pair();
    let hello = hello();
    let srv = std::thread::spawn(move || {
        let h = welcome(&mut s).unwrap();
        assert!(matches!(s.poll_closing(), Closing::Open));
        let t = std::time::Instant::now();
        loop {
            match s.poll_closing() {
                Closing::Open if t.elapsed() < Duration::from_secs(2) => continue,
                Closing::Done(d) => return (h, d),
                other => panic!("{other:?}"),
            }
        }
    });
    assert_eq!(c.handshake(&hello).unwrap(), json!({"port": 10}));
    std::thread::sleep(Duration::from_millis(20));
    c.send(&Done {
        sent: 5,
        interrupted: false,
    })
    .unwrap();
    let (h, d) = srv.join().unwrap();
    assert_eq!(h, hello);
    assert_eq!(d.sent, 5);
}

#[test]
fn a_silent_peer_times_out_and_a_closed_one_is_gone() {
    let (mut c, s) = pair();
    let t = std::time::Instant::now();
    let e = c
        .recv::<Reply>("waiting for the server's reply")
        .unwrap_err();
    assert!(matches!(e, OobError::Timeout { .. }), "{e}");
    assert!(t.elapsed() < Duration::from_secs(3));
    drop(s);
    let mut c2 = c;
    assert!(matches!(
        c2.recv::<Reply>("x").unwrap_err(),
        OobError::Closed { .. }
    ));
}

#[test]
fn wrong_version_and_magic_are_named() {
    let (c, mut s) = pair();
    let mut raw = c.stream.try_clone().unwrap();
    raw.write_all(b"IBPROBE\0\0\0\0\x09\0\0\0\x02{}").unwrap();
    let e = s.read_hello().unwrap_err();
    assert!(e.to_string().contains("protocol v9"), "{e}");
    let mut c = c;
    match c.recv::<Reply>("reply").unwrap() {
        Reply::Refuse { reason } => assert!(reason.contains("client v9"), "{reason}"),
        r => panic!("{r:?}"),
    }
    raw.write_all(b"GET / HTTP/1.1\r\n\r\n").unwrap();
    assert!(matches!(
        s.recv::<Hello>("hello").unwrap_err(),
        OobError::BadMagic { .. }
    ));
}

fn hello() -> Hello {
    Hello {
        transport: "udp".into(),
        size: 32,
        params: json!({"op": "send"}),
        endpoint: json!({"port": 9}),
    }
}

/// Runs a handshake with `client`'s and `server`'s secrets; the
/// client's result and the server's.
fn auth(
    client: Option<&[u8]>,
    server: Option<&[u8]>,
) -> (Result<serde_json::Value, OobError>, Result<Hello, OobError>) {
    let key = |k: Option<&[u8]>| k.map(|k| Secret::from_bytes(k).unwrap());
    let (c, s) = pair();
    let (mut c, mut s) = (c.with_secret(key(client)), s.with_secret(key(server)));
    let srv = std::thread::spawn(move || welcome(&mut s));
    let r = c.handshake(&hello());
    (r, srv.join().unwrap())
}

#[test]
fn the_mesh_secret_is_proved_both_ways() {
    let k: &[u8] = b"0123456789abcdef-mesh";
    let (c, s) = auth(Some(k), Some(k));
    assert_eq!(c.unwrap(), json!({"port": 10}));
    assert_eq!(s.unwrap(), hello(), "the nonce is taken out of params");
    // No secret on either end: as before.
    let (c, s) = auth(None, None);
    assert!(c.is_ok() && s.is_ok());
    // A client without the secret is refused and told why.
    let (c, s) = auth(None, Some(k));
    assert!(matches!(s, Err(OobError::Auth(_))), "{s:?}");
    let c = c.unwrap_err().to_string();
    assert!(c.contains("requires the mesh secret"), "{c}");
    // A different secret: the client sees the server's proof fail.
    let (c, s) = auth(Some(b"another-key-0123456789"), Some(k));
    assert!(matches!(c, Err(OobError::Auth(_))), "{c:?}");
    assert!(s.is_err());
    // A server without the secret does not count as a mesh member.
    let (c, _) = auth(Some(k), None);
    let c = c.unwrap_err().to_string();
    assert!(c.contains("did not prove"), "{c}");
}

#[test]
fn a_malformed_body_names_what_was_awaited() {
    let (c, mut s) = pair();
    let mut raw = c.stream.try_clone().unwrap();
    raw.write_all(b"IBPROBE\0\0\0\0\x01\0\0\0\x02[]").unwrap();
    let e = s.read_hello().unwrap_err().to_string();
    assert!(
        e.contains("sent a malformed message while waiting for the client's hello"),
        "{e}"
    );
}

#[test]
fn nothing_listening_is_a_connect_error() {
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let e = Oob::connect("127.0.0.1", port, Duration::from_secs(1))
        .err()
        .unwrap();
    assert!(
        e.to_string()
            .starts_with("cannot connect to ibprobe server at 127.0.0.1:"),
        "{e}"
    );
}
