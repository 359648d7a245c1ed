//! Generates include/ggml_rs.h from the crate with cbindgen.
//! Usage: gen-header [--check]   (--check: fail if the committed header is stale)
use std::path::PathBuf;

fn main() {
    // The repository root: the working directory or the nearest parent with
    // cbindgen.toml (not the build-time manifest dir, which may belong to
    // another checkout sharing the target folder).
    let cwd = std::env::current_dir().expect("working directory");
    let root = cwd
        .ancestors()
        .find(|d| d.join("cbindgen.toml").exists() && d.join("src/ffi").is_dir())
        .map(PathBuf::from)
        .expect("run gen-header inside the ggml-rs repository");
    let config = cbindgen::Config::from_file(root.join("cbindgen.toml")).expect("cbindgen.toml");
    let bindings = cbindgen::Builder::new()
        .with_crate(&root)
        .with_config(config)
        .generate()
        .expect("cbindgen failed");
    let mut out = Vec::new();
    bindings.write(&mut out);
    let path = root.join("include/ggml_rs.h");
    if std::env::args().any(|a| a == "--check") {
        let current = std::fs::read(&path).unwrap_or_default();
        if current != out {
            eprintln!("include/ggml_rs.h is stale: run `make header` and commit it");
            std::process::exit(1);
        }
        eprintln!("include/ggml_rs.h is up to date");
    } else {
        std::fs::write(&path, out).expect("writing header");
        eprintln!("wrote {}", path.display());
    }
}
