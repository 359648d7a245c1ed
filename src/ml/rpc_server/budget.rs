//! The server's memory budget, shared by the processes that serve its
//! connections: one page of counters mapped before the first fork. Each
//! connection's process books its buffers against the total and records
//! them in its own slot, so that the listener can give back what a process
//! held when it ends, even if it died.

use std::sync::atomic::{AtomicU64, Ordering};

pub struct Budget {
    /// Bytes all connections together may hold in buffers.
    pub limit: u64,
    total: &'static AtomicU64,
    slot: &'static AtomicU64,
}

/// The counters: `[total, slot 0, slot 1, …]`.
pub struct Shared {
    limit: u64,
    words: &'static [AtomicU64],
}

impl Shared {
    pub fn new(limit: u64, slots: usize) -> Result<Shared, String> {
        let words = shared_words(slots + 1).map_err(|e| format!("cannot map the shared memory budget: {e}"))?;
        Ok(Shared { limit, words })
    }

    /// The budget as seen by the process serving slot `i`.
    pub fn budget(&self, i: usize) -> Budget {
        Budget { limit: self.limit, total: &self.words[0], slot: &self.words[1 + i] }
    }

    /// Gives back what slot `i` held (its process has ended).
    pub fn reclaim(&self, i: usize) {
        let held = self.words[1 + i].swap(0, Ordering::AcqRel);
        self.words[0].fetch_sub(held, Ordering::AcqRel);
    }
}

impl Budget {
    /// Books `n` bytes if they fit under the limit.
    pub fn take(&self, n: u64) -> bool {
        let mut cur = self.total.load(Ordering::Acquire);
        loop {
            let Some(next) = cur.checked_add(n).filter(|&v| v <= self.limit) else {
                return false;
            };
            match self.total.compare_exchange(cur, next, Ordering::AcqRel, Ordering::Acquire) {
                Ok(_) => {
                    self.slot.fetch_add(n, Ordering::AcqRel);
                    return true;
                }
                Err(v) => cur = v,
            }
        }
    }

    pub fn release(&self, n: u64) {
        self.slot.fetch_sub(n, Ordering::AcqRel);
        self.total.fetch_sub(n, Ordering::AcqRel);
    }

    /// Bytes booked by all connections.
    pub fn used(&self) -> u64 {
        self.total.load(Ordering::Acquire)
    }
}

/// `n` zeroed counters in memory shared with the processes forked after
/// this call; they live as long as the process (and its children).
pub(super) fn shared_words(n: usize) -> std::io::Result<&'static [AtomicU64]> {
    let p = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            n * 8,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_SHARED | libc::MAP_ANONYMOUS,
            -1,
            0,
        )
    };
    if p == libc::MAP_FAILED {
        return Err(std::io::Error::last_os_error());
    }
    Ok(unsafe { std::slice::from_raw_parts(p as *const AtomicU64, n) })
}
