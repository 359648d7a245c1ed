//! Reading weight data from the GGUF file into the backend buffers.
//!
//! Worker threads take tensors in file order, each with its own file
//! handle, and read with positioned reads (`pread`): straight into the
//! tensor's memory when it is plain host memory, otherwise in chunks through
//! `ggml_backend_tensor_set` (GPU, RPC and repacking buffers). Progress is
//! reported from the calling thread only, monotonically from 0 to 1; the
//! progress callback returns false to cancel, which stops the workers at
//! their next chunk.

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

/// Loads every tensor of `infos` into its targets (`sources[i]`). `threads`
/// workers; `progress(fraction) -> keep going`.
pub(crate) fn load(
    path: &str,
    infos: &[TensorInfo],
    sources: &[Vec<Tensor>],
    threads: usize,
    progress: &mut dyn FnMut(f32) -> bool,
) -> Result<()> {
    let total: u64 = infos.iter().map(|i| i.size).sum();
    let done = AtomicU64::new(0);
    let next = AtomicUsize::new(0);
    let cancel = AtomicBool::new(false);
    let first_error: parking_lot::Mutex<Option<Error>> = parking_lot::Mutex::new(None);
    let workers_left = AtomicUsize::new(threads.max(1));
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
    std::thread::scope(|scope| {
        for _ in 0..threads.max(1) {
            scope.spawn(|| {
                let file = match File::open(path) {
                    Ok(f) => f,
                    Err(e) => {
                        fail(Error::new(ErrorKind::Io, format!("load: cannot open {path}: {e}")));
                        workers_left.fetch_sub(1, Ordering::SeqCst);
                        return;
                    }
                };
                let mut buf: Vec<u8> = Vec::new();
                loop {
                    let i = next.fetch_add(1, Ordering::SeqCst);
                    if i >= infos.len() || cancel.load(Ordering::SeqCst) {
                        break;
                    }
                    if let Err(e) = load_one(&file, &infos[i], &sources[i], &mut buf, &done, &cancel) {
                        fail(e);
                        break;
                    }
                }
                workers_left.fetch_sub(1, Ordering::SeqCst);
            });
        }
        // Report from this thread while the workers run.
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
            std::thread::sleep(Duration::from_millis(10));
        }
    });
    match first_error.into_inner() {
        Some(e) => Err(e),
        None => Ok(()),
    }
}

fn load_one(file: &File, info: &TensorInfo, targets: &[Tensor], buf: &mut Vec<u8>, done: &AtomicU64, cancel: &AtomicBool) -> Result<()> {
    let size = info.size as usize;
    for t in targets {
        if t.nbytes() != size {
            return Err(Error::new(
                ErrorKind::Format,
                format!("load: tensor {}: file has {size} bytes, the tensor needs {}", info.name, t.nbytes()),
            ));
        }
    }
    let read_err = |e: std::io::Error| Error::new(ErrorKind::Io, format!("load: reading tensor {}: {e}", info.name));
    // Fast path: one target in plain host memory: read straight into it.
    if targets.len() == 1 && is_plain_host(targets[0]) {
        let dst = unsafe { std::slice::from_raw_parts_mut(targets[0].raw().data as *mut u8, size) };
        let mut off = 0usize;
        while off < size {
            if cancel.load(Ordering::Relaxed) {
                return Ok(());
            }
            let n = CHUNK.min(size - off);
            file.read_exact_at(&mut dst[off..off + n], info.offset + off as u64).map_err(read_err)?;
            off += n;
            done.fetch_add(n as u64, Ordering::Relaxed);
        }
        return Ok(());
    }
    // Host buffers of other types (the CPU's repacking buffers) convert a
    // tensor as a whole: give them everything in one call.
    let whole = targets.iter().any(|t| {
        let b = t.raw().buffer;
        !b.is_null() && unsafe { sys::ggml_backend_buffer_is_host(b) }
    });
    let chunk = if whole { size.max(1) } else { CHUNK };
    buf.resize(chunk.min(size.max(1)), 0);
    let mut off = 0usize;
    while off < size {
        if cancel.load(Ordering::Relaxed) {
            return Ok(());
        }
        let n = chunk.min(size - off);
        file.read_exact_at(&mut buf[..n], info.offset + off as u64).map_err(read_err)?;
        for t in targets {
            unsafe { sys::ggml_backend_tensor_set(t.as_ptr(), buf.as_ptr().cast(), off, n) };
        }
        off += n;
        done.fetch_add(n as u64, Ordering::Relaxed);
    }
    Ok(())
}
