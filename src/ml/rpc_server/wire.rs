//! ggml's RPC protocol (version 7) as bytes on a socket: the commands, the
//! framing, and `rpc_tensor`. Every read is bounded before it starts: a
//! fixed-size request must announce exactly its size, and a variable one is
//! read in chunks that grow only as data arrives, never to a size the peer
//! merely announced.
//!
//! Framing: a request is `cmd u8 | size u64 | payload`, a reply
//! `size u64 | payload`; integers are native-endian (ggml sends its structs
//! as they lie in memory).

use std::io::{self, Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

pub(super) const ALLOC_BUFFER: u8 = 0;
pub(super) const GET_ALIGNMENT: u8 = 1;
pub(super) const GET_MAX_SIZE: u8 = 2;
pub(super) const BUFFER_GET_BASE: u8 = 3;
pub(super) const FREE_BUFFER: u8 = 4;
pub(super) const BUFFER_CLEAR: u8 = 5;
pub(super) const SET_TENSOR: u8 = 6;
pub(super) const SET_TENSOR_HASH: u8 = 7;
pub(super) const GET_TENSOR: u8 = 8;
pub(super) const COPY_TENSOR: u8 = 9;
pub(super) const GRAPH_COMPUTE: u8 = 10;
pub(super) const GET_DEVICE_MEMORY: u8 = 11;
pub(super) const INIT_TENSOR: u8 = 12;
pub(super) const GET_ALLOC_SIZE: u8 = 13;
pub(super) const HELLO: u8 = 14;
pub(super) const DEVICE_COUNT: u8 = 15;
pub(super) const GRAPH_RECOMPUTE: u8 = 16;
pub(super) const MEMSET_TENSOR: u8 = 17;

/// The protocol version we speak (ggml's RPC_PROTO_*_VERSION).
pub(super) const VERSION: [u8; 3] = [7, 0, 0];
/// Transport capabilities exchanged in HELLO (zero: plain TCP).
pub(super) const CAPS: usize = 24;
/// sizeof(rpc_tensor).
pub(super) const TENSOR: usize = 296;
/// Reads grow by at most this much before the data is there.
const CHUNK: usize = 1 << 20;

pub fn command_name(cmd: u8) -> &'static str {
    const NAMES: [&str; 18] = [
        "ALLOC_BUFFER",
        "GET_ALIGNMENT",
        "GET_MAX_SIZE",
        "BUFFER_GET_BASE",
        "FREE_BUFFER",
        "BUFFER_CLEAR",
        "SET_TENSOR",
        "SET_TENSOR_HASH",
        "GET_TENSOR",
        "COPY_TENSOR",
        "GRAPH_COMPUTE",
        "GET_DEVICE_MEMORY",
        "INIT_TENSOR",
        "GET_ALLOC_SIZE",
        "HELLO",
        "DEVICE_COUNT",
        "GRAPH_RECOMPUTE",
        "MEMSET_TENSOR",
    ];
    NAMES.get(cmd as usize).copied().unwrap_or("unknown")
}

/// A serialized ggml tensor as the client sent it (nothing checked yet).
#[derive(Clone, Debug)]
pub struct WireTensor {
    pub id: u64,
    pub dtype: u32,
    pub buffer: u64,
    pub ne: [u32; 4],
    pub nb: [u32; 4],
    pub op: u32,
    pub op_params: [u8; 64],
    pub flags: i32,
    pub src: [u64; 10],
    pub data: u64,
    pub name: [u8; 64],
}

/// A little cursor over a payload; reading past its end is an error.
pub struct Fields<'a> {
    b: &'a [u8],
    at: usize,
}

impl<'a> Fields<'a> {
    pub fn new(b: &'a [u8]) -> Self {
        Fields { b, at: 0 }
    }
    pub fn bytes(&mut self, n: usize) -> Result<&'a [u8], String> {
        let end = self.at.checked_add(n).filter(|&e| e <= self.b.len());
        let end = end.ok_or_else(|| format!("payload ends at byte {} (needs {} more)", self.b.len(), n))?;
        let s = &self.b[self.at..end];
        self.at = end;
        Ok(s)
    }
    pub fn u8(&mut self) -> Result<u8, String> {
        Ok(self.bytes(1)?[0])
    }
    pub fn u32(&mut self) -> Result<u32, String> {
        Ok(u32::from_ne_bytes(self.bytes(4)?.try_into().unwrap()))
    }
    pub fn u64(&mut self) -> Result<u64, String> {
        Ok(u64::from_ne_bytes(self.bytes(8)?.try_into().unwrap()))
    }
    pub fn tensor(&mut self) -> Result<WireTensor, String> {
        let mut f = Fields::new(self.bytes(TENSOR)?);
        let id = f.u64()?;
        let dtype = f.u32()?;
        let buffer = f.u64()?;
        let mut ne = [0u32; 4];
        for v in &mut ne {
            *v = f.u32()?;
        }
        let mut nb = [0u32; 4];
        for v in &mut nb {
            *v = f.u32()?;
        }
        let op = f.u32()?;
        let op_params = f.bytes(64)?.try_into().unwrap();
        let flags = f.u32()? as i32;
        let mut src = [0u64; 10];
        for v in &mut src {
            *v = f.u64()?;
        }
        let _view = f.bytes(16)?; // view_src, view_offs: views are checked by their bytes
        let data = f.u64()?;
        let name = f.bytes(64)?.try_into().unwrap();
        let _use_count = f.u32()?;
        Ok(WireTensor { id, dtype, buffer, ne, nb, op, op_params, flags, src, data, name })
    }
    pub fn rest(&self) -> usize {
        self.b.len() - self.at
    }
}

/// The slowest a request's (or a reply's) bytes may move on average: a
/// request of n bytes must arrive within the stall limit plus n / MIN_RATE
/// seconds, whatever pace its bytes keep.
pub(super) const MIN_RATE: u64 = 64 << 10;

/// One connection's socket with the protocol's framing. Every read and
/// write of a request or reply is bounded twice: no single wait lasts
/// longer than `stall`, and the whole request (or reply) must be through by
/// its deadline, so a peer that trickles a byte now and then cannot hold
/// the connection. Only the wait for the next command has no deadline.
pub struct Conn {
    s: TcpStream,
    /// The longest one read or write may wait.
    stall: Duration,
    /// When the current request or reply must be through; None while
    /// waiting for a command.
    deadline: Option<Instant>,
}

impl Conn {
    pub fn new(s: TcpStream, stall: Duration) -> Conn {
        Conn { s, stall, deadline: None }
    }

    /// Starts a phase (HELLO, a request, a reply) that must be through
    /// within `limit`, more as [`Conn::allow`] adds.
    pub fn within(&mut self, limit: Duration) {
        self.deadline = Some(Instant::now() + limit);
    }

    /// Waits without a deadline (for the next command).
    pub fn unbounded(&mut self) {
        self.deadline = None;
    }

    /// Gives the current phase time for `bytes` more at [`MIN_RATE`], once
    /// their count has been checked.
    pub fn allow(&mut self, bytes: u64) {
        if let Some(d) = self.deadline {
            let more = Duration::from_millis(bytes.saturating_mul(1000) / MIN_RATE);
            self.deadline = Some(d.checked_add(more).unwrap_or(d));
        }
    }

    /// How long the next read or write may wait: the stall limit, or what
    /// is left of the deadline; an error once it has passed.
    fn wait(&self) -> io::Result<Option<Duration>> {
        let Some(d) = self.deadline else { return Ok(None) };
        let left = d.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(io::Error::new(io::ErrorKind::TimedOut, "not complete in the time allowed"));
        }
        Ok(Some(left.min(self.stall)))
    }

    /// A timeout of the socket in words: the deadline passed, or the peer
    /// sent (or took) nothing for the stall limit.
    fn stalled(&self, e: io::Error) -> io::Error {
        if !matches!(e.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut) || e.get_ref().is_some() {
            return e;
        }
        if self.deadline.is_some_and(|d| Instant::now() >= d) {
            return io::Error::new(io::ErrorKind::TimedOut, "not complete in the time allowed");
        }
        io::Error::new(io::ErrorKind::TimedOut, format!("the peer stalled for {} s", self.stall.as_secs()))
    }

    /// Reads some bytes within the limits; 0 at the end of the stream.
    fn read_some(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        loop {
            let wait = self.wait()?;
            self.s.set_read_timeout(wait)?;
            match self.s.read(buf) {
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                r => return r.map_err(|e| self.stalled(e)),
            }
        }
    }

    fn read_full(&mut self, mut buf: &mut [u8]) -> io::Result<()> {
        while !buf.is_empty() {
            match self.read_some(buf)? {
                0 => return Err(io::Error::new(io::ErrorKind::UnexpectedEof, "the peer closed the connection")),
                n => buf = &mut buf[n..],
            }
        }
        Ok(())
    }

    fn write_full(&mut self, mut buf: &[u8]) -> io::Result<()> {
        while !buf.is_empty() {
            let wait = self.wait()?;
            self.s.set_write_timeout(wait.or(Some(self.stall)))?;
            match self.s.write(buf) {
                Ok(0) => return Err(io::Error::new(io::ErrorKind::WriteZero, "the peer takes no more")),
                Ok(n) => buf = &buf[n..],
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(self.stalled(e)),
            }
        }
        Ok(())
    }

    /// The next command byte; `Ok(None)` when the peer closed cleanly.
    pub fn command(&mut self) -> io::Result<Option<u8>> {
        let mut b = [0u8; 1];
        Ok(match self.read_some(&mut b)? {
            0 => None,
            _ => Some(b[0]),
        })
    }

    pub fn size(&mut self) -> io::Result<u64> {
        let mut b = [0u8; 8];
        self.read_full(&mut b)?;
        Ok(u64::from_ne_bytes(b))
    }

    /// A payload of `size` bytes, refused above `max` before anything is
    /// allocated, and allocated as it arrives.
    pub fn payload(&mut self, size: u64, max: u64) -> Result<Vec<u8>, String> {
        if size > max {
            return Err(format!("announces {size} bytes, more than this request may hold ({max})"));
        }
        self.allow(size);
        let size = size as usize;
        let mut v = Vec::with_capacity(size.min(CHUNK));
        while v.len() < size {
            let want = (size - v.len()).min(CHUNK);
            let at = v.len();
            v.resize(at + want, 0);
            self.read_full(&mut v[at..]).map_err(|e| format!("reading {size} bytes: {e}"))?;
        }
        Ok(v)
    }

    /// A fixed-size request: the announced size must be exactly `n`.
    pub fn fixed(&mut self, n: usize) -> Result<Vec<u8>, String> {
        let size = self.size().map_err(|e| format!("reading the size: {e}"))?;
        if size != n as u64 {
            return Err(format!("announces {size} bytes, the request has {n}"));
        }
        self.payload(size, n as u64)
    }

    /// Reads exactly `buf.len()` bytes (which the caller has allowed).
    pub fn read_into(&mut self, buf: &mut [u8]) -> Result<(), String> {
        self.read_full(buf).map_err(|e| format!("reading {} bytes: {e}", buf.len()))
    }

    pub fn reply(&mut self, payload: &[u8]) -> Result<(), String> {
        let mut m = Vec::with_capacity(8 + payload.len());
        m.extend((payload.len() as u64).to_ne_bytes());
        m.extend(payload);
        self.reply_phase(m.len() as u64);
        self.write_full(&m).map_err(|e| format!("replying: {e}"))
    }

    /// Starts a reply of `size` bytes sent in pieces by `write_part`.
    pub fn reply_header(&mut self, size: u64) -> Result<(), String> {
        self.reply_phase(8 + size);
        self.write_full(&size.to_ne_bytes()).map_err(|e| format!("replying: {e}"))
    }

    pub fn write_part(&mut self, part: &[u8]) -> Result<(), String> {
        self.write_full(part).map_err(|e| format!("replying: {e}"))
    }

    /// A reply's own time: the peer must take its `bytes` within the stall
    /// limit plus their time at [`MIN_RATE`] (the compute before it does
    /// not count).
    fn reply_phase(&mut self, bytes: u64) {
        self.within(self.stall);
        self.allow(bytes);
    }
}
