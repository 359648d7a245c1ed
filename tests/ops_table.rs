//! docs/ops.md cannot drift: every method of Ollama's ml.Tensor and
//! ml.Context interfaces (go/ml/backend.go) and of our extension interfaces
//! has a row; every C function named there is declared in the header; every
//! test named there exists.

use std::collections::BTreeSet;
use std::fs;
use std::path::Path;

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn read(rel: &str) -> String {
    fs::read_to_string(root().join(rel)).unwrap_or_else(|e| panic!("reading {rel}: {e}"))
}

/// Method names declared in `type NAME interface { ... }` of a Go file.
fn interface_methods(src: &str, name: &str) -> Vec<String> {
    let start = src.find(&format!("type {name} interface {{")).unwrap_or_else(|| panic!("no interface {name}"));
    let body = &src[start..];
    let end = body.find("\n}").unwrap();
    body[..end]
        .lines()
        .skip(1)
        .filter_map(|l| {
            let l = l.trim();
            let n: String = l.chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect();
            (l.len() > n.len() && l[n.len()..].starts_with('(') && n.chars().next().map(|c| c.is_uppercase()).unwrap_or(false))
                .then_some(n)
        })
        .collect()
}

struct Row {
    method: String,
    c: String,
    rust: String,
    go: String,
}

fn rows(doc: &str) -> Vec<Row> {
    // The coverage tables end where the list of refused cases begins.
    let coverage = doc.split("## Cases refused").next().unwrap();
    coverage
        .lines()
        .filter(|l| l.starts_with("| ") && !l.starts_with("| method") && !l.starts_with("|---"))
        .map(|l| {
            let cells: Vec<&str> = l.trim_matches('|').split('|').map(str::trim).collect();
            assert_eq!(cells.len(), 5, "docs/ops.md: row with {} cells: {l}", cells.len());
            Row { method: cells[0].into(), c: cells[2].into(), rust: cells[3].into(), go: cells[4].into() }
        })
        .collect()
}

fn go_test_names() -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    for dir in ["go/ml", "go/ml/backend"] {
        for entry in fs::read_dir(root().join(dir)).unwrap() {
            let p = entry.unwrap().path();
            if p.to_string_lossy().ends_with("_test.go") {
                for l in fs::read_to_string(&p).unwrap().lines() {
                    if let Some(rest) = l.strip_prefix("func Test") {
                        names.insert(format!("Test{}", rest.split('(').next().unwrap()));
                    }
                }
            }
        }
    }
    names
}

#[test]
fn ops_table_covers_the_interfaces_and_names_real_code_and_tests() {
    let doc = read("docs/ops.md");
    let rows = rows(&doc);
    let listed: BTreeSet<&str> = rows.iter().map(|r| r.method.as_str()).collect();

    let api = read("go/ml/backend.go");
    let hybrid = read("go/ml/hybrid.go");
    let mut required: Vec<String> = interface_methods(&api, "Tensor");
    required.extend(interface_methods(&api, "Context"));
    required.extend(interface_methods(&api, "ScaledDotProductAttention"));
    required.extend(interface_methods(&hybrid, "GatedDeltaNet"));
    required.extend(interface_methods(&hybrid, "CausalConv"));
    required.push("RoPE".into());
    assert!(required.len() > 90, "parsed only {} interface methods", required.len());
    let missing: Vec<&String> = required.iter().filter(|m| !listed.contains(m.as_str())).collect();
    assert!(missing.is_empty(), "docs/ops.md lacks rows for {missing:?}");

    let header = read("include/ggml_rs.h");
    let go_tests = go_test_names();
    for r in &rows {
        if r.c != "—" {
            assert!(header.contains(&format!("{}(", r.c)), "{}: C function {} is not in include/ggml_rs.h", r.method, r.c);
        }
        let (file, func) = r.rust.split_once("::").unwrap_or_else(|| panic!("{}: bad Rust test {}", r.method, r.rust));
        let src = read(&format!("tests/{file}.rs"));
        let decl = format!("#[test]\nfn {func}(");
        assert!(src.contains(&decl), "{}: no test {func} in tests/{file}.rs", r.method);
        let go = r.go.strip_prefix("Go:").unwrap_or_else(|| panic!("{}: bad Go test {}", r.method, r.go));
        assert!(go_tests.contains(go), "{}: no Go test {go}", r.method);
    }
}
