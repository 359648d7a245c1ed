//! A `ggml-rs-rpc-server` child process on 127.0.0.1 and a free port, for
//! the tests of remote devices (tests/rpc.rs, tests/rpc_client.rs).
#![allow(dead_code)]

use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A server process, killed when dropped.
pub struct Server {
    pub child: Child,
    pub port: u16,
    pub endpoint: String,
}

pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

impl Server {
    pub fn start(extra: &[&str]) -> Server {
        for _ in 0..5 {
            if let Some(s) = Server::try_start(free_port(), extra) {
                return s;
            }
        }
        panic!("could not start ggml-rs-rpc-server");
    }

    /// Starts a server on `port` and waits (at most 10 s) until it accepts.
    pub fn try_start(port: u16, extra: &[&str]) -> Option<Server> {
        Server::try_start_logged(port, extra, None)
    }

    /// As `start`, with the server's stderr in the file `log` (truncated).
    pub fn start_logged(extra: &[&str], log: &Path) -> Server {
        for _ in 0..5 {
            if let Some(s) = Server::try_start_logged(free_port(), extra, Some(log)) {
                return s;
            }
        }
        panic!("could not start ggml-rs-rpc-server");
    }

    pub fn try_start_logged(port: u16, extra: &[&str], log: Option<&Path>) -> Option<Server> {
        let stderr = match log {
            Some(p) => Stdio::from(std::fs::File::create(p).expect("server log file")),
            None => Stdio::null(),
        };
        let child = Command::new(env!("CARGO_BIN_EXE_ggml-rs-rpc-server"))
            .args(["--host", "127.0.0.1", "--port", &port.to_string(), "--threads", "2"])
            .args(extra)
            .stdout(Stdio::null())
            .stderr(stderr)
            .process_group(0)
            .spawn()
            .expect("spawn ggml-rs-rpc-server");
        let mut s = Server {
            child,
            port,
            endpoint: format!("127.0.0.1:{port}"),
        };
        let addr: SocketAddr = s.endpoint.parse().unwrap();
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if s.child.try_wait().unwrap().is_some() {
                return None; // port taken meanwhile
            }
            if TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_ok() {
                return Some(s);
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        s.kill();
        None
    }

    /// Kills the server: its listener and the processes serving its
    /// connections (its process group), as a service manager would.
    pub fn kill(&mut self) {
        let group = self.child.id() as i32;
        unsafe { libc::kill(-group, libc::SIGKILL) };
        let _ = self.child.kill();
        let _ = self.child.wait();
        // The connection processes' sockets close when they exit, which
        // the listener's wait does not cover: wait until none of the group
        // is still running (exited ones linger as zombies until reaped).
        let deadline = Instant::now() + Duration::from_secs(10);
        while group_running(group) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(5));
        }
    }
}

/// Whether a process of process group `group` is running (not a zombie).
fn group_running(group: i32) -> bool {
    std::fs::read_dir("/proc").unwrap().flatten().any(|e| {
        let stat = std::fs::read_to_string(e.path().join("stat")).unwrap_or_default();
        // pid (comm) state ppid pgrp ...: the fields after the last ')'.
        let rest = stat.rsplit_once(')').map_or("", |(_, r)| r);
        let f: Vec<&str> = rest.split_whitespace().collect();
        f.len() > 2 && f[0] != "Z" && f[2] == group.to_string()
    })
}

impl Drop for Server {
    fn drop(&mut self) {
        self.kill();
    }
}

