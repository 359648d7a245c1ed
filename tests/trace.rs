//! GGML_RS_TRACE=1 (src/ml/trace.rs): each node the scheduler computes is
//! printed with its op, shape, sum and sum of |x|; checked against sums
//! computed here from the inputs, in a child process (the variable is read
//! once per process). Without the variable nothing is printed.
mod common;
use common::*;
use std::process::Command;

const X: [f32; 6] = [1., -2., 3., -4., 5., -6.];
const Y: [f32; 3] = [10., 20., -30.];

#[test]
#[ignore = "run in a child process by the tests of this file"]
fn trace_child() {
    let b = backend();
    let (mut root, mut input) = contexts(&b);
    let x = upload(&mut input, F32, &[3, 2], &X);
    let y = upload(&mut input, F32, &[3], &Y);
    let z = root.add(x, y).unwrap();
    let w = root.mul(z, z).unwrap();
    assert_eq!(eval(&mut root, w).len(), 6);
}

fn child(trace: &str) -> String {
    let out = Command::new(std::env::current_exe().unwrap())
        .args(["trace_child", "--exact", "--ignored", "--nocapture", "--test-threads", "1"])
        .env("GGML_RS_TRACE", trace)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "child failed: {err}");
    err
}

/// (sum, sum of |x|) of the trace line of `op` with shape [3,2,1,1].
fn sums(log: &str, op: &str) -> (f64, f64) {
    let line = log
        .lines()
        .find(|l| l.starts_with(&format!("trace {op} [3,2,1,1] ")))
        .unwrap_or_else(|| panic!("no trace line for {op}:\n{log}"));
    let f: Vec<&str> = line.split_whitespace().collect();
    (f[3].parse().unwrap(), f[4].parse().unwrap())
}

#[test]
fn trace_prints_each_node_with_its_sums() {
    let z: Vec<f64> = (0..6).map(|i| (X[i] + Y[i % 3]) as f64).collect();
    let w: Vec<f64> = z.iter().map(|v| v * v).collect();
    let naive = |v: &[f64]| (v.iter().sum::<f64>(), v.iter().map(|x| x.abs()).sum::<f64>());
    let log = child("1");
    for (op, want) in [("ADD", naive(&z)), ("MUL", naive(&w))] {
        let got = sums(&log, op);
        let close = |a: f64, b: f64| (a - b).abs() <= 1e-6 * b.abs().max(1.0);
        assert!(close(got.0, want.0) && close(got.1, want.1), "{op}: traced {got:?}, computed {want:?}");
    }
    assert!(!child("0").contains("trace "), "GGML_RS_TRACE=0 traced");
}
