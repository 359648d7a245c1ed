//! One slab of a tensor's rows converted and quantized by several threads
//! at once: each thread calls [`quantize_slab`] and takes chunks of rows in
//! turn from a shared counter until none is left, so that a thread makes
//! one call per slab (a Go worker one cgo call) rather than one per chunk.
//! Rows are quantized independently (ggml_quantize_chunk), so the bytes
//! depend neither on the threads nor on the chunks.

use std::marker::PhantomData;
use std::sync::atomic::{AtomicI32, AtomicU64, Ordering::Relaxed};

use super::quant::{quantize, to_f32};
use super::{Error, ErrorKind, Result};

/// The destination of a slab: rows that several threads write at once,
/// each a range no other thread takes (the counter of [`quantize_slab`]
/// hands out every row once).
pub struct SharedRows<'a> {
    ptr: *mut u8,
    len: usize,
    _life: PhantomData<&'a mut [u8]>,
}

// SAFETY: the threads write disjoint ranges (see rows_mut's callers).
unsafe impl Sync for SharedRows<'_> {}

impl<'a> SharedRows<'a> {
    /// # Safety
    /// `ptr` is valid for writes of `len` bytes for `'a`, and nothing else
    /// reads or writes them meanwhile.
    pub unsafe fn new(ptr: *mut u8, len: usize) -> Self {
        SharedRows { ptr, len, _life: PhantomData }
    }

    /// Bytes `lo..hi`, which no other thread may use at the same time.
    #[allow(clippy::mut_from_ref)]
    fn rows_mut(&self, lo: usize, hi: usize) -> &mut [u8] {
        assert!(lo <= hi && hi <= self.len, "slab rows {lo}..{hi} outside {} bytes", self.len);
        // SAFETY: in bounds (above); the ranges quantize_slab asks for come
        // from distinct counter values, so no two threads overlap.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.add(lo), hi - lo) }
    }
}

/// A slab: `rows` rows of `ncols` values of type `from` in `src` (row
/// after row, `src_row` bytes each), to type `to` in `dst` (`dst_row`
/// bytes each), taken in chunks of at most `chunk` rows by `threads`
/// threads. `imatrix` (optional) holds `ncols` importance weights per
/// expert of `per_expert` rows; the slab's first row is row `first` of the
/// tensor, and a chunk is split where an expert ends.
pub struct Slab<'a> {
    pub from: u32,
    pub to: u32,
    pub src: &'a [u8],
    pub src_row: usize,
    pub dst: SharedRows<'a>,
    pub dst_row: usize,
    pub ncols: usize,
    pub rows: usize,
    pub chunk: usize,
    pub threads: usize,
    pub imatrix: Option<&'a [f32]>,
    pub per_expert: usize,
    pub first: usize,
}

/// Where a slab failed.
#[derive(Debug)]
pub struct SlabError {
    pub error: Error,
    /// In the conversion to f32 (the source type), not the quantization.
    pub in_convert: bool,
}

impl Slab<'_> {
    /// Whether the slab's sizes hold together (checked before any thread
    /// starts; quantize_slab assumes it).
    pub fn check(&self) -> Result<()> {
        let bad = |m: String| Err(Error::shape(format!("quantize slab: {m}")));
        if self.ncols == 0 || self.chunk == 0 || self.threads == 0 {
            return bad(format!("{} columns, chunks of {} rows, {} threads", self.ncols, self.chunk, self.threads));
        }
        let need = |row: usize| self.rows.checked_mul(row);
        if need(self.src_row).map_or(true, |n| n > self.src.len()) || need(self.dst_row).map_or(true, |n| n > self.dst.len) {
            return bad(format!(
                "{} rows of {} and {} bytes do not fit {} and {} bytes",
                self.rows,
                self.src_row,
                self.dst_row,
                self.src.len(),
                self.dst.len
            ));
        }
        if let Some(m) = self.imatrix {
            if self.per_expert == 0 {
                return bad("experts of 0 rows".into());
            }
            let experts = self.rows.checked_add(self.first).map(|end| end.saturating_sub(1) / self.per_expert + 1);
            if experts.and_then(|e| e.checked_mul(self.ncols)).map_or(true, |n| n > m.len()) {
                return bad(format!("{} importance weights do not cover rows {}..+{}", m.len(), self.first, self.rows));
            }
        }
        Ok(())
    }
}

/// This thread's part of the slab: takes chunks of rows from `next` (the
/// first row not yet taken, shared by the slab's threads) until none is
/// left or `failed` is set, converting each chunk to f32 in `scratch`
/// (room for `chunk × ncols` values) and quantizing it into its rows of
/// `dst`. A chunk is `chunk` rows, fewer towards the end of the slab (a
/// (2 × threads)th of the rows left, at least one), so that the threads
/// finish together. The first failure sets `failed`, which stops the
/// slab's other threads (and those of any slab sharing it) at their next
/// chunk. The slab must pass [`Slab::check`].
pub fn quantize_slab(s: &Slab, next: &AtomicU64, failed: &AtomicI32, scratch: &mut [f32]) -> std::result::Result<(), SlabError> {
    let fail = |error: Error, in_convert: bool| {
        failed.store(1, Relaxed);
        Err(SlabError { error, in_convert })
    };
    if scratch.len() < s.chunk.saturating_mul(s.ncols) {
        let e = Error::invalid(format!("quantize slab: scratch of {} values, chunks need {}", scratch.len(), s.chunk * s.ncols));
        return fail(e, false);
    }
    let rows = s.rows as u64;
    let mut lo = next.load(Relaxed);
    loop {
        if failed.load(Relaxed) != 0 || lo >= rows {
            return Ok(());
        }
        let take = ((rows - lo) / (2 * s.threads as u64)).clamp(1, s.chunk as u64);
        if let Err(now) = next.compare_exchange(lo, lo + take, Relaxed, Relaxed) {
            lo = now; // another thread took those rows
            continue;
        }
        let (mut a, hi) = (lo as usize, (lo + take) as usize);
        while a < hi {
            let mut b = hi;
            let mut im = None;
            if let Some(m) = s.imatrix {
                let e = (s.first + a) / s.per_expert;
                b = b.min((e + 1) * s.per_expert - s.first);
                im = Some(&m[e * s.ncols..(e + 1) * s.ncols]);
            }
            let n = (b - a) * s.ncols;
            let f32s = &mut scratch[..n];
            if let Err(e) = to_f32(s.from, &s.src[a * s.src_row..b * s.src_row], n as u64, f32s) {
                return fail(e, true);
            }
            let dst = s.dst.rows_mut(a * s.dst_row, b * s.dst_row);
            match quantize(s.to, f32s, s.ncols as u64, im, dst) {
                Err(e) => return fail(e, false),
                Ok(w) if w != dst.len() => {
                    let e = Error::new(
                        ErrorKind::Shape,
                        format!("quantize slab: {w} bytes quantized, not {} rows of {} bytes", b - a, s.dst_row),
                    );
                    return fail(e, false);
                }
                Ok(_) => {}
            }
            a = b;
        }
        lo = next.load(Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ml::quant::quantized_size;
    use crate::sys;

    const Q4_0: u32 = sys::GGML_TYPE_Q4_0;
    const F16: u32 = sys::GGML_TYPE_F16;
    const F32: u32 = sys::GGML_TYPE_F32;

    fn values(n: usize) -> Vec<f32> {
        (0..n).map(|i| ((i * 7919 % 1000) as f32 / 250.0 - 2.0) * (1.0 + (i % 13) as f32)).collect()
    }

    fn bytes(v: &[f32]) -> Vec<u8> {
        v.iter().flat_map(|x| x.to_ne_bytes()).collect()
    }

    /// Runs a slab of `rows` F32 rows to `to` on `threads` threads.
    #[allow(clippy::too_many_arguments)]
    fn run(to: u32, src: &[f32], ncols: usize, rows: usize, chunk: usize, threads: usize, im: Option<&[f32]>, per_expert: usize) -> (Vec<u8>, std::result::Result<(), String>) {
        let src = bytes(src);
        let dst_row = quantized_size(to, ncols as u64, 1).unwrap() as usize;
        let mut dst = vec![0u8; rows * dst_row];
        let (next, failed) = (AtomicU64::new(0), AtomicI32::new(0));
        let slab = Slab {
            from: F32,
            to,
            src: &src,
            src_row: ncols * 4,
            dst: unsafe { SharedRows::new(dst.as_mut_ptr(), dst.len()) },
            dst_row,
            ncols,
            rows,
            chunk,
            threads,
            imatrix: im,
            per_expert,
            first: 0,
        };
        slab.check().unwrap();
        let results: Vec<_> = std::thread::scope(|s| {
            let hs: Vec<_> = (0..threads)
                .map(|_| {
                    s.spawn(|| {
                        let mut scratch = vec![0f32; chunk * ncols];
                        quantize_slab(&slab, &next, &failed, &mut scratch)
                    })
                })
                .collect();
            hs.into_iter().map(|h| h.join().unwrap()).collect()
        });
        let r = results.into_iter().find_map(|r| r.err()).map_or(Ok(()), |e| Err(format!("{} (in convert: {})", e.error, e.in_convert)));
        (dst, r)
    }

    #[test]
    fn threads_and_chunks_give_the_bytes_of_one_call_per_expert() {
        let (ncols, rows, per_expert) = (64, 37, 10);
        let src = values(ncols * rows);
        let im: Vec<f32> = (0..ncols * 4).map(|i| 0.5 + (i % 17) as f32 / 8.0).collect();
        // The reference: each expert's rows in one call with its weights.
        let dst_row = quantized_size(Q4_0, ncols as u64, 1).unwrap() as usize;
        let mut want = vec![0u8; rows * dst_row];
        for e in 0..rows.div_ceil(per_expert) {
            let (a, b) = (e * per_expert, ((e + 1) * per_expert).min(rows));
            let w = &im[e * ncols..(e + 1) * ncols];
            quantize(Q4_0, &src[a * ncols..b * ncols], ncols as u64, Some(w), &mut want[a * dst_row..b * dst_row]).unwrap();
        }
        for (threads, chunk) in [(1, 64), (3, 4), (4, 1), (2, 7)] {
            let (got, r) = run(Q4_0, &src, ncols, rows, chunk, threads, Some(&im), per_expert);
            r.unwrap();
            assert!(got == want, "{threads} threads, chunks of {chunk}: other bytes");
        }
        // F16 needs no weights.
        let (got, r) = run(F16, &src, ncols, rows, 5, 3, None, 1);
        r.unwrap();
        let mut want = vec![0u8; rows * ncols * 2];
        quantize(F16, &src, ncols as u64, None, &mut want).unwrap();
        assert!(got == want);
    }

    #[test]
    fn a_failure_stops_every_thread_and_says_where() {
        let (ncols, rows) = (32, 40);
        let mut src = values(ncols * rows);
        src[ncols * 33 + 5] = f32::NAN;
        let (_, r) = run(Q4_0, &src, ncols, rows, 2, 3, None, 1);
        let e = r.expect_err("NaN quantized to Q4_0");
        assert!(e.contains("in convert: false"), "{e}");
    }

    #[test]
    fn bad_slabs_are_refused_before_any_thread_starts() {
        let src = vec![0u8; 64 * 4 * 4];
        let mut dst = vec![0u8; 4 * 18 * 2];
        let (dp, dl) = (dst.as_mut_ptr(), dst.len());
        let base = |rows: usize, im: Option<&'static [f32]>, per_expert: usize, chunk: usize| Slab {
            from: F32,
            to: Q4_0,
            src: &src,
            src_row: 256,
            dst: unsafe { SharedRows::new(dp, dl) },
            dst_row: 36,
            ncols: 64,
            rows,
            chunk,
            threads: 2,
            imatrix: im,
            per_expert,
            first: 0,
        };
        assert!(base(4, None, 1, 2).check().is_ok());
        assert!(base(5, None, 1, 2).check().is_err(), "more rows than the buffers hold");
        assert!(base(4, None, 1, 0).check().is_err(), "chunks of 0 rows");
        static IM: [f32; 64] = [1.0; 64];
        assert!(base(4, Some(&IM), 0, 2).check().is_err(), "experts of 0 rows");
        assert!(base(4, Some(&IM), 2, 2).check().is_err(), "weights for one expert of two");
        assert!(base(4, Some(&IM), 4, 2).check().is_ok());
    }
}
