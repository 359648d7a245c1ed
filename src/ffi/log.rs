//! Routing log records to the caller.

use std::ffi::{c_char, c_void};

use super::guard;
use crate::ml::log;

/// Receives one log record: `level` 1 debug, 2 info, 3 warn, 4 error;
/// `target` is "ggml" for ggml's own output, "ggml_rs" (or a module path)
/// for ours. Both strings are valid only during the call. May be called
/// from any thread, including ggml's worker threads.
pub type ggml_rs_log_fn = Option<extern "C" fn(level: i32, target: *const c_char, message: *const c_char, user_data: *mut c_void)>;

/// Sends ggml's and ggml-rs's log records to `f` (NULL: warnings and errors
/// go to stderr, the default), dropping records below `min_level`
/// (1 debug … 4 error; 0 or less silences everything). `user_data` is passed
/// back unchanged; the caller keeps it alive while `f` is installed.
#[no_mangle]
pub extern "C" fn ggml_rs_log_set(f: ggml_rs_log_fn, user_data: *mut c_void, min_level: i32) {
    guard(std::ptr::null_mut(), (), || {
        log::set_sink(f, user_data, min_level);
        Ok(())
    })
}
