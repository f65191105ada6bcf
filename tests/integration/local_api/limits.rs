//! The limits: a slowloris client does not stop others, and its stalled connections
//! are closed; an oversized request head is refused.

use std::io::{ErrorKind, Read, Write};
use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4, TcpStream};
use std::os::fd::AsRawFd;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use outpost_tests::agent::{request_head, split_response};

use super::{Dirs, PATIENCE};

/// A TCP connection to `to` from the local address `from`.
fn connect_from(from: Ipv4Addr, to: SocketAddr) -> TcpStream {
    use nix::sys::socket::{AddressFamily, SockFlag, SockType, SockaddrIn, bind, connect, socket};
    let SocketAddr::V4(to) = to else { panic!("{to} is not IPv4") };
    let fd = socket(AddressFamily::Inet, SockType::Stream, SockFlag::SOCK_CLOEXEC, None).unwrap();
    bind(fd.as_raw_fd(), &SockaddrIn::from(SocketAddrV4::new(from, 0))).unwrap();
    connect(fd.as_raw_fd(), &SockaddrIn::from(to)).unwrap();
    TcpStream::from(fd)
}

#[test]
fn a_slowloris_client_does_not_stop_others_and_its_stalled_connections_are_closed() {
    let dirs = Dirs::new();
    let agent = dirs.start(&[]);
    let addr: SocketAddr = agent.addr.parse().unwrap();
    // 40 connections from another loopback address, more than one address may hold,
    // each sending a request head a byte at a time and never finishing it.
    let slow = Ipv4Addr::new(127, 0, 0, 2);
    let stalled: Vec<TcpStream> = (0..40).map(|_| connect_from(slow, addr)).collect();
    let writers: Vec<TcpStream> = stalled.iter().map(|s| s.try_clone().unwrap()).collect();
    let stop = Arc::new(AtomicBool::new(false));
    let dribbler = std::thread::spawn({
        let stop = stop.clone();
        move || {
            let head = b"GET /pods HTTP/1.1\r\nHost: x\r\nX-Slow: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
            let mut writers = writers;
            for byte in head.iter().cycle() {
                if stop.load(Ordering::Relaxed) {
                    return;
                }
                for w in &mut writers {
                    let _ = w.write(std::slice::from_ref(byte));
                }
                std::thread::sleep(Duration::from_millis(100));
            }
        }
    });
    // Others are served meanwhile.
    assert_eq!(agent.get("/healthz"), (200, "ok".into()));
    let (status, pods) = agent.get("/pods");
    assert_eq!(status, 200);
    assert!(pods.contains("web-edge-1"));
    // Every stalled connection ends: past the per-address cap at once, the others at
    // the header read timeout.
    for mut s in stalled {
        s.set_read_timeout(Some(PATIENCE)).unwrap();
        let mut answer = Vec::new();
        match s.read_to_end(&mut answer) {
            Ok(_) => {}
            Err(e) if e.kind() == ErrorKind::ConnectionReset => {}
            Err(e) => panic!("a stalled connection stayed open: {e}"),
        }
    }
    stop.store(true, Ordering::Relaxed);
    dribbler.join().unwrap();
    assert_eq!(agent.get("/healthz"), (200, "ok".into()));
}

#[test]
fn an_oversized_request_head_is_refused_and_the_agent_keeps_serving() {
    let dirs = Dirs::new();
    let agent = dirs.start(&[]);
    let big = "a".repeat(64 * 1024);
    let mut s = TcpStream::connect(&agent.addr).unwrap();
    s.set_read_timeout(Some(PATIENCE)).unwrap();
    let head = request_head("GET", "/pods", &[("X-Big", &big)], 0);
    let _ = s.write_all(head.as_bytes());
    let mut answer = Vec::new();
    let _ = s.read_to_end(&mut answer);
    let (status, _) = split_response(&String::from_utf8_lossy(&answer));
    assert_eq!(status, 431, "{}", String::from_utf8_lossy(&answer));
    assert_eq!(agent.get("/healthz"), (200, "ok".into()));
    assert_eq!(agent.get("/pods").0, 200);
}
