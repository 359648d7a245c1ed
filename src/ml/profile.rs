//! `GGML_RS_PROFILE=1`: where the compute time goes, by op. The scheduler's
//! eval callback asks for every node, so each node is computed on its own
//! (no fusion of neighbours, a thread barrier per node: the totals are a
//! little above a plain run's) and timed from the callback's ask to its
//! report. The totals, by op and by the types and shapes that tell
//! kernels apart (a MUL_MAT by its weight's type and whether it has one
//! row or several), are printed to stderr when the backend is dropped.
//! Issue 27's investigation uses it (docs/notes/cpu-speed.md).

use crate::sys;
use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Instant;

/// Whether the profile was asked for (read once).
pub(crate) fn enabled() -> bool {
    static ON: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *ON.get_or_init(|| std::env::var_os("GGML_RS_PROFILE").is_some_and(|v| !v.is_empty() && v != "0"))
}

struct Totals {
    by_key: HashMap<String, (u64, f64)>,
    started: Option<Instant>,
}

static TOTALS: Mutex<Option<Totals>> = Mutex::new(None);

/// The key a node's time is filed under: the op, and for products the
/// operand types and whether the activations are one row (a vector
/// kernel) or several.
unsafe fn key(t: &sys::ggml_tensor) -> String {
    let op = unsafe { std::ffi::CStr::from_ptr(sys::ggml_op_desc(t)) }.to_string_lossy().into_owned();
    let src = |i: usize| unsafe { t.src[i].as_ref() };
    let ty = |s: &sys::ggml_tensor| unsafe { std::ffi::CStr::from_ptr(sys::ggml_type_name(s.type_)) }.to_string_lossy().into_owned();
    match (t.op, src(0), src(1)) {
        (sys::GGML_OP_MUL_MAT | sys::GGML_OP_MUL_MAT_ID, Some(a), Some(b)) => {
            let rows = if b.ne[1] * b.ne[2] * b.ne[3] == 1 { "1 row" } else { "rows" };
            format!("{op} {} x {} ({rows})", ty(a), ty(b))
        }
        _ => op,
    }
}

/// The scheduler's eval callback: asks for every node and times it.
pub(crate) unsafe extern "C" fn callback(t: *mut sys::ggml_tensor, ask: bool, _: *mut std::ffi::c_void) -> bool {
    // No panic may unwind into ggml.
    let _ = std::panic::catch_unwind(|| {
        let mut g = TOTALS.lock().unwrap_or_else(|e| e.into_inner());
        let totals = g.get_or_insert_with(|| Totals { by_key: HashMap::new(), started: None });
        if ask {
            totals.started = Some(Instant::now());
            return;
        }
        if let Some(s) = totals.started.take() {
            let k = unsafe { key(&*t) };
            let e = totals.by_key.entry(k).or_insert((0, 0.0));
            e.0 += 1;
            e.1 += s.elapsed().as_secs_f64();
        }
    });
    true
}

/// Prints the totals so far (most time first) and clears them.
pub(crate) fn report() {
    let Some(totals) = TOTALS.lock().unwrap_or_else(|e| e.into_inner()).take() else { return };
    let mut rows: Vec<_> = totals.by_key.into_iter().collect();
    rows.sort_by(|a, b| b.1 .1.total_cmp(&a.1 .1));
    let all: f64 = rows.iter().map(|r| r.1 .1).sum();
    eprintln!("profile: {:.1} ms in {} kinds of node", all * 1e3, rows.len());
    eprintln!("{:>10} {:>6} {:>9}  op", "ms", "%", "nodes");
    for (k, (n, s)) in rows {
        eprintln!("{:>10.1} {:>6.1} {:>9}  {k}", s * 1e3, 100.0 * s / all.max(1e-12), n);
    }
}
