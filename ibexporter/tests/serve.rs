//! Runs the real binary and scrapes it over plain HTTP/1.0.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Kills the server even when an assertion fails.
struct Server(Child);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn free_port() -> u16 {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    l.local_addr().unwrap().port()
}

fn get(addr: &str, path: &str) -> std::io::Result<String> {
    let mut s = TcpStream::connect(addr)?;
    s.set_read_timeout(Some(Duration::from_secs(10)))?;
    write!(s, "GET {path} HTTP/1.0\r\nHost: {addr}\r\n\r\n")?;
    let mut out = String::new();
    s.read_to_string(&mut out)?;
    Ok(out)
}

#[test]
fn serves_metrics_and_index() {
    let addr = format!("127.0.0.1:{}", free_port());
    let mut server = Server(
        Command::new(env!("CARGO_BIN_EXE_ibexporter"))
            .args(["--listen", &addr])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let deadline = Instant::now() + Duration::from_secs(10);
    let metrics = loop {
        match get(&addr, "/metrics") {
            Ok(r) => break r,
            Err(e) => {
                assert!(
                    server.0.try_wait().unwrap().is_none(),
                    "ibexporter exited early"
                );
                assert!(Instant::now() < deadline, "ibexporter never answered: {e}");
                std::thread::sleep(Duration::from_millis(20));
            }
        }
    };
    assert!(
        metrics.starts_with("HTTP/1.0 200") || metrics.starts_with("HTTP/1.1 200"),
        "{metrics}"
    );
    assert!(
        metrics
            .to_ascii_lowercase()
            .contains("content-type: application/openmetrics-text; version=1.0.0; charset=utf-8"),
        "{metrics}"
    );
    let version = env!("CARGO_PKG_VERSION");
    assert!(
        metrics.contains(&format!(
            "ibexporter_build_info{{version=\"{version}\"}} 1\n"
        )),
        "{metrics}"
    );
    assert!(metrics.contains("\nibexporter_up 1\n"), "{metrics}");

    let index = get(&addr, "/").unwrap();
    assert!(index.contains("href=\"/metrics\""), "{index}");
}

#[test]
fn help_says_it_is_a_stub() {
    let out = Command::new(env!("CARGO_BIN_EXE_ibexporter"))
        .arg("--help")
        .output()
        .unwrap();
    let help = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success());
    assert!(help.contains("STUB") && help.contains("--listen"), "{help}");
    assert!(help.contains("0.0.0.0:9427"), "{help}");
}
