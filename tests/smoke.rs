//! End-to-end smoke test: backend → context → data → op → compute → read.
mod common;
use common::*;

#[test]
fn add_with_broadcast_computes() {
    let b = backend();
    let (mut root, mut input) = contexts(&b);
    let x = upload(&mut input, F32, &[3, 2], &[1., 2., 3., 4., 5., 6.]);
    let y = upload(&mut input, F32, &[3], &[10., 20., 30.]);
    let z = root.add(x, y).unwrap();
    assert_eq!(eval(&mut root, z), vec![11., 22., 33., 14., 25., 36.]);
}

#[test]
fn bad_broadcast_is_an_error_not_an_abort() {
    let b = backend();
    let (mut root, mut input) = contexts(&b);
    let x = upload(&mut input, F32, &[3, 2], &[0.; 6]);
    let y = upload(&mut input, F32, &[2], &[0.; 2]);
    let e = root.add(x, y).unwrap_err();
    assert!(e.message.contains("add: cannot broadcast f32[2] to f32[3,2]"), "{}", e.message);
    // The context is still usable.
    let z = root.add(x, x).unwrap();
    assert_eq!(eval(&mut root, z), vec![0.; 6]);
}
