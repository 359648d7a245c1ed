//! The C ABI as a C caller sees it: the header and the shared library.
//!
//! * The shared library exports only `ggml_rs_` symbols (it must be able to
//!   live in one process beside another copy of ggml).
//! * Every `ggml_rs_*` function declared in `include/ggml_rs.h` has a doc
//!   comment right before it, and is exported by the shared library; every
//!   exported function is declared in the header.
//!
//! Whether the committed header is what cbindgen generates now is checked by
//! `make check-header`, not here. The shared library is the one cargo builds
//! next to this test (the `cdylib` crate type, `target/<profile>/`); when it
//! is absent, or `nm` is, the library checks are skipped with a message.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

fn header_path() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("include/ggml_rs.h")
}

fn header_text() -> String {
    let p = header_path();
    std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("reading {}: {e}", p.display()))
}

/// One function declaration of the header.
#[derive(Debug)]
struct Decl {
    name: String,
    line: usize,
    /// The text of the comment right before it, if it is a `/** … */` one.
    doc: Option<String>,
}

/// The first `ggml_rs_…` identifier directly followed by `(`, if any.
fn declared_name(stmt: &str) -> Option<String> {
    let bytes = stmt.as_bytes();
    let mut from = 0;
    while let Some(off) = stmt[from..].find("ggml_rs_") {
        let start = from + off;
        let boundary = start == 0 || !(bytes[start - 1].is_ascii_alphanumeric() || bytes[start - 1] == b'_');
        let end = start + stmt[start..].find(|c: char| !(c.is_ascii_alphanumeric() || c == '_')).unwrap_or(stmt.len() - start);
        if boundary && stmt[end..].trim_start().starts_with('(') {
            return Some(stmt[start..end].to_string());
        }
        from = end;
    }
    None
}

/// Scans the header into comments and statements and returns the function
/// declarations with the comment (if any) that directly precedes each.
/// Preprocessor lines and the `extern "C" {` / `}` wrapper are skipped;
/// typedefs (the log callback type) and struct/enum definitions are not
/// functions.
fn parse_header(text: &str) -> Vec<Decl> {
    let mut kept = String::new();
    for line in text.lines() {
        let t = line.trim();
        if t.starts_with('#') || t == "extern \"C\" {" || (t.starts_with('}') && t.contains("extern \"C\"")) {
            kept.push('\n');
        } else {
            kept.push_str(line);
            kept.push('\n');
        }
    }
    let s = kept.as_str();
    let line_of = |pos: usize| s[..pos].matches('\n').count() + 1;
    let mut decls = Vec::new();
    let mut last_doc: Option<String> = None;
    let mut i = 0;
    while i < s.len() {
        let rest = &s[i..];
        let ws = rest.len() - rest.trim_start().len();
        if ws > 0 {
            i += ws;
            continue;
        }
        if rest.starts_with("/*") {
            let end = rest.find("*/").map(|e| e + 2).unwrap_or(rest.len());
            let body = &rest[..end];
            last_doc = body.starts_with("/**").then(|| body.to_string());
            i += end;
            continue;
        }
        if rest.starts_with("//") {
            i += rest.find('\n').unwrap_or(rest.len());
            last_doc = None;
            continue;
        }
        // A statement: up to `;` at brace depth 0.
        let mut depth = 0i32;
        let mut end = rest.len();
        for (j, c) in rest.char_indices() {
            match c {
                '{' => depth += 1,
                '}' => depth -= 1,
                ';' if depth <= 0 => {
                    end = j + 1;
                    break;
                }
                _ => {}
            }
        }
        let stmt = &rest[..end];
        let is_function = !stmt.starts_with("typedef") && !stmt.contains('{');
        if is_function {
            if let Some(name) = declared_name(stmt) {
                decls.push(Decl { name, line: line_of(i), doc: last_doc.take() });
            }
        }
        last_doc = None;
        i += end;
    }
    decls
}

/// Doc text without the comment markers.
fn doc_words(doc: &str) -> String {
    doc.trim_start_matches("/**")
        .trim_end_matches("*/")
        .lines()
        .map(|l| l.trim().trim_start_matches('*').trim())
        .collect::<Vec<_>>()
        .join(" ")
        .trim()
        .to_string()
}

#[test]
fn every_header_function_has_a_doc_comment() {
    let decls = parse_header(&header_text());
    assert!(
        decls.len() >= 30,
        "found only {} ggml_rs_ functions in {}: is the parser out of date?",
        decls.len(),
        header_path().display()
    );
    let mut names = BTreeSet::new();
    let mut missing = Vec::new();
    for d in &decls {
        assert!(names.insert(d.name.clone()), "{} is declared twice (line {})", d.name, d.line);
        match &d.doc {
            Some(doc) if !doc_words(doc).is_empty() => {}
            _ => missing.push(format!("{} (line {})", d.name, d.line)),
        }
    }
    assert!(
        missing.is_empty(),
        "functions in include/ggml_rs.h without a doc comment right before them (add a /// comment \
         to the #[no_mangle] fn in src/ffi and run `make header`):\n  {}",
        missing.join("\n  ")
    );
    println!("{} header functions, all documented", decls.len());
}

#[test]
fn header_parser_sees_functions_and_docs() {
    // The parser itself, on a small header of the same shape.
    let text = r#"
/** A type. */
typedef struct ggml_rs_x { int a; } ggml_rs_x;
typedef void (*ggml_rs_cb)(int a);
#ifdef __cplusplus
extern "C" {
#endif
/**
 * Documented.
 */
struct ggml_rs_x ggml_rs_one(void);

int ggml_rs_two(struct ggml_rs_x *x,
                int y);
/* not a doc comment */
void ggml_rs_three(void);
#ifdef __cplusplus
}  // extern "C"
#endif
"#;
    let d = parse_header(text);
    let got: Vec<(&str, bool)> = d.iter().map(|d| (d.name.as_str(), d.doc.is_some())).collect();
    assert_eq!(got, vec![("ggml_rs_one", true), ("ggml_rs_two", false), ("ggml_rs_three", false)]);
}

/// The shared library cargo built for this profile, next to the test binary
/// (`target/<profile>/deps/ffi_abi-…` → `target/<profile>/libggml_rs.so`).
fn shared_library() -> Option<PathBuf> {
    let name = if cfg!(target_os = "macos") { "libggml_rs.dylib" } else { "libggml_rs.so" };
    let exe = std::env::current_exe().ok()?;
    let deps = exe.parent()?;
    let candidates = [deps.parent().map(|p| p.join(name)), Some(deps.join(name))];
    candidates
        .into_iter()
        .flatten()
        .filter(|p| p.is_file())
        .max_by_key(|p| p.metadata().and_then(|m| m.modified()).ok())
}

/// Defined dynamic symbols as (type letter, name), or a reason to skip.
fn exported_symbols(so: &Path) -> Result<Vec<(char, String)>, String> {
    let out = Command::new("nm")
        .args(["-D", "--defined-only"])
        .arg(so)
        .output()
        .map_err(|e| format!("cannot run nm: {e}"))?;
    if !out.status.success() {
        return Err(format!("nm -D --defined-only {} failed: {}", so.display(), String::from_utf8_lossy(&out.stderr)));
    }
    let mut syms = Vec::new();
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        let f: Vec<&str> = line.split_whitespace().collect();
        let (ty, name) = match f.as_slice() {
            [_, ty, name] => (ty, name),
            [ty, name] => (ty, name),
            _ => continue,
        };
        let ty = ty.chars().next().unwrap_or('?');
        // Version definitions (absolute, `A`) are not symbols anyone links to.
        if ty == 'A' {
            continue;
        }
        let name = name.split('@').next().unwrap_or(name);
        syms.push((ty, name.to_string()));
    }
    Ok(syms)
}

/// The library and its symbols, or None after printing why the check is skipped.
fn library_symbols(test: &str) -> Option<(PathBuf, Vec<(char, String)>)> {
    let Some(so) = shared_library() else {
        println!("{test}: SKIPPED: no libggml_rs.so next to {:?} (cargo builds it with the lib)", std::env::current_exe().ok());
        return None;
    };
    match exported_symbols(&so) {
        Ok(syms) => Some((so, syms)),
        Err(why) => {
            println!("{test}: SKIPPED: {why}");
            None
        }
    }
}

#[test]
fn shared_library_exports_only_ggml_rs_symbols() {
    let Some((so, syms)) = library_symbols("shared_library_exports_only_ggml_rs_symbols") else { return };
    let foreign: Vec<String> =
        syms.iter().filter(|(_, n)| !n.starts_with("ggml_rs_")).map(|(t, n)| format!("{t} {n}")).collect();
    assert!(
        foreign.is_empty(),
        "{} exports {} symbols outside the ggml_rs_ prefix (ggml or Rust internals would clash with \
         another ggml in the process):\n  {}",
        so.display(),
        foreign.len(),
        foreign.iter().take(40).cloned().collect::<Vec<_>>().join("\n  ")
    );
    assert!(!syms.is_empty(), "{} exports nothing", so.display());
    println!("{}: {} symbols, all ggml_rs_", so.display(), syms.len());
}

#[test]
fn header_and_shared_library_agree() {
    let Some((so, syms)) = library_symbols("header_and_shared_library_agree") else { return };
    let functions: BTreeSet<&str> =
        syms.iter().filter(|(t, _)| matches!(t, 'T' | 'W' | 'i')).map(|(_, n)| n.as_str()).collect();
    let decls = parse_header(&header_text());
    let declared: BTreeSet<&str> = decls.iter().map(|d| d.name.as_str()).collect();
    let not_exported: Vec<&str> = declared.difference(&functions).copied().collect();
    assert!(
        not_exported.is_empty(),
        "declared in include/ggml_rs.h but not exported as functions by {} (stale library, or a \
         missing #[no_mangle] / extern \"C\"):\n  {}",
        so.display(),
        not_exported.join("\n  ")
    );
    let undeclared: Vec<&str> =
        functions.iter().filter(|n| n.starts_with("ggml_rs_")).copied().filter(|n| !declared.contains(n)).collect();
    assert!(
        undeclared.is_empty(),
        "{} exports functions that include/ggml_rs.h does not declare (run `make header`):\n  {}",
        so.display(),
        undeclared.join("\n  ")
    );
    println!("{}: all {} header functions exported", so.display(), declared.len());
}
