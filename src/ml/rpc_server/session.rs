//! One client's connection: its buffers, its last graph, and the commands.
//! Every command is checked whole before anything is allocated, written or
//! computed; a bad one ends this connection with the reason in the log (the
//! protocol has no error replies: upstream's server closes the connection
//! too, and ggml-rs's client reports the server lost with that cause).

use std::io::Write;
use std::path::PathBuf;
use std::time::Duration;

use super::budget::Budget;
use super::graph::{self, Buffer, Buffers, Graph, Scratch};
use super::idle::Slot;
use super::wire::{self, Conn, Fields, TENSOR};
use crate::sys;

/// Largest GRAPH_COMPUTE request (its tensors are 296 bytes each).
const MAX_GRAPH_BYTES: u64 = 12 + (graph::MAX_GRAPH_TENSORS as u64) * (8 + TENSOR as u64);
/// SET_TENSOR data moves through memory in pieces of this size.
const PIECE: usize = 4 << 20;

const CLOSED_EARLY: &str = "closed before HELLO";

pub struct Session<'a> {
    pub conn: Conn,
    pub backend: sys::ggml_backend_t,
    pub device: sys::ggml_backend_dev_t,
    pub cache_dir: Option<PathBuf>,
    pub budget: &'a Budget,
    pub bufs: Buffers,
    last: Option<Graph>,
    /// How long a request may take, besides its bytes' time.
    request_limit: Duration,
}

/// Why a session ended: the peer left, or what was wrong.
pub enum End {
    Closed,
    Refused(String),
    /// Its slot went to a new client while it idled.
    Evicted,
}

impl<'a> Session<'a> {
    pub fn new(
        conn: Conn,
        backend: sys::ggml_backend_t,
        device: sys::ggml_backend_dev_t,
        cache_dir: Option<PathBuf>,
        budget: &'a Budget,
        request_limit: Duration,
    ) -> Self {
        Session { conn, backend, device, cache_dir, budget, bufs: Buffers::default(), last: None, request_limit }
    }

    /// HELLO, then commands until the peer closes, sends something bad,
    /// or loses its slot while idle. HELLO must be through within `hello`,
    /// each request within `request_limit` plus its bytes' time at
    /// [`wire::MIN_RATE`]; the wait for a command has no deadline (the
    /// listener ends a connection that idles too long when its slot is
    /// needed).
    pub fn run(&mut self, hello: Duration, idle: &Slot) -> End {
        self.conn.within(hello);
        let said_hello = (|| -> Result<(), String> {
            match self.conn.command().map_err(|e| format!("waiting for HELLO: {e}"))? {
                Some(wire::HELLO) => {}
                Some(c) => return Err(format!("the first command must be HELLO, got {} ({c})", wire::command_name(c))),
                None => return Err(CLOSED_EARLY.into()),
            }
            self.conn.fixed(wire::CAPS)?;
            let mut r = wire::VERSION.to_vec();
            r.push(0);
            r.extend([0u8; wire::CAPS]);
            self.conn.reply(&r)
        })();
        match said_hello {
            Ok(()) => {}
            // A port probe (connect, then close) is no refusal.
            Err(e) if e == CLOSED_EARLY => return End::Closed,
            Err(e) => return End::Refused(format!("HELLO: {e}")),
        }
        loop {
            self.conn.unbounded();
            if !idle.waiting() {
                return End::Evicted;
            }
            let cmd = match self.conn.command() {
                Ok(Some(c)) => c,
                Ok(None) => return End::Closed,
                Err(e) => return End::Refused(format!("waiting for a command: {e}")),
            };
            if !idle.busy() {
                return End::Evicted;
            }
            // Once a command starts, its bytes must keep coming.
            self.conn.within(self.request_limit);
            if let Err(e) = self.command(cmd) {
                return End::Refused(format!("{}: {e}", wire::command_name(cmd)));
            }
        }
    }

    fn command(&mut self, cmd: u8) -> Result<(), String> {
        match cmd {
            wire::DEVICE_COUNT => {
                self.conn.fixed(0)?;
                self.conn.reply(&1u32.to_ne_bytes())
            }
            wire::ALLOC_BUFFER => {
                let p = self.conn.fixed(12)?;
                let mut f = Fields::new(&p);
                self.device_id(f.u32()?)?;
                let size = f.u64()?;
                let (handle, got) = self.alloc(size);
                let mut r = handle.to_ne_bytes().to_vec();
                r.extend(got.to_ne_bytes());
                self.conn.reply(&r)
            }
            wire::GET_ALIGNMENT | wire::GET_MAX_SIZE => {
                let p = self.conn.fixed(4)?;
                self.device_id(Fields::new(&p).u32()?)?;
                let buft = unsafe { sys::ggml_backend_get_default_buffer_type(self.backend) };
                let v = if cmd == wire::GET_ALIGNMENT {
                    unsafe { sys::ggml_backend_buft_get_alignment(buft) }
                } else {
                    unsafe { sys::ggml_backend_buft_get_max_size(buft) }.min(self.budget.limit as usize)
                };
                self.conn.reply(&(v as u64).to_ne_bytes())
            }
            wire::GET_DEVICE_MEMORY => {
                let p = self.conn.fixed(4)?;
                self.device_id(Fields::new(&p).u32()?)?;
                let (mut free, mut total) = (0usize, 0usize);
                unsafe { sys::ggml_backend_dev_memory(self.device, &mut free, &mut total) };
                let free = (free as u64).min(self.budget.limit.saturating_sub(self.budget.used()));
                let mut r = free.to_ne_bytes().to_vec();
                r.extend((total as u64).to_ne_bytes());
                self.conn.reply(&r)
            }
            wire::BUFFER_GET_BASE => {
                let p = self.conn.fixed(8)?;
                let b = self.bufs.get(Fields::new(&p).u64()?)?;
                let base = b.base;
                self.conn.reply(&base.to_ne_bytes())
            }
            wire::FREE_BUFFER => {
                let p = self.conn.fixed(8)?;
                let h = Fields::new(&p).u64()?;
                self.bufs.get(h)?;
                // The last graph may point into it.
                self.last = None;
                let b = self.bufs.map.remove(&h).unwrap();
                unsafe { sys::ggml_backend_buffer_free(b.raw) };
                self.budget.release(b.booked);
                Ok(())
            }
            wire::BUFFER_CLEAR => {
                let p = self.conn.fixed(9)?;
                let mut f = Fields::new(&p);
                let b = self.bufs.get(f.u64()?)?;
                unsafe { sys::ggml_backend_buffer_clear(b.raw, f.u8()?) };
                Ok(())
            }
            wire::SET_TENSOR => self.set_tensor(),
            wire::SET_TENSOR_HASH => self.set_tensor_hash(),
            wire::GET_TENSOR => {
                let p = self.conn.fixed(TENSOR + 16)?;
                let mut f = Fields::new(&p);
                let w = f.tensor()?;
                let (offset, size) = (f.u64()?, f.u64()?);
                let (buf, at) = self.region(&w, offset, size)?;
                self.conn.reply_header(size)?;
                let mut piece = vec![0u8; (size as usize).min(PIECE)];
                let mut done = 0u64;
                while done < size {
                    let n = ((size - done) as usize).min(PIECE);
                    raw_io(buf, at + done, &mut piece[..n], false);
                    self.conn.write_part(&piece[..n])?;
                    done += n as u64;
                }
                Ok(())
            }
            wire::MEMSET_TENSOR => {
                let p = self.conn.fixed(TENSOR + 17)?;
                let mut f = Fields::new(&p);
                let w = f.tensor()?;
                let (offset, size, value) = (f.u64()?, f.u64()?, f.u8()?);
                let (buf, at) = self.region(&w, offset, size)?;
                if size > 0 {
                    let t = region_tensor(buf, at, size)?;
                    unsafe { sys::ggml_backend_tensor_memset(t.1, value, 0, size as usize) };
                }
                Ok(())
            }
            wire::COPY_TENSOR => {
                let p = self.conn.fixed(2 * TENSOR)?;
                let mut f = Fields::new(&p);
                let (ws, wd) = (f.tensor()?, f.tensor()?);
                let mut s = Scratch::new(2, 0)?;
                let src = s.tensor(&ws, &self.bufs, true)?;
                let dst = s.tensor(&wd, &self.bufs, true)?;
                let (ns, nd) = unsafe { (sys::ggml_nbytes(src), sys::ggml_nbytes(dst)) };
                if ns != nd || !unsafe { sys::ggml_is_contiguous(src) && sys::ggml_is_contiguous(dst) } {
                    return Err(format!("copies {ns} bytes into {nd}, or a tensor is not contiguous"));
                }
                unsafe { sys::ggml_backend_tensor_copy(src, dst) };
                self.conn.reply(&[1u8])
            }
            wire::INIT_TENSOR => {
                let p = self.conn.fixed(TENSOR)?;
                let w = Fields::new(&p).tensor()?;
                let mut s = Scratch::new(1, 0)?;
                let t = s.tensor(&w, &self.bufs, true)?;
                let st = unsafe { sys::ggml_backend_buffer_init_tensor((*t).buffer, t) };
                if st != sys::GGML_STATUS_SUCCESS || unsafe { !(*t).extra.is_null() } {
                    return Err("the buffer cannot initialise this tensor".into());
                }
                Ok(())
            }
            wire::GET_ALLOC_SIZE => {
                let p = self.conn.fixed(4 + TENSOR * (1 + sys::GGML_MAX_SRC as usize))?;
                let mut f = Fields::new(&p);
                self.device_id(f.u32()?)?;
                let w = f.tensor()?;
                let mut s = Scratch::new(1, 0)?;
                let t = s.tensor(&w, &self.bufs, false)?;
                let buft = unsafe {
                    if (*t).buffer.is_null() {
                        sys::ggml_backend_get_default_buffer_type(self.backend)
                    } else {
                        sys::ggml_backend_buffer_get_type((*t).buffer)
                    }
                };
                let n = unsafe { sys::ggml_backend_buft_get_alloc_size(buft, t) } as u64;
                self.conn.reply(&n.to_ne_bytes())
            }
            wire::GRAPH_COMPUTE => {
                let size = self.conn.size().map_err(|e| format!("reading the size: {e}"))?;
                let p = self.conn.payload(size, MAX_GRAPH_BYTES)?;
                self.last = None;
                let (device, g) = graph::build(&p, &self.bufs)?;
                self.device_id(device)?;
                self.compute(&g)?;
                self.last = Some(g);
                Ok(())
            }
            wire::GRAPH_RECOMPUTE => {
                let p = self.conn.fixed(4)?;
                self.device_id(Fields::new(&p).u32()?)?;
                let g = self.last.take().ok_or("no graph to compute again")?;
                self.compute(&g)?;
                self.last = Some(g);
                Ok(())
            }
            wire::HELLO => Err("HELLO again".into()),
            c => Err(format!("unknown command {c}")),
        }
    }

    fn device_id(&self, d: u32) -> Result<(), String> {
        if d == 0 {
            Ok(())
        } else {
            Err(format!("device {d} (this server has 1)"))
        }
    }

    /// A new buffer of `size` bytes within the server's memory budget:
    /// (handle, size), or (0, 0) when it cannot be had (the client then
    /// reports an allocation failure, as for a full device).
    fn alloc(&mut self, size: u64) -> (u64, u64) {
        if size == 0 || !self.budget.take(size) {
            return (0, 0);
        }
        let buft = unsafe { sys::ggml_backend_get_default_buffer_type(self.backend) };
        let raw = if size > usize::MAX as u64 { std::ptr::null_mut() } else { unsafe { sys::ggml_backend_buft_alloc_buffer(buft, size as usize) } };
        if raw.is_null() {
            self.budget.release(size);
            return (0, 0);
        }
        let base = unsafe { sys::ggml_backend_buffer_get_base(raw) } as u64;
        let got = unsafe { sys::ggml_backend_buffer_get_size(raw) } as u64;
        // The budget counts what was asked; ggml may round up a little.
        self.bufs.map.insert(raw as u64, Buffer { raw, base, size: got, booked: size });
        (raw as u64, got)
    }

    /// The buffer and address of `size` bytes at `offset` into tensor `w`'s
    /// data, all inside one of this connection's buffers.
    fn region(&self, w: &wire::WireTensor, offset: u64, size: u64) -> Result<(sys::ggml_backend_buffer_t, u64), String> {
        graph::check_tensor(w, &self.bufs, true)?;
        let b = self.bufs.get(w.buffer)?;
        let start = w.data as u128 + offset as u128;
        if start < b.base as u128 || start + size as u128 > b.base as u128 + b.size as u128 {
            return Err(format!(
                "{size} bytes at offset {offset} of tensor {} lie outside its buffer [{:#x}, {:#x})",
                w.id,
                b.base,
                b.base as u128 + b.size as u128
            ));
        }
        Ok((b.raw, start as u64))
    }

    /// SET_TENSOR: rpc_tensor | cache flag u8 | offset u64 | data. The
    /// target is checked before the data is read, and the data goes to the
    /// buffer piece by piece as it arrives.
    fn set_tensor(&mut self) -> Result<(), String> {
        let size = self.conn.size().map_err(|e| format!("reading the size: {e}"))?;
        let head = (TENSOR + 9) as u64;
        if size < head {
            return Err(format!("{size} bytes, less than the {head} of its header"));
        }
        let p = self.conn.payload(head, head)?;
        let mut f = Fields::new(&p);
        let w = f.tensor()?;
        let (cache, offset) = (f.u8()?, f.u64()?);
        let n = size - head;
        let (buf, at) = self.region(&w, offset, n)?;
        // Its data's time, now that its size is known to fit.
        self.conn.allow(n);
        let mut file = match (&self.cache_dir, cache != 0) {
            (Some(dir), true) => Some(CacheWriter::new(dir)),
            _ => None,
        };
        let mut piece = vec![0u8; (n as usize).min(PIECE)];
        let mut done = 0u64;
        while done < n {
            let k = ((n - done) as usize).min(PIECE);
            self.conn.read_into(&mut piece[..k])?;
            raw_io(buf, at + done, &mut piece[..k], true);
            if let Some(c) = file.as_mut() {
                c.add(&piece[..k]);
            }
            done += k as u64;
        }
        if let Some(c) = file {
            c.finish();
        }
        Ok(())
    }

    /// SET_TENSOR_HASH: rpc_tensor | offset u64 | hash u64 -> found u8.
    fn set_tensor_hash(&mut self) -> Result<(), String> {
        let p = self.conn.fixed(TENSOR + 16)?;
        let mut f = Fields::new(&p);
        let w = f.tensor()?;
        let (offset, hash) = (f.u64()?, f.u64()?);
        let path = match &self.cache_dir {
            Some(dir) => dir.join(format!("{hash:016x}")),
            None => return self.conn.reply(&[0]),
        };
        let data = match std::fs::read(&path) {
            Ok(d) if fnv(&d, FNV_START) == hash => d,
            _ => return self.conn.reply(&[0]),
        };
        let (buf, at) = self.region(&w, offset, data.len() as u64)?;
        let mut data = data;
        raw_io(buf, at, &mut data, true);
        self.conn.reply(&[1])
    }

    fn compute(&mut self, g: &Graph) -> Result<(), String> {
        let st = unsafe { sys::ggml_backend_graph_compute(self.backend, g.graph) };
        if st != sys::GGML_STATUS_SUCCESS {
            return Err(format!("the compute failed (ggml status {st})"));
        }
        for &n in &g.nodes {
            let t = unsafe { &mut *n };
            if t.flags & (1 << 30) != 0 {
                t.flags &= !(1 << 30);
                return Err(format!("{}: a row id out of range", super::rules::op_name(t.op as u32)));
            }
        }
        Ok(())
    }
}

impl Drop for Session<'_> {
    fn drop(&mut self) {
        self.last = None;
        for (_, b) in self.bufs.map.drain() {
            unsafe { sys::ggml_backend_buffer_free(b.raw) };
            self.budget.release(b.booked);
        }
    }
}

/// A 1-D byte tensor over `[at, at + size)` of `buf`, for ggml's
/// set/get/memset calls (which check against the tensor's own size).
fn region_tensor(buf: sys::ggml_backend_buffer_t, at: u64, size: u64) -> Result<(Scratch, *mut sys::ggml_tensor), String> {
    let s = Scratch::new(1, 0)?;
    let ne = [size as i64, 1, 1, 1];
    let t = unsafe { sys::ggml_new_tensor(s.ctx, sys::GGML_TYPE_I8, 1, ne.as_ptr()) };
    if t.is_null() {
        return Err("cannot make a tensor".into());
    }
    unsafe {
        (*t).buffer = buf;
        (*t).data = at as *mut std::ffi::c_void;
    }
    Ok((s, t))
}

/// Writes `data` to (or reads it from) `[at, at + len)` of `buf`, which
/// the caller has checked.
fn raw_io(buf: sys::ggml_backend_buffer_t, at: u64, data: &mut [u8], write: bool) {
    if data.is_empty() {
        return;
    }
    let (_s, t) = region_tensor(buf, at, data.len() as u64).expect("a one-tensor context");
    unsafe {
        if write {
            sys::ggml_backend_tensor_set(t, data.as_ptr().cast(), 0, data.len());
        } else {
            sys::ggml_backend_tensor_get(t, data.as_mut_ptr().cast(), 0, data.len());
        }
    }
}

const FNV_START: u64 = 0xcbf29ce484222325;

/// ggml's cache key: 64-bit FNV-1a.
fn fnv(data: &[u8], mut h: u64) -> u64 {
    for &b in data {
        h ^= b as u64;
        h = h.wrapping_mul(0x100000001b3);
    }
    h
}

/// Writes a tensor's data to the cache folder under its hash, through a
/// temporary file renamed at the end (a dropped connection leaves nothing).
struct CacheWriter {
    dir: PathBuf,
    tmp: PathBuf,
    file: Option<std::fs::File>,
    hash: u64,
}

impl CacheWriter {
    fn new(dir: &std::path::Path) -> Self {
        let tmp = dir.join(format!(".partial-{}", std::process::id()));
        let file = std::fs::File::create(&tmp).ok();
        CacheWriter { dir: dir.to_path_buf(), tmp, file, hash: FNV_START }
    }
    fn add(&mut self, part: &[u8]) {
        self.hash = fnv(part, self.hash);
        if let Some(f) = self.file.as_mut() {
            if f.write_all(part).is_err() {
                self.file = None;
            }
        }
    }
    fn finish(mut self) {
        if self.file.take().is_some() {
            let _ = std::fs::rename(&self.tmp, self.dir.join(format!("{:016x}", self.hash)));
        }
    }
}

impl Drop for CacheWriter {
    /// Removes the temporary file unless `finish` renamed it.
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.tmp);
    }
}
