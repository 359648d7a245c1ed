//! Indexing, copying and sorting ops: differential tests against naive
//! references on random data (f32, f16, i32, bf16, q8_0/q4_0 with stated
//! tolerances; contiguous and non-contiguous inputs), the row-id checker,
//! and bad-input tests (errors, never aborts; the context stays usable).
mod common;
#[path = "common/capi.rs"]
mod capi_base;
use common::*;
use common::arr::{Arr, ne_of, shape_i64};

use ggml_rs::ml::ops::index::check_row_ids;
use ggml_rs::ml::{data, Backend, Context, ErrorKind, Tensor};
use ggml_rs::sys;

const Q8_0: u32 = sys::GGML_TYPE_Q8_0;
const Q4_0: u32 = sys::GGML_TYPE_Q4_0;
const BF16: u32 = sys::GGML_TYPE_BF16;
const I64: u32 = sys::GGML_TYPE_I64;
const F64: u32 = sys::GGML_TYPE_F64;

fn read(t: Tensor) -> Vec<f32> {
    data::read_f32(t, "test").unwrap()
}

fn get(root: &mut Context, t: Tensor) -> Arr {
    let v = eval(root, t);
    Arr { ne: ne_of(t), v }
}

fn ref_permute(a: &Arr, order: [usize; 4]) -> Arr {
    let mut ne = [0; 4];
    for i in 0..4 {
        ne[order[i]] = a.ne[i];
    }
    Arr::from_fn(ne, |j| a.at([j[order[0]], j[order[1]], j[order[2]], j[order[3]]]))
}

fn inverse(o: [usize; 4]) -> [usize; 4] {
    let mut inv = [0usize; 4];
    for i in 0..4 {
        inv[o[i]] = i;
    }
    inv
}

/// A non-contiguous tensor whose logical values are `a`.
fn permuted_view(root: &mut Context, input: &mut Context, dtype: u32, a: &Arr, o: [usize; 4]) -> Tensor {
    let x = ref_permute(a, o).upload(input, dtype);
    let v = root.permute(x, inverse(o).map(|x| x as i32)).unwrap();
    assert_eq!(ne_of(v), a.ne);
    v
}

fn fresh(b: &Backend) -> (Context, Context) {
    contexts(b)
}

fn below(rng: &mut Rng, n: usize) -> usize {
    (rng.next_u64() % n as u64) as usize
}

/// A random permutation of 0..n.
fn shuffled(rng: &mut Rng, n: usize) -> Vec<usize> {
    let mut v: Vec<usize> = (0..n).collect();
    for i in (1..n).rev() {
        v.swap(i, below(rng, i + 1));
    }
    v
}

/// bf16 of `x` with round-to-nearest-even, as ggml converts.
fn bf16_round(x: f32) -> f32 {
    let u = x.to_bits();
    let r = (u + (0x7fff + ((u >> 16) & 1))) >> 16;
    f32::from_bits(r << 16)
}

/// Dequantized q8_0 of `x` must lie within 0.6 quantization steps
/// (amax/127 per block of 32) of `x`; q4_0 within 1.1 steps (amax/8).
fn assert_quantized(what: &str, got: &[f32], want: &[f32], step_of_amax: f32, steps: f32) {
    assert_eq!(got.len(), want.len(), "{what}");
    for (b, (g, w)) in got.chunks(32).zip(want.chunks(32)).enumerate() {
        let amax = w.iter().fold(0f32, |m, &x| m.max(x.abs()));
        let tol = amax / step_of_amax * steps + 1e-6;
        for (i, (x, y)) in g.iter().zip(w).enumerate() {
            assert!((x - y).abs() <= tol, "{what}: block {b} element {i}: {x} vs {y} (tolerance {tol})");
        }
    }
}

// ---- get_rows --------------------------------------------------------------

fn ref_get_rows(a: &Arr, ids: &Arr) -> Arr {
    Arr::from_fn([a.ne[0], ids.ne[0], ids.ne[1], ids.ne[2]], |j| {
        a.at([j[0], ids.at([j[1], j[2], j[3], 0]) as usize, j[2], j[3]])
    })
}

#[test]
fn get_rows_matches_reference() {
    let b = backend();
    let mut rng = Rng::new(11);
    for &dtype in &[F32, F16, I32] {
        for case in 0..4 {
            let (mut root, mut input) = fresh(&b);
            let ne = [1 + below(&mut rng, 6), 2 + below(&mut rng, 6), 1 + (case + 1) % 2, 1 + case / 2];
            let a = Arr::rand(&mut rng, ne, dtype);
            let n = 2 + below(&mut rng, 7);
            let ids = Arr::from_fn([n, ne[2], ne[3], 1], |_| below(&mut rng, ne[1]) as f32);
            let x = a.upload(&mut input, dtype);
            let i = ids.upload(&mut input, I32);
            let g = root.get_rows(x, i).unwrap();
            assert_eq!(g.dtype(), if dtype == I32 { I32 } else { F32 });
            let want = ref_get_rows(&a, &ids);
            assert_eq!(get(&mut root, g), want, "dtype {dtype} {ne:?} ids {:?}", ids.ne);
            // Non-contiguous: rows of a permuted view (dims 1..3 reordered,
            // rows still dense) picked by ids that are a strided view.
            let va = permuted_view(&mut root, &mut input, dtype, &a, [0, 3, 1, 2]);
            let vi = if case % 2 == 0 {
                // ids with non-dense rows (a permuted view)
                permuted_view(&mut root, &mut input, I32, &ids, [1, 0, 2, 3])
            } else {
                // ids inside a bigger buffer: offset one, rows padded by two
                let wide = Arr::from_fn([n + 3, ne[2], ne[3], 1], |j| if (1..=n).contains(&j[0]) { ids.at([j[0] - 1, j[1], j[2], 0]) } else { -7.0 });
                let wi = wide.upload(&mut input, I32);
                let w = 4 * (n + 3);
                root.view(wi, 4, &[n as i64, ne[2] as i64, ne[3] as i64], &[w, w * ne[2]]).unwrap()
            };
            assert!(!vi.is_contiguous() || (case % 2 == 1 && ne[2] * ne[3] == 1));
            let g = root.get_rows(va, vi).unwrap();
            assert_eq!(get(&mut root, g), want, "non-contiguous dtype {dtype}");
        }
    }
    // Quantized and bf16 rows are converted to f32 exactly as a full
    // conversion does.
    for &qt in &[Q8_0, Q4_0, BF16] {
        let (mut root, mut input) = fresh(&b);
        let a = Arr::rand(&mut rng, [64, 7, 2, 1], F32);
        let ids = Arr::from_fn([5, 2, 1, 1], |_| below(&mut rng, 7) as f32);
        let x = a.upload(&mut input, F32);
        let q = root.cast(x, qt).unwrap();
        let i = ids.upload(&mut input, I32);
        let g = root.get_rows(q, i).unwrap();
        root.compute(&[q, g]).unwrap();
        let deq = Arr { ne: a.ne, v: read(q) };
        assert_eq!(read(g), ref_get_rows(&deq, &ids).v, "type {qt}");
    }
}

// ---- set_rows --------------------------------------------------------------

#[test]
fn set_rows_matches_reference() {
    let b = backend();
    let mut rng = Rng::new(12);
    for &(dst_t, src_t, ids_t) in &[(F32, F32, I32), (F16, F32, I64), (F32, F16, I32), (F16, F16, I64), (BF16, F32, I32)] {
        for case in 0..3 {
            let (mut root, mut input) = fresh(&b);
            let rows = 4 + below(&mut rng, 5);
            let ne_d = [1 + below(&mut rng, 9), rows, 2 * (1 + case % 2), 1 + case / 2];
            let n = 1 + below(&mut rng, rows);
            let ne_s = [ne_d[0], n, ne_d[2], ne_d[3]];
            // ids broadcast over dim 2 when case is odd ([n, 1, c3])
            let c2 = if case % 2 == 1 { 1 } else { ne_d[2] };
            let mut ids = Arr::from_fn([n, c2, ne_d[3], 1], |_| 0.0);
            for i3 in 0..ne_d[3] {
                for i2 in 0..c2 {
                    let perm = shuffled(&mut rng, rows); // distinct rows per batch
                    for (k, &row) in perm.iter().take(n).enumerate() {
                        let at = idx(ids.ne, k, i2, i3, 0);
                        ids.v[at] = row as f32;
                    }
                }
            }
            let d0 = Arr::rand(&mut rng, ne_d, if dst_t == F16 { F16 } else { F32 });
            let s = Arr::rand(&mut rng, ne_s, if src_t == F16 { F16 } else { F32 });
            let dst = if dst_t == BF16 {
                let f = d0.upload(&mut input, F32);
                let z = input.zeros(BF16, &shape_i64(ne_d)).unwrap();
                let mut tmp = Context::new(&b, 64).unwrap();
                let c = tmp.cpy(f, z).unwrap();
                tmp.compute(&[c]).unwrap();
                z
            } else {
                d0.upload(&mut input, dst_t)
            };
            let conv = |x: f32| match dst_t {
                F16 => f16_round(x),
                BF16 => bf16_round(x),
                _ => x,
            };
            let src = s.upload(&mut input, src_t);
            let i = ids.upload(&mut input, ids_t);
            let r = root.set_rows(dst, src, i).unwrap();
            assert_eq!(ne_of(r), ne_d);
            let mut want = d0.clone();
            for x in want.v.iter_mut() {
                *x = conv(*x);
            }
            for i3 in 0..ne_d[3] {
                for i2 in 0..ne_d[2] {
                    for k in 0..n {
                        let row = ids.at([k, i2 % c2, i3 % ids.ne[2], 0]) as usize;
                        for i0 in 0..ne_d[0] {
                            want.v[idx(ne_d, i0, row, i2, i3)] = conv(s.at([i0, k, i2, i3]));
                        }
                    }
                }
            }
            let what = format!("dst {dst_t} src {src_t} ids {ids_t} {ne_d:?} n {n}");
            assert_eq!(get(&mut root, r).v, want.v, "{what}");
            // the write went into dst's memory
            assert_eq!(read(dst), want.v, "{what}: dst");
        }
    }
    // into a q8_0 destination (a KV cache row write), within q8_0 tolerance
    let (mut root, mut input) = fresh(&b);
    let dst = input.zeros(Q8_0, &[64, 6]).unwrap();
    let s = Arr::rand(&mut rng, [64, 2, 1, 1], F32);
    let src = s.upload(&mut input, F32);
    let i = upload_i32(&mut input, &[2], &[4, 1]);
    let r = root.set_rows(dst, src, i).unwrap();
    let got = get(&mut root, r);
    let mut want = vec![0f32; 64 * 6];
    want[4 * 64..5 * 64].copy_from_slice(&s.v[..64]);
    want[64..128].copy_from_slice(&s.v[64..]);
    assert_quantized("set_rows q8_0", &got.v, &want, 127.0, 0.6);
    assert!(got.v[..64].iter().all(|&x| x == 0.0) && got.v[128..256].iter().all(|&x| x == 0.0));
}

// ---- cpy and cast ------------------------------------------------------------

#[test]
fn cpy_converts_into_views_in_logical_order() {
    let b = backend();
    let mut rng = Rng::new(13);
    let (mut root, mut input) = fresh(&b);
    let a = Arr::rand(&mut rng, [5, 4, 3, 2], F32);
    let x = a.upload(&mut input, F32);
    let flat: Vec<f32> = a.v.clone();

    // f32 -> f16 and back, contiguous destinations
    let h = input.zeros(F16, &[5, 4, 3, 2]).unwrap();
    let c = root.cpy(x, h).unwrap();
    assert_eq!(get(&mut root, c).v, flat.iter().map(|&v| f16_round(v)).collect::<Vec<_>>());
    let f = input.zeros(F32, &[120]).unwrap();
    let c2 = root.cpy(h, f).unwrap();
    assert_eq!(get(&mut root, c2).v, flat.iter().map(|&v| f16_round(v)).collect::<Vec<_>>());

    // a permuted source into a contiguous destination of another shape
    let va = permuted_view(&mut root, &mut input, F32, &a, [2, 0, 3, 1]);
    let d = input.zeros(F16, &[10, 12]).unwrap();
    let c = root.cpy(va, d).unwrap();
    assert_eq!(get(&mut root, c).v, flat.iter().map(|&v| f16_round(v)).collect::<Vec<_>>());

    // into a strided view of a bigger tensor: only the viewed elements change
    let big = input.zeros(F32, &[5, 8, 3, 2]).unwrap();
    let dv = root.slice(big, 1, 1, 8, 2).unwrap(); // rows 1,3,5,7
    let c = root.cpy(x, dv).unwrap();
    assert_eq!(get(&mut root, c).v, flat);
    let whole = read(big);
    let want_big = Arr::from_fn([5, 8, 3, 2], |j| if j[1] % 2 == 1 { a.at([j[0], j[1] / 2, j[2], j[3]]) } else { 0.0 });
    assert_eq!(whole, want_big.v);

    // i32 <-> f32
    let ints = Arr::rand(&mut rng, [7, 3, 1, 1], I32);
    let xi = ints.upload(&mut input, I32);
    let fi = input.zeros(F32, &[7, 3]).unwrap();
    let c = root.cpy(xi, fi).unwrap();
    assert_eq!(get(&mut root, c).v, ints.v);
    let back = input.zeros(I32, &[21]).unwrap();
    let c = root.cpy(fi, back).unwrap();
    assert_eq!(get(&mut root, c).v, ints.v);

    // f32 -> q8_0 (same shape), then q8_0 -> f32 equals the dequantized tensor
    let q = input.zeros(Q8_0, &[64, 3]).unwrap();
    let qa = Arr::rand(&mut rng, [64, 3, 1, 1], F32);
    let xq = qa.upload(&mut input, F32);
    let cq = root.cpy(xq, q).unwrap();
    let back = input.zeros(F32, &[32, 6]).unwrap();
    let cb = root.cpy(cq, back).unwrap();
    root.compute(&[cq, cb]).unwrap();
    let deq = read(q);
    assert_quantized("cpy f32->q8_0", &deq, &qa.v, 127.0, 0.6);
    assert_eq!(read(cb), deq);
}

#[test]
fn cast_matches_reference() {
    let b = backend();
    let mut rng = Rng::new(14);
    let (mut root, mut input) = fresh(&b);
    let a = Arr::rand(&mut rng, [64, 5, 2, 1], F32);
    let x = a.upload(&mut input, F32);
    let h = root.cast(x, F16).unwrap();
    let hb = root.cast(h, F32).unwrap();
    let bf = root.cast(x, BF16).unwrap();
    let bh = root.cast(bf, F16).unwrap();
    let q8 = root.cast(x, Q8_0).unwrap();
    let q4 = root.cast(x, Q4_0).unwrap();
    let q8f = root.cast(q8, F32).unwrap();
    let q8q = root.cast(q8, Q8_0).unwrap();
    let va = permuted_view(&mut root, &mut input, F32, &a, [1, 2, 0, 3]);
    let pv = root.cast(va, F16).unwrap();
    let ints = Arr::rand(&mut rng, [9, 2, 1, 1], I32);
    let xi = ints.upload(&mut input, I32);
    let fi = root.cast(xi, F32).unwrap();
    let outs = [h, hb, bf, bh, q8, q4, q8f, q8q, pv, fi];
    root.compute(&outs).unwrap();
    let f16s: Vec<f32> = a.v.iter().map(|&v| f16_round(v)).collect();
    let bf16s: Vec<f32> = a.v.iter().map(|&v| bf16_round(v)).collect();
    assert_eq!(h.dtype(), F16);
    assert_eq!(read(h), f16s);
    assert_eq!(read(hb), f16s);
    assert_eq!(read(bf), bf16s);
    assert_eq!(read(bh), bf16s.iter().map(|&v| f16_round(v)).collect::<Vec<_>>());
    assert_quantized("cast q8_0", &read(q8), &a.v, 127.0, 0.6);
    assert_quantized("cast q4_0", &read(q4), &a.v, 8.0, 1.1);
    assert_eq!(read(q8f), read(q8));
    assert_eq!(read(q8q), read(q8));
    assert!(pv.is_contiguous());
    assert_eq!(read(pv), f16s);
    assert_eq!(read(fi), ints.v);
}

// ---- argsort and top_k --------------------------------------------------------

/// Distinct values exactly representable in every input type.
fn distinct(rng: &mut Rng, ne: [usize; 4]) -> Arr {
    let n: usize = ne.iter().product();
    let perm = shuffled(rng, n);
    Arr { ne, v: perm.iter().map(|&p| p as f32 - (n / 2) as f32).collect() }
}

fn ref_argsort(a: &Arr, descending: bool) -> Arr {
    let mut v = Vec::new();
    for row in a.v.chunks(a.ne[0]) {
        let mut ix: Vec<usize> = (0..row.len()).collect();
        ix.sort_by(|&p, &q| row[p].partial_cmp(&row[q]).unwrap());
        if descending {
            ix.reverse();
        }
        v.extend(ix.iter().map(|&i| i as f32));
    }
    Arr { ne: a.ne, v }
}

#[test]
fn argsort_and_top_k_match_reference() {
    let b = backend();
    let mut rng = Rng::new(15);
    for &dtype in &[F32, F16, I32] {
        for case in 0..3 {
            let (mut root, mut input) = fresh(&b);
            let ne = [1 + below(&mut rng, 40), 1 + below(&mut rng, 4), 1 + case, 1 + below(&mut rng, 2)];
            let a = distinct(&mut rng, ne);
            let x = a.upload(&mut input, dtype);
            let asc = root.argsort(x, false).unwrap();
            let desc = root.argsort(x, true).unwrap();
            assert_eq!(asc.dtype(), I32);
            let what = format!("dtype {dtype} {ne:?}");
            assert_eq!(get(&mut root, asc), ref_argsort(&a, false), "{what}");
            assert_eq!(get(&mut root, desc), ref_argsort(&a, true), "{what}");
            // a non-contiguous input is sorted by its logical rows
            let va = permuted_view(&mut root, &mut input, dtype, &a, [3, 2, 0, 1]);
            let s = root.argsort(va, true).unwrap();
            assert_eq!(get(&mut root, s), ref_argsort(&a, true), "{what} permuted");
            // top_k: the first k of the descending order, a view
            let full = ref_argsort(&a, true);
            for k in [1, ne[0].div_ceil(2), ne[0]] {
                let t = root.top_k(x, k as i64).unwrap();
                assert_eq!(ne_of(t), [k, ne[1], ne[2], ne[3]]);
                let want = Arr::from_fn([k, ne[1], ne[2], ne[3]], |j| full.at(j));
                assert_eq!(get(&mut root, t), want, "{what} k {k}");
                let t = root.top_k(va, k as i64).unwrap();
                assert_eq!(get(&mut root, t), want, "{what} k {k} permuted");
            }
        }
    }
}

#[test]
fn argsort_orders_nan_and_infinities_without_breaking_the_sort() {
    let b = backend();
    let (mut root, mut input) = fresh(&b);
    let row = vec![1.0, f32::NAN, f32::NEG_INFINITY, 3.0, f32::INFINITY, -2.0];
    let mut rng = Rng::new(16);
    // a long row with NaNs scattered through it (the C++ sort's guarded
    // and unguarded phases both see them)
    let long: Vec<f32> = (0..300).map(|i| if i % 7 == 3 { f32::NAN } else { rng.f32() }).collect();
    let x = upload(&mut input, F32, &[6], &row);
    let xl = upload(&mut input, F32, &[300], &long);
    let asc = root.argsort(x, false).unwrap();
    let top = root.top_k(xl, 10).unwrap();
    let sl = root.argsort(xl, true).unwrap();
    root.compute(&[asc, top, sl]).unwrap();
    let got = read(asc);
    assert_eq!(&got[..4], &[2., 5., 0., 3.]);
    let mut last = got[4..].to_vec();
    last.sort_by(|a, b| a.partial_cmp(b).unwrap());
    assert_eq!(last, vec![1., 4.], "NaN and +inf sort last");
    // descending: every NaN first (ggml patch 11 orders NaN after every
    // number), then the numbers in order
    let order = read(sl);
    let nans = long.iter().filter(|v| v.is_nan()).count();
    assert!(order[..nans].iter().all(|&i| long[i as usize].is_nan()));
    let rest: Vec<f32> = order[nans..].iter().map(|&i| long[i as usize]).collect();
    assert!(rest.windows(2).all(|w| w[0] >= w[1]), "{rest:?}");
    assert!(nans >= 10 && read(top).iter().all(|&i| long[i as usize].is_nan()));
}

// ---- row ids ------------------------------------------------------------------

#[test]
fn check_row_ids_finds_out_of_range_ids_before_compute() {
    let b = backend();
    let (mut root, mut input) = fresh(&b);
    let a = input.zeros(F32, &[4, 5, 2]).unwrap();
    let ids = input.empty(I32, &[3, 2]).unwrap(); // filled after the graph is built
    let g = root.get_rows(a, ids).unwrap();
    let src = input.zeros(F32, &[4, 3, 2]).unwrap();
    let ids64 = input.empty(I64, &[3]).unwrap();
    let s = root.set_rows(a, src, ids64).unwrap();
    let fill = |t: Tensor, vals: &[i64]| {
        let bytes: Vec<u8> = if t.dtype() == I32 {
            vals.iter().flat_map(|&v| (v as i32).to_le_bytes()).collect()
        } else {
            vals.iter().flat_map(|&v| v.to_le_bytes()).collect()
        };
        data::write(t, &bytes, "test").unwrap();
    };
    fill(ids, &[0, 4, 2, 1, 3, 0]);
    fill(ids64, &[4, 0, 2]);
    check_row_ids(g).unwrap();
    check_row_ids(s).unwrap();
    fill(ids, &[0, 4, 2, 1, 5, 0]);
    let e = check_row_ids(g).unwrap_err();
    assert_eq!(e.kind, ErrorKind::InvalidArgument);
    assert!(e.message.starts_with("get_rows: id 5 at position 4 of i32[3,2] is out of range for 5 rows"), "{}", e.message);
    fill(ids, &[0, -1, 2, 1, 3, 0]);
    assert!(check_row_ids(g).unwrap_err().message.contains("id -1 at position 1"));
    fill(ids64, &[4, 0, 5]);
    let e = check_row_ids(s).unwrap_err();
    assert!(e.message.starts_with("set_rows: id 5 at position 2 of i64[3] is out of range for 5 rows"), "{}", e.message);
    // ids through a view of a data tensor are checked too
    fill(ids, &[0, 4, 2, 1, 3, 9]);
    let vi = root.view(ids, 4, &[2, 2], &[12]).unwrap(); // ids [4,2] and [3,9]
    let g2 = root.get_rows(a, vi).unwrap();
    let e = check_row_ids(g2).unwrap_err();
    assert!(e.message.contains("id 9 at position 3 of i32[2,2] (non-contiguous)"), "{}", e.message);
    let vp = root.permute(vi, [1, 0, 2, 3]).unwrap(); // [4,3],[2,9] in logical order
    let g3 = root.get_rows(a, vp).unwrap();
    assert!(check_row_ids(g3).unwrap_err().message.contains("id 9 at position 3"));
    fill(ids, &[0, 4, 2, 1, 3, 0]);
    check_row_ids(g2).unwrap();
    // ids computed by the graph, and other nodes, are not checked
    let sorted = root.argsort(a, false).unwrap();
    let sr = root.reshape(sorted, &[-1, 2]).unwrap();
    let first = root.slice(sr, 0, 0, 1, 1).unwrap();
    let w = root.get_rows(a, first).unwrap();
    check_row_ids(w).unwrap();
    check_row_ids(sorted).unwrap();
    check_row_ids(a).unwrap();
    // with valid ids the graph computes
    fill(ids, &[0, 4, 2, 1, 3, 0]);
    check_row_ids(g).unwrap();
    assert_eq!(eval(&mut root, g), vec![0.0; 24]);
}

// ---- bad inputs -----------------------------------------------------------------

fn err_of(r: ggml_rs::ml::Result<Tensor>, prefix: &str, part: &str) -> ErrorKind {
    let e = r.expect_err(prefix);
    assert!(
        e.message.starts_with(&format!("{prefix}: ")) && e.message.contains(part),
        "want '{prefix}: …{part}…', got '{}'",
        e.message
    );
    e.kind
}

#[test]
fn bad_inputs_are_errors_and_the_context_stays_usable() {
    let b = backend();
    let (mut root, mut input) = fresh(&b);
    let a = input.zeros(F32, &[4, 5, 2]).unwrap();
    let h = input.zeros(F16, &[4, 5, 2]).unwrap();
    let ids = upload_i32(&mut input, &[3, 2], &[0, 1, 2, 3, 4, 0]);
    let fids = input.zeros(F32, &[3, 2]).unwrap();
    let f64t = input.zeros(F64, &[4, 5, 2]).unwrap();
    let q = input.zeros(Q8_0, &[64, 2]).unwrap();
    let t = root.permute(a, [1, 0, 2, 3]).unwrap(); // [5,4,2], nb[0] = 16

    // get_rows
    assert_eq!(err_of(root.get_rows(a, fids), "get_rows", "ids must be i32, got f32[3,2]"), ErrorKind::DType);
    assert_eq!(err_of(root.get_rows(f64t, ids), "get_rows", "cannot read rows of f64[4,5,2]"), ErrorKind::DType);
    let ids1 = upload_i32(&mut input, &[3], &[0, 1, 2]);
    assert_eq!(err_of(root.get_rows(a, ids1), "get_rows", "ids i32[3] do not fit f32[4,5,2]"), ErrorKind::Shape);
    err_of(root.get_rows(t, ids), "get_rows", "contiguous rows");
    // set_rows
    let src = input.zeros(F32, &[4, 3, 2]).unwrap();
    let isrc = input.zeros(I32, &[4, 3, 2]).unwrap();
    let ids3 = upload_i32(&mut input, &[3], &[0, 1, 2]);
    let idi = input.zeros(I32, &[4, 5, 2]).unwrap();
    err_of(root.set_rows(a, isrc, ids3), "set_rows", "src must be f32 or f16");
    err_of(root.set_rows(a, src, fids), "set_rows", "ids must be i32 or i64");
    err_of(root.set_rows(idi, src, ids3), "set_rows", "dst must be f32, f16, bf16 or a quantized type");
    err_of(root.set_rows(t, src, ids3), "set_rows", "dims 0, 2 and 3 must match");
    let ids_b = upload_i32(&mut input, &[3, 3], &[0; 9]);
    err_of(root.set_rows(a, src, ids_b), "set_rows", "c2 dividing 2");
    let ids_n = upload_i32(&mut input, &[2], &[0, 1]);
    err_of(root.set_rows(a, src, ids_n), "set_rows", "must be [3, c2, c3]");
    let tsrc = root.permute(input.zeros(F32, &[3, 4, 2]).unwrap(), [1, 0, 2, 3]).unwrap();
    err_of(root.set_rows(a, tsrc, ids3), "set_rows", "src must have contiguous rows");
    // cpy
    let small = input.zeros(F32, &[4, 5]).unwrap();
    err_of(root.cpy(a, small), "cpy", "element counts differ");
    let i40 = input.zeros(I32, &[40]).unwrap();
    let h40 = input.zeros(F16, &[40]).unwrap();
    assert_eq!(err_of(root.cpy(i40, h40), "cpy", "cannot convert i32[40] to f16"), ErrorKind::DType);
    err_of(root.cpy(h, i40), "cpy", "cannot convert f16[4,5,2] to i32");
    let h128 = input.zeros(F16, &[64, 2]).unwrap();
    err_of(root.cpy(q, h128), "cpy", "cannot convert q8_0[64,2] to f16");
    let f128 = input.zeros(F32, &[128]).unwrap();
    err_of(root.cpy(f128, q), "cpy", "equal row lengths");
    let big_q = input.zeros(Q8_0, &[64, 4]).unwrap();
    let strided_q = root.slice(big_q, 1, 0, 4, 2).unwrap();
    let f64x2 = input.zeros(F32, &[64, 2]).unwrap();
    err_of(root.cpy(f64x2, strided_q), "cpy", "contiguous destination");
    let ft = root.permute(input.zeros(F32, &[2, 64]).unwrap(), [1, 0, 2, 3]).unwrap();
    err_of(root.cpy(ft, q), "cpy", "dense rows");
    // cast
    assert_eq!(err_of(root.cast(a, 4), "cast", "unknown tensor type 4"), ErrorKind::DType);
    err_of(root.cast(a, 1000), "cast", "unknown tensor type 1000");
    err_of(root.cast(a, Q8_0), "cast", "must be a multiple of the q8_0 block size 32");
    err_of(root.cast(q, F16), "cast", "cannot convert q8_0[64,2] to f16");
    err_of(root.cast(i40, F16), "cast", "cannot convert i32[40] to f16");
    err_of(root.cast(f64t, F32), "cast", "cannot convert f64[4,5,2] to f32");
    // argsort / top_k
    assert_eq!(err_of(root.argsort(q, false), "argsort", "a must be f32 or f16 or bf16 or i32"), ErrorKind::DType);
    err_of(root.argsort(f64t, true), "argsort", "got f64[4,5,2]");
    for k in [0, -1, 5, i64::MAX] {
        assert_eq!(err_of(root.top_k(a, k), "top_k", "k must be in 1..=4"), ErrorKind::Shape);
    }
    err_of(root.top_k(q, 1), "top_k", "a must be f32 or f16 or bf16 or i32");

    // Nothing above aborted, and the context still computes.
    let g = root.get_rows(a, ids).unwrap();
    let k = root.top_k(g, 2).unwrap();
    assert_eq!(eval(&mut root, g), vec![0.0; 24]);
    assert_eq!(ne_of(k), [2, 3, 2, 1]);
}

// ---- the C functions ---------------------------------------------------------

mod c {
    pub use crate::capi_base::*;

    extern "C" {
        pub fn ggml_rs_get_rows(c: *mut Ctx, a: *mut T, ids: *mut T, err: *mut Error) -> *mut T;
        pub fn ggml_rs_set_rows(c: *mut Ctx, dst: *mut T, src: *mut T, ids: *mut T, err: *mut Error) -> *mut T;
        pub fn ggml_rs_cpy(c: *mut Ctx, src: *mut T, dst: *mut T, err: *mut Error) -> *mut T;
        pub fn ggml_rs_cast(c: *mut Ctx, a: *mut T, t: i32, err: *mut Error) -> *mut T;
        pub fn ggml_rs_argsort(c: *mut Ctx, a: *mut T, descending: i32, err: *mut Error) -> *mut T;
        pub fn ggml_rs_top_k(c: *mut Ctx, a: *mut T, k: i64, err: *mut Error) -> *mut T;
    }
}

#[test]
fn c_functions_compute_and_report_errors() {
    use c::*;
    use std::ptr::null_mut;
    unsafe {
        let mut e = Error::new();
        let mut be: *mut Backend = null_mut();
        assert_eq!(ggml_rs_backend_new(std::ptr::null(), &mut be, &mut e), 0, "{}", e.text());
        let ctx = ggml_rs_ctx_new(be, 256, &mut e);
        assert!(!ctx.is_null(), "{}", e.text());
        let inp = ggml_rs_ctx_input(ctx);
        let vals: [f32; 6] = [0.5, -1.0, 2.0, 3.0, -4.0, 1.5];
        let bytes: Vec<u8> = vals.iter().flat_map(|v| v.to_le_bytes()).collect();
        let x = ggml_rs_ctx_from_data(inp, 0, [3i64, 2].as_ptr(), 2, bytes.as_ptr(), bytes.len(), &mut e);
        assert!(!x.is_null(), "{}", e.text());
        let ib: Vec<u8> = [1i32, 0, 1].iter().flat_map(|v| v.to_le_bytes()).collect();
        let ids = ggml_rs_ctx_from_data(inp, 26, [3i64].as_ptr(), 1, ib.as_ptr(), ib.len(), &mut e);
        assert!(!ids.is_null(), "{}", e.text());

        let nulls: Vec<(&str, *mut T)> = vec![
            ("get_rows", ggml_rs_get_rows(ctx, x, null_mut(), &mut e)),
            ("set_rows", ggml_rs_set_rows(ctx, null_mut(), x, ids, &mut e)),
            ("cpy", ggml_rs_cpy(ctx, x, null_mut(), &mut e)),
            ("cast", ggml_rs_cast(ctx, null_mut(), 1, &mut e)),
            ("argsort", ggml_rs_argsort(ctx, null_mut(), 0, &mut e)),
            ("top_k", ggml_rs_top_k(ctx, null_mut(), 1, &mut e)),
        ];
        for (name, r) in nulls {
            assert!(r.is_null(), "{name}");
        }
        assert!(e.text().starts_with("top_k: a is NULL"), "{}", e.text());
        assert!(ggml_rs_cast(ctx, x, -1, &mut e).is_null());
        assert!(e.text().starts_with("cast: unknown tensor type -1"), "{}", e.text());
        assert_eq!(e.status, 3);
        assert!(ggml_rs_top_k(ctx, x, 0, &mut e).is_null());
        assert!(e.text().starts_with("top_k: k must be in 1..=3"), "{}", e.text());
        assert_eq!(e.status, 2);
        ggml_rs_ctx_clear_error(ctx);

        let g = ggml_rs_get_rows(ctx, x, ids, &mut e);
        assert!(!g.is_null(), "{}", e.text());
        let t = ggml_rs_top_k(ctx, g, 2, &mut e);
        let h = ggml_rs_cast(ctx, g, 1, &mut e);
        let s = ggml_rs_argsort(ctx, h, 1, &mut e);
        assert!(!t.is_null() && !s.is_null(), "{}", e.text());
        let outs = [g, t, s];
        assert_eq!(ggml_rs_ctx_compute(ctx, outs.as_ptr(), 3, &mut e), 0, "{}", e.text());
        let mut out = [0f32; 9];
        assert_eq!(ggml_rs_tensor_get_f32(g, out.as_mut_ptr(), 9, &mut e), 0, "{}", e.text());
        assert_eq!(out, [3.0, -4.0, 1.5, 0.5, -1.0, 2.0, 3.0, -4.0, 1.5]);
        let mut out = [0f32; 6];
        assert_eq!(ggml_rs_tensor_get_f32(t, out.as_mut_ptr(), 6, &mut e), 0, "{}", e.text());
        assert_eq!(out, [0.0, 2.0, 2.0, 0.0, 0.0, 2.0]);
        let mut out = [0f32; 9];
        assert_eq!(ggml_rs_tensor_get_f32(s, out.as_mut_ptr(), 9, &mut e), 0, "{}", e.text());
        assert_eq!(out, [0.0, 2.0, 1.0, 2.0, 0.0, 1.0, 0.0, 2.0, 1.0]);
        ggml_rs_ctx_free(inp);
        ggml_rs_ctx_free(ctx);
        ggml_rs_backend_free(be);
    }
}
