//! Reading weight data from the GGUF file into the backend buffers.
//!
//! The work is cut into pieces of about 8 MiB in file order (a tensor that
//! must be converted as a whole stays one piece), and worker threads, each
//! with its own file handle, take pieces in turn, so they share the bytes
//! evenly whatever the tensor sizes. They read with positioned reads
//! (`pread`): straight into the tensor's memory when it is plain host memory
//! (no bounce copy), otherwise through a reused buffer and
//! `ggml_backend_tensor_set` (GPU, RPC and repacking buffers). Progress is
//! reported from the calling thread only, monotonically from 0 to 1; the
//! progress callback returns false to cancel, which stops the workers at
//! their next piece.

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::time::Duration;

use crate::ml::gguf::TensorInfo;
use crate::ml::{Error, ErrorKind, Result, Tensor};
use crate::sys;

const CHUNK: usize = 8 << 20;

/// Asks the kernel for transparent huge pages on a fresh host weight buffer
/// before it is filled: faulting in and zeroing 4 KiB pages (under the
/// process's memory-map lock) was ~60% of load time (go/ml/backend/loadbench).
/// Advisory only; errors are ignored.
pub(crate) fn prefer_huge_pages(base: usize, size: usize) {
    #[cfg(target_os = "linux")]
    {
        const HUGE: usize = 2 << 20;
        let start = base.div_ceil(HUGE) * HUGE;
        let end = (base + size) / HUGE * HUGE;
        if end > start {
            unsafe { libc::madvise(start as *mut libc::c_void, end - start, libc::MADV_HUGEPAGE) };
        }
    }
    #[cfg(not(target_os = "linux"))]
    let _ = (base, size);
}

fn is_plain_host(t: Tensor) -> bool {
    let r = t.raw();
    if r.buffer.is_null() || r.data.is_null() {
        return false;
    }
    unsafe {
        sys::ggml_backend_buffer_is_host(r.buffer)
            && sys::ggml_backend_buffer_get_type(r.buffer) == sys::ggml_backend_cpu_buffer_type()
    }
}

/// Whether the tensor's buffer must be given the tensor whole: host
/// buffers of types other than the plain CPU one and the CPU's extra buffer
/// types (repacking, AMX, KleidiAI), which convert a tensor as a whole and
/// assert on a partial write. (The repacking type does not call itself host,
/// so a Q4_0 model used to abort the process on x86 at its first tensor over
/// one 8 MiB chunk.)
fn converts_whole(t: Tensor, cpu_dev: sys::ggml_backend_dev_t) -> bool {
    let b = t.raw().buffer;
    if b.is_null() {
        return false;
    }
    unsafe {
        let buft = sys::ggml_backend_buffer_get_type(b);
        buft != sys::ggml_backend_cpu_buffer_type()
            && (sys::ggml_backend_buffer_is_host(b) || (!cpu_dev.is_null() && sys::ggml_backend_buft_get_device(buft) == cpu_dev))
    }
}

/// The group size every target takes pieces of (see
/// `sys::patched::ggml_repack_rs_piece_bytes`), or 0 if any must be written whole.
fn piece_bytes(targets: &[Tensor]) -> usize {
    let sizes: Vec<usize> = targets.iter().map(|t| unsafe { sys::patched::ggml_repack_rs_piece_bytes(t.as_ptr()) }).collect();
    match sizes.first() {
        Some(&g) if g > 0 && sizes.iter().all(|&s| s == g) => g,
        _ => 0,
    }
}

/// How one piece of the file reaches its tensors.
#[derive(Clone, Copy)]
enum Dest {
    /// Straight into plain host memory at this address.
    Host(*mut u8),
    /// Through `ggml_backend_tensor_set` (GPU, RPC): any sub-range.
    Set,
    /// Through `ggml_backend_tensor_set` of the whole tensor in one call
    /// (see `converts_whole`).
    Whole,
}

/// One unit of work: bytes `[off, off + len)` of tensor `tensor`.
struct Piece {
    tensor: usize,
    off: usize,
    len: usize,
    dest: Dest,
}

// Raw destination pointers are only written by the one worker that takes
// the piece; pieces never overlap.
unsafe impl Send for Piece {}
unsafe impl Sync for Piece {}

/// Cuts every tensor into pieces of about `CHUNK` bytes, so that the
/// workers share the bytes evenly whatever the tensor sizes (a whole-tensor
/// piece stays whole). Host pieces end on 2 MiB boundaries of the
/// destination where possible, so two workers rarely fault in the same huge
/// page.
fn plan(infos: &[TensorInfo], sources: &[Vec<Tensor>]) -> Vec<Piece> {
    const HUGE: usize = 2 << 20;
    // (The plain CPU buffer type names no device; its extra types do.)
    let cpu_dev = unsafe { sys::ggml_backend_dev_by_type(sys::GGML_BACKEND_DEVICE_TYPE_CPU) };
    let mut pieces = Vec::new();
    for (i, (info, targets)) in infos.iter().zip(sources).enumerate() {
        let size = info.size as usize;
        if size == 0 || targets.is_empty() {
            continue;
        }
        let dest = if targets.len() == 1 && is_plain_host(targets[0]) {
            Dest::Host(targets[0].raw().data as *mut u8)
        } else if targets.iter().any(|t| converts_whole(*t, cpu_dev)) {
            Dest::Whole
        } else {
            Dest::Set
        };
        // A weight our CPU kernels repacked takes pieces of whole 16-row
        // groups (no staging of a large tensor whole: a tied embedding
        // table is a third of Gemma 3's bytes).
        let group = if let Dest::Whole = dest { piece_bytes(targets) } else { 0 };
        if let (Dest::Whole, 0) = (dest, group) {
            pieces.push(Piece { tensor: i, off: 0, len: size, dest });
            continue;
        }
        let (dest, step) = if group > 0 { (Dest::Set, (CHUNK / group).max(1) * group) } else { (dest, CHUNK) };
        let mut off = 0usize;
        while off < size {
            let mut end = (off + step).min(size);
            if let Dest::Host(p) = dest {
                // Move the cut back to a huge-page boundary of the
                // destination when one lies in the piece's second half.
                let addr = p as usize + end;
                let cut = addr / HUGE * HUGE - p as usize;
                if end < size && cut > off + step / 2 {
                    end = cut;
                }
            }
            pieces.push(Piece { tensor: i, off, len: end - off, dest });
            off = end;
        }
    }
    // Huge pages for every CPU weight buffer written here, including the
    // repacking types (which do not call themselves host): their 4 KiB page
    // faults took a quarter of a Q4_0 load.
    let mut advised = std::collections::HashSet::new();
    for t in sources.iter().flatten() {
        let b = t.raw().buffer;
        if b.is_null() || !advised.insert(b as usize) {
            continue;
        }
        let buft = unsafe { sys::ggml_backend_buffer_get_type(b) };
        let on_cpu = buft == unsafe { sys::ggml_backend_cpu_buffer_type() }
            || (!cpu_dev.is_null() && unsafe { sys::ggml_backend_buft_get_device(buft) } == cpu_dev);
        if on_cpu {
            let base = unsafe { sys::ggml_backend_buffer_get_base(b) } as usize;
            if base != 0 {
                prefer_huge_pages(base, unsafe { sys::ggml_backend_buffer_get_size(b) });
            }
        }
    }
    // Longest first: whole-tensor pieces (largest first), then the rest in
    // file order, so no worker is left converting a big tensor alone at
    // the end.
    pieces.sort_by_key(|p| match p.dest {
        Dest::Whole => (0, usize::MAX - p.len),
        _ => (1, 0),
    });
    pieces
}

/// Loads every tensor of `infos` into its targets (`sources[i]`). `threads`
/// workers; `progress(fraction) -> keep going`.
///
/// Before anything is read, every tensor's range is checked against the
/// file's current size and every target's size against the tensor's (the
/// file may have changed since it was opened).
pub(crate) fn load(
    path: &str,
    infos: &[TensorInfo],
    sources: &[Vec<Tensor>],
    threads: usize,
    progress: &mut dyn FnMut(f32) -> bool,
) -> Result<()> {
    // The path is opened again here: what it names now may no longer be the
    // regular file that was opened (a named pipe would block the load).
    let open = || {
        crate::ml::regular_file::open(path)
            .map_err(|e| Error::new(ErrorKind::Io, format!("load: cannot open {path}: {e}")))
    };
    let (file, meta) = open()?;
    let file_len = meta.len();
    for (info, targets) in infos.iter().zip(sources) {
        match info.offset.checked_add(info.size) {
            Some(end) if end <= file_len => {}
            _ => {
                return Err(Error::new(
                    ErrorKind::Format,
                    format!(
                        "load: tensor {}: its data ({} bytes at offset {}) lies beyond the end of the file ({file_len} bytes)",
                        info.name, info.size, info.offset
                    ),
                ))
            }
        }
        for t in targets {
            if t.nbytes() as u64 != info.size {
                return Err(Error::new(
                    ErrorKind::Format,
                    format!("load: tensor {}: file has {} bytes, the tensor needs {}", info.name, info.size, t.nbytes()),
                ));
            }
        }
    }

    let pieces = plan(infos, sources);
    let total: u64 = pieces.iter().map(|p| p.len as u64).sum();
    let done = AtomicU64::new(0);
    let next = AtomicUsize::new(0);
    let cancel = AtomicBool::new(false);
    let first_error: parking_lot::Mutex<Option<Error>> = parking_lot::Mutex::new(None);
    let n_workers = threads.max(1).min(pieces.len().max(1));
    let workers_left = AtomicUsize::new(n_workers);
    let reporter = std::thread::current();
    let fail = |e: Error| {
        let mut slot = first_error.lock();
        if slot.is_none() {
            *slot = Some(e);
        }
        cancel.store(true, Ordering::SeqCst);
    };

    if !progress(0.0) {
        return Err(Error::new(ErrorKind::Aborted, "load: cancelled"));
    }
    let mut first_file = Some(file);
    std::thread::scope(|scope| {
        for _ in 0..n_workers {
            // Each worker has its own handle (and so its own readahead).
            let handle = first_file.take().map(Ok).unwrap_or_else(|| open().map(|(f, _)| f));
            let (pieces, done, next, cancel, fail, workers_left, reporter) =
                (&pieces, &done, &next, &cancel, &fail, &workers_left, &reporter);
            scope.spawn(move || {
                match handle {
                    Ok(file) => {
                        let mut buf: Vec<u8> = Vec::new();
                        loop {
                            let i = next.fetch_add(1, Ordering::Relaxed);
                            if i >= pieces.len() || cancel.load(Ordering::Relaxed) {
                                break;
                            }
                            let p = &pieces[i];
                            if let Err(e) = load_piece(&file, &infos[p.tensor], &sources[p.tensor], p, &mut buf) {
                                fail(e);
                                break;
                            }
                            done.fetch_add(p.len as u64, Ordering::Relaxed);
                        }
                    }
                    Err(e) => fail(e),
                }
                if workers_left.fetch_sub(1, Ordering::SeqCst) == 1 {
                    reporter.unpark();
                }
            });
        }
        // Report from this thread while the workers run; the last worker
        // to finish wakes it at once.
        let mut last = -1.0f32;
        loop {
            let finished = workers_left.load(Ordering::SeqCst) == 0;
            let frac = if total == 0 { 1.0 } else { (done.load(Ordering::SeqCst) as f64 / total as f64) as f32 };
            if frac > last && !cancel.load(Ordering::SeqCst) {
                last = frac;
                if !progress(frac.min(1.0)) {
                    cancel.store(true, Ordering::SeqCst);
                    let mut slot = first_error.lock();
                    if slot.is_none() {
                        *slot = Some(Error::new(ErrorKind::Aborted, "load: cancelled"));
                    }
                }
            }
            if finished {
                break;
            }
            std::thread::park_timeout(Duration::from_millis(10));
        }
    });
    match first_error.into_inner() {
        Some(e) => Err(e),
        None => Ok(()),
    }
}

fn load_piece(file: &File, info: &TensorInfo, targets: &[Tensor], p: &Piece, buf: &mut Vec<u8>) -> Result<()> {
    let read_err = |e: std::io::Error| Error::new(ErrorKind::Io, format!("load: reading tensor {}: {e}", info.name));
    let at = info.offset + p.off as u64;
    match p.dest {
        Dest::Host(base) => {
            // SAFETY: the tensor's memory holds info.size bytes (checked),
            // and only this worker writes this piece of it.
            let dst = unsafe { std::slice::from_raw_parts_mut(base.add(p.off), p.len) };
            file.read_exact_at(dst, at).map_err(read_err)
        }
        Dest::Set | Dest::Whole => {
            if buf.len() < p.len {
                buf.clear();
                buf.reserve_exact(p.len);
                prefer_huge_pages(buf.as_ptr() as usize, buf.capacity());
                buf.resize(p.len, 0);
            }
            file.read_exact_at(&mut buf[..p.len], at).map_err(read_err)?;
            for t in targets {
                unsafe { sys::ggml_backend_tensor_set(t.as_ptr(), buf.as_ptr().cast(), p.off, p.len) };
            }
            Ok(())
        }
    }
}
