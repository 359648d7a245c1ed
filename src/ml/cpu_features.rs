//! The instruction-set features that the bundled ggml's CPU backend was
//! built with and uses (ggml's `ggml_backend_get_features` of the CPU
//! registry: "AVX2", "AVX512", "AVX512_BF16", "AMX_INT8", "REPACK", ...).
//! Which kernels run, and so the last bits of every float result, follow
//! from this list: results are reproducible to the bit between machines
//! with the same list and the same thread count, not across lists.

use std::ffi::{CStr, CString};
use std::sync::OnceLock;

use crate::sys;

/// The features as one line, "NAME" for a feature ggml reports as "1" and
/// "NAME=VALUE" otherwise, separated by single spaces, in ggml's order.
/// Empty if the CPU registry offers no list.
pub fn cpu_features() -> &'static CStr {
    static FEATURES: OnceLock<CString> = OnceLock::new();
    FEATURES.get_or_init(|| {
        let line = read().join(" ");
        CString::new(line).unwrap_or_default()
    })
}

fn read() -> Vec<String> {
    let mut out = Vec::new();
    unsafe {
        let reg = sys::ggml_backend_reg_by_name(c"CPU".as_ptr());
        if reg.is_null() {
            return out;
        }
        let f = sys::ggml_backend_reg_get_proc_address(reg, c"ggml_backend_get_features".as_ptr());
        if f.is_null() {
            return out;
        }
        let get: sys::ggml_backend_get_features_t = std::mem::transmute(f);
        let Some(get) = get else { return out };
        let mut p = get(reg);
        while !p.is_null() && !(*p).name.is_null() {
            let name = CStr::from_ptr((*p).name).to_string_lossy();
            let value = if (*p).value.is_null() { "".into() } else { CStr::from_ptr((*p).value).to_string_lossy() };
            out.push(if value == "1" { name.into_owned() } else { format!("{name}={value}") });
            p = p.add(1);
        }
    }
    out
}
