//! ggml's log output, routed into Rust's `log` crate, and from there to a
//! C callback (the Go side installs one that writes to slog).
//!
//! ggml prints partial lines (`GGML_LOG_LEVEL_CONT` continues the previous
//! record), so text is buffered per level until a newline.

use std::ffi::{c_char, c_void, CStr};
use std::sync::Once;

use parking_lot::Mutex;

use crate::sys;

/// A C function that receives log records: level (1 debug, 2 info, 3 warn,
/// 4 error), target ("ggml" or "ggml_rs"), message without trailing newline.
pub type LogSink = extern "C" fn(level: i32, target: *const c_char, message: *const c_char, user_data: *mut c_void);

struct Sink {
    f: LogSink,
    user_data: usize,
}

static SINK: Mutex<Option<Sink>> = Mutex::new(None);
static PENDING: Mutex<(u32, String)> = Mutex::new((0, String::new()));
static INIT: Once = Once::new();

struct Bridge;

static BRIDGE: Bridge = Bridge;

fn level_of(l: log::Level) -> i32 {
    match l {
        log::Level::Error => 4,
        log::Level::Warn => 3,
        log::Level::Info => 2,
        log::Level::Debug | log::Level::Trace => 1,
    }
}

impl log::Log for Bridge {
    fn enabled(&self, _: &log::Metadata) -> bool {
        true
    }
    fn log(&self, record: &log::Record) {
        let msg = format!("{}", record.args());
        let level = level_of(record.level());
        let sink = SINK.lock();
        match &*sink {
            Some(s) => {
                let target = std::ffi::CString::new(record.target().replace('\0', " ")).unwrap_or_default();
                let text = std::ffi::CString::new(msg.replace('\0', " ")).unwrap_or_default();
                (s.f)(level, target.as_ptr(), text.as_ptr(), s.user_data as *mut c_void);
            }
            None => {
                if level >= 3 {
                    eprintln!("{}: {}", record.target(), msg);
                }
            }
        }
    }
    fn flush(&self) {}
}

unsafe extern "C" fn ggml_log(level: sys::ggml_log_level, text: *const c_char, _: *mut c_void) {
    if text.is_null() {
        return;
    }
    let s = CStr::from_ptr(text).to_string_lossy();
    let mut pending = PENDING.lock();
    if level != sys::GGML_LOG_LEVEL_CONT {
        pending.0 = level;
    }
    pending.1.push_str(&s);
    while let Some(pos) = pending.1.find('\n') {
        let line: String = pending.1.drain(..=pos).collect();
        let line = line.trim_end();
        if line.is_empty() {
            continue;
        }
        let lvl = match pending.0 {
            sys::GGML_LOG_LEVEL_ERROR => log::Level::Error,
            sys::GGML_LOG_LEVEL_WARN => log::Level::Warn,
            sys::GGML_LOG_LEVEL_INFO => log::Level::Info,
            _ => log::Level::Debug,
        };
        log::log!(target: "ggml", lvl, "{line}");
    }
}

/// Installs the bridges once per process: ggml → `log`, and our `log`
/// implementation (unless the embedding program already set a logger).
pub fn init() {
    INIT.call_once(|| {
        if log::set_logger(&BRIDGE).is_ok() {
            log::set_max_level(log::LevelFilter::Debug);
        }
        unsafe { sys::ggml_log_set(Some(ggml_log), std::ptr::null_mut()) };
    });
}

/// Sends log records to `f` from now on (None: back to stderr for warnings
/// and errors). `max_level` filters: 1 debug … 4 error, 0 silences.
pub fn set_sink(f: Option<LogSink>, user_data: *mut c_void, max_level: i32) {
    init();
    *SINK.lock() = f.map(|f| Sink { f, user_data: user_data as usize });
    log::set_max_level(match max_level {
        i32::MIN..=0 => log::LevelFilter::Off,
        1 => log::LevelFilter::Debug,
        2 => log::LevelFilter::Info,
        3 => log::LevelFilter::Warn,
        _ => log::LevelFilter::Error,
    });
}
