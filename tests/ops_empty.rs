//! Operands with no rows give an empty result, as in ggml, which skips
//! empty nodes at compute. Models meet this in practice: Ollama's take the
//! rows that produce logits (`Rows(outputs)`), none in a batch that ends
//! before the prompt does, and then normalize them, route them through
//! the experts of a MoE layer and multiply them by the output matrix. The
//! same graph's non-empty outputs are computed alongside and checked
//! against a naive product; a shared dimension K of 0 stays an error.
mod common;
use common::*;

use ggml_rs::ml::{data, Context, ErrorKind, Tensor};
use ggml_rs::sys;

const K: i64 = 64;
const M: i64 = 10;
const TOKENS: i64 = 6;

/// `w=[K,M]` times `x=[K,n]`, f64 accumulation.
fn naive(w: &[f32], x: &[f32], n: usize) -> Vec<f32> {
    let (k, m) = (K as usize, M as usize);
    let mut out = vec![0f32; m * n];
    for j in 0..n {
        for i in 0..m {
            out[j * m + i] = (0..k).map(|kk| w[i * k + kk] as f64 * x[j * k + kk] as f64).sum::<f64>() as f32;
        }
    }
    out
}

fn quantize_q8_0(vals: &[f32], n_per_row: usize) -> Vec<u8> {
    let rows = vals.len() / n_per_row;
    let mut out = vec![0u8; unsafe { sys::ggml_row_size(sys::GGML_TYPE_Q8_0, n_per_row as i64) } * rows];
    unsafe {
        sys::ggml_quantize_chunk(sys::GGML_TYPE_Q8_0, vals.as_ptr(), out.as_mut_ptr().cast(), 0, rows as i64, n_per_row as i64, std::ptr::null())
    };
    out
}

/// `x`'s rows selected by an empty index: `[K, 0]`.
fn no_rows(root: &mut Context, input: &mut Context, x: Tensor) -> Tensor {
    let none = input.from_bytes(I32, &[0], &[]).unwrap();
    let r = root.get_rows(x, none).unwrap();
    assert_eq!(r.ne(), [K, 0, 1, 1]);
    r
}

#[test]
fn output_rows_of_a_batch_without_outputs() {
    let be = backend();
    for ty in [F32, F16, sys::GGML_TYPE_Q8_0] {
        let (mut root, mut input) = contexts(&be);
        let mut rng = Rng::new(7 + ty as u64);
        let wv = rng.vec((K * M) as usize);
        let xv = rng.vec((K * TOKENS) as usize);
        let w = if ty == sys::GGML_TYPE_Q8_0 {
            input.from_bytes(ty, &[K, M], &quantize_q8_0(&wv, K as usize)).unwrap()
        } else {
            upload(&mut input, ty, &[K, M], &wv)
        };
        let x = upload(&mut input, F32, &[K, TOKENS], &xv);
        let rows = no_rows(&mut root, &mut input, x);
        let normed = root.rms_norm(rows, None, 1e-6).unwrap();
        let logits = root.mul_mat(w, normed).unwrap();
        assert_eq!(logits.ne(), [M, 0, 1, 1], "type {ty}");
        let full = root.mul_mat(w, x).unwrap();
        root.compute(&[logits, full]).unwrap();
        assert_eq!(data::read_f32(logits, "test").unwrap(), Vec::<f32>::new());
        // The rounded weights' product (f16/q8_0 round w and, for q8_0, x).
        let got = data::read_f32(full, "test").unwrap();
        let tol = if ty == F32 { 1e-4 } else { 0.05 };
        assert_close(&format!("the non-empty product beside it, type {ty}"), &got, &naive(&wv, &xv, TOKENS as usize), tol, 1e-3);
    }
}

#[test]
fn empty_a_rows_and_b_batches() {
    let be = backend();
    let (mut root, mut input) = contexts(&be);
    let a0 = input.empty(F32, &[K, 0]).unwrap();
    let b = upload(&mut input, F32, &[K, 3], &[0.5; 3 * K as usize]);
    let c = root.mul_mat(a0, b).unwrap();
    assert_eq!(c.ne(), [0, 3, 1, 1]);
    let a = upload(&mut input, F32, &[K, 2, 2], &[0.5; 4 * K as usize]);
    let b0 = input.empty(F32, &[K, 3, 0]).unwrap();
    let d = root.mul_mat(a, b0).unwrap();
    assert_eq!(d.ne(), [2, 3, 0, 1]);
    root.compute(&[c, d]).unwrap();
    assert!(data::read_f32(c, "test").unwrap().is_empty() && data::read_f32(d, "test").unwrap().is_empty());

    // Still refused: no shared dimension (the result would have elements
    // made of nothing), and an empty batch in a (b's must be multiples).
    // (`empty` with dim 0 of 0 gives a 1-D tensor, as Ollama's `Empty`.)
    let k0 = input.empty(F32, &[0, 3]).unwrap();
    assert_eq!(k0.ne(), [0, 1, 1, 1]);
    let e = root.mul_mat(k0, k0).unwrap_err();
    assert_eq!((e.kind, e.message.as_str()), (ErrorKind::Shape, "mul_mat: a is empty: f32[0]"));
    let a_b0 = input.empty(F32, &[K, 2, 0]).unwrap();
    let e = root.mul_mat(a_b0, b).unwrap_err();
    assert_eq!((e.kind, e.message.as_str()), (ErrorKind::Shape, "mul_mat: a is empty: f32[64,2,0]"));
}

/// A MoE layer's router and experts over no tokens (Ollama's last layer
/// after `Rows(outputs)`), beside the same layer over the real tokens.
#[test]
fn moe_layer_without_tokens() {
    let be = backend();
    let (mut root, mut input) = contexts(&be);
    let (experts, used, ff) = (4i64, 2i64, 8i64);
    let mut rng = Rng::new(11);
    let router = upload(&mut input, F32, &[K, experts], &rng.vec((K * experts) as usize));
    let up = upload(&mut input, F32, &[K, ff, experts], &rng.vec((K * ff * experts) as usize));
    let bias = upload(&mut input, F32, &[ff, experts], &rng.vec((ff * experts) as usize));
    let x = upload(&mut input, F32, &[K, TOKENS], &rng.vec((K * TOKENS) as usize));
    let rows = no_rows(&mut root, &mut input, x);

    let layer = |root: &mut Context, h: Tensor| -> Tensor {
        let n = h.ne()[1];
        let scores = root.mul_mat(router, h).unwrap();
        let probs = root.softmax(scores).unwrap();
        let sel = root.top_k(probs, used).unwrap();
        let h3 = root.reshape(h, &[K, 1, n]).unwrap();
        let e = root.mul_mat_id(up, h3, sel).unwrap();
        let e = root.add_id(e, bias, sel).unwrap();
        assert_eq!(e.ne(), [ff, used, n, 1]);
        // Ollama's qwen3: the sum over the experts used, one view each.
        let (s1, s2) = (e.nb()[1], e.nb()[2]);
        let mut sum = root.view(e, 0, &[ff, n], &[s2]).unwrap();
        for i in 1..used as usize {
            let v = root.view(e, i * s1, &[ff, n], &[s2]).unwrap();
            sum = root.add(sum, v).unwrap();
        }
        root.sum_rows(sum).unwrap()
    };
    let empty = layer(&mut root, rows);
    let full = layer(&mut root, x);
    root.compute(&[empty, full]).unwrap();
    assert!(data::read_f32(empty, "test").unwrap().is_empty());
    let got = data::read_f32(full, "test").unwrap();
    assert_eq!(got.len(), TOKENS as usize);
    assert!(got.iter().all(|v| v.is_finite() && *v != 0.0), "{got:?}");

    // An expert list with no experts per token is still refused.
    let ids0 = input.empty(I32, &[0]).unwrap();
    let ids0 = root.reshape(ids0, &[0, 1]).unwrap();
    let none3 = root.reshape(rows, &[K, 1, 0]).unwrap();
    let e = root.mul_mat_id(up, none3, ids0).unwrap_err();
    assert_eq!((e.kind, e.message.as_str()), (ErrorKind::Shape, "mul_mat_id: ids is empty: i32[0]"));
    // A reshape that would infer a dim beside a 0 is refused, as Ollama's.
    let e = root.reshape(rows, &[K, -1, 0]).unwrap_err();
    assert_eq!(e.message, "reshape: dimension cannot be zero, shape [64, -1, 0] for f32[64,0]");
}
