//! `transport::udp`.

use ibprobe::transport::channel::{Channel, TransportError};
use ibprobe::transport::udp::*;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};

fn wait(ch: &mut UdpChannel) -> Option<u64> {
    let t = std::time::Instant::now();
    while t.elapsed() < std::time::Duration::from_secs(2) {
        if let Some(s) = ch.poll_recv().unwrap() {
            return Some(s);
        }
    }
    None
}

#[test]
fn loopback_carries_the_sequence_number() {
    let mut ch = UdpChannel::loopback(IpAddr::V4(Ipv4Addr::LOCALHOST), 64).unwrap();
    assert_eq!(ch.poll_recv().unwrap(), None);
    for seq in [0, 1, u64::MAX - 1] {
        ch.post(seq).unwrap();
        assert_eq!(wait(&mut ch), Some(seq));
    }
}

#[test]
fn sizes_outside_udp_limits_are_refused() {
    let ip = IpAddr::V4(Ipv4Addr::LOCALHOST);
    assert!(UdpChannel::loopback(ip, 7).is_err());
    assert!(UdpChannel::loopback(ip, MAX_SIZE + 1).is_err());
    assert!(UdpChannel::loopback(ip, MAX_SIZE).is_ok());
}

#[test]
fn closed_peer_is_reported_as_lost() {
    let ip = IpAddr::V4(Ipv4Addr::LOCALHOST);
    let mut a = UdpChannel::bind(SocketAddr::new(ip, 0), 16).unwrap();
    let b = UdpChannel::bind(SocketAddr::new(ip, 0), 16).unwrap();
    a.connect(b.local_addr().unwrap()).unwrap();
    drop(b);
    a.post(1).unwrap();
    // The ICMP error arrives asynchronously; it surfaces on a later call.
    let t = std::time::Instant::now();
    let mut lost = false;
    while t.elapsed() < std::time::Duration::from_secs(2) && !lost {
        lost = matches!(a.poll_recv(), Err(TransportError::PeerLost(_)));
    }
    assert!(lost, "ECONNREFUSED must surface as PeerLost");
}
