//! How many threads the CPU backend should use by default: the CPUs this
//! process may really run on (its affinity mask), further limited by a
//! cgroup CPU quota (containers, SLURM), never the host's core count.

use std::fs;

use crate::sys;

/// CPUs in this process's affinity mask (falls back to the online count).
pub fn affinity_cpus() -> usize {
    affinity_list().len()
}

/// The CPU ids in this process's affinity mask (0..the online count where
/// it cannot be read).
pub fn affinity_list() -> Vec<usize> {
    #[cfg(target_os = "linux")]
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        if libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) == 0 {
            let ids: Vec<usize> = (0..libc::CPU_SETSIZE as usize).filter(|&i| libc::CPU_ISSET(i, &set)).collect();
            if !ids.is_empty() {
                return ids;
            }
        }
    }
    (0..std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1)).collect()
}

/// A cgroup CPU quota in whole CPUs (rounded up), if one is set.
pub fn cgroup_quota_cpus() -> Option<usize> {
    // cgroup v2: "max 100000" or "200000 100000" in the process's cgroup.
    let cg = fs::read_to_string("/proc/self/cgroup").unwrap_or_default();
    for line in cg.lines() {
        if let Some(path) = line.strip_prefix("0::") {
            let file = format!("/sys/fs/cgroup{}/cpu.max", path.trim_end_matches('/'));
            let text = fs::read_to_string(&file).or_else(|_| fs::read_to_string("/sys/fs/cgroup/cpu.max"));
            if let Ok(text) = text {
                return parse_cpu_max(&text);
            }
        }
    }
    // cgroup v1.
    let quota = fs::read_to_string("/sys/fs/cgroup/cpu/cpu.cfs_quota_us").ok()?;
    let period = fs::read_to_string("/sys/fs/cgroup/cpu/cpu.cfs_period_us").ok()?;
    quota_cpus(quota.trim().parse().ok()?, period.trim().parse().ok()?)
}

fn parse_cpu_max(text: &str) -> Option<usize> {
    let mut it = text.split_whitespace();
    let quota = it.next()?;
    let period: i64 = it.next()?.parse().ok()?;
    if quota == "max" {
        return None;
    }
    quota_cpus(quota.parse().ok()?, period)
}

fn quota_cpus(quota: i64, period: i64) -> Option<usize> {
    if quota <= 0 || period <= 0 {
        return None;
    }
    Some(((quota + period - 1) / period).max(1) as usize)
}

/// The default CPU thread count: min(affinity, cgroup quota), at least 1.
pub fn default_threads() -> usize {
    let n = affinity_cpus();
    match cgroup_quota_cpus() {
        Some(q) => n.min(q).max(1),
        None => n.max(1),
    }
}

/// A ggml CPU threadpool that lives as long as the backend using it.
///
/// Without one, ggml creates and joins its worker threads on every graph
/// compute; a new worker often starts on the core of the thread that made
/// it and shares that core until the kernel migrates it, which costs a
/// decode step (a few milliseconds of compute) most of its second thread.
/// llama.cpp's tools keep one pool per context for the same reason.
pub(crate) struct ThreadPool(*mut sys::ggml_threadpool);

impl ThreadPool {
    /// A pool of `n` threads (the calling thread is one of them), polling
    /// for work for a while after each graph before sleeping. It starts
    /// paused (its workers asleep, not polling while the model loads); the
    /// first compute wakes it.
    pub fn new(n: usize) -> Option<ThreadPool> {
        // SAFETY: plain constructors; a NULL result means ggml failed.
        unsafe {
            let mut p = sys::ggml_threadpool_params_default(n as i32);
            p.paused = true;
            let tp = sys::ggml_threadpool_new(&mut p);
            (!tp.is_null()).then_some(ThreadPool(tp))
        }
    }

    pub fn raw(&self) -> *mut sys::ggml_threadpool {
        self.0
    }

    /// Puts the workers to sleep until the next compute (which resumes
    /// them). Call only while no graph runs on the pool.
    pub fn pause(&self) {
        // SAFETY: a live pool; ggml serialises this with its own mutex.
        unsafe { sys::ggml_threadpool_pause(self.0) }
    }
}

impl Drop for ThreadPool {
    fn drop(&mut self) {
        // SAFETY: created by ggml_threadpool_new, freed once; the owner drops
        // the CPU backend that uses it first.
        unsafe { sys::ggml_threadpool_free(self.0) }
    }
}

// The pool is used only under the backend's compute lock.
unsafe impl Send for ThreadPool {}
unsafe impl Sync for ThreadPool {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_max_parsing() {
        assert_eq!(parse_cpu_max("max 100000\n"), None);
        assert_eq!(parse_cpu_max("200000 100000\n"), Some(2));
        assert_eq!(parse_cpu_max("150000 100000"), Some(2));
        assert_eq!(parse_cpu_max("50000 100000"), Some(1));
        assert_eq!(parse_cpu_max("garbage"), None);
        assert_eq!(quota_cpus(-1, 100000), None);
    }

    #[test]
    fn default_is_within_affinity() {
        let n = default_threads();
        assert!(n >= 1 && n <= affinity_cpus());
    }
}
