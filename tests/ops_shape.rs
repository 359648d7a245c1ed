//! Shape, layout and view ops: Ollama's test cases (TestInferShape,
//! TestPermute, TestSlice, TestSplitSections, TestChunk) with their exact
//! expected values, differential tests against naive 4-D references on
//! random data (f32, f16, i32; contiguous and non-contiguous inputs), and
//! bad-input tests (errors, never aborts; the context stays usable).
mod common;
#[path = "common/capi.rs"]
mod capi_base;
use common::*;
use common::arr::{Arr, ne_of, shape_i64};

use ggml_rs::ml::{data, Backend, Context, ErrorKind, Tensor};
use ggml_rs::sys;

const Q8_0: u32 = sys::GGML_TYPE_Q8_0;

// ---- a host reference array -----------------------------------------------

/// Computes `t` and returns it as an `Arr` (shape from the tensor).
fn get(root: &mut Context, t: Tensor) -> Arr {
    let v = eval(root, t);
    Arr { ne: ne_of(t), v }
}

fn rand_shape(rng: &mut Rng, max: usize) -> [usize; 4] {
    let mut ne = [1usize; 4];
    for d in ne.iter_mut() {
        *d = 1 + (rng.next_u64() as usize) % max;
    }
    ne
}

fn rand_in(rng: &mut Rng, lo: i64, hi_incl: i64) -> i64 {
    lo + (rng.next_u64() % ((hi_incl - lo + 1) as u64)) as i64
}

// ---- naive references ---------------------------------------------------

fn ref_permute(a: &Arr, order: [usize; 4]) -> Arr {
    let mut ne = [0; 4];
    for i in 0..4 {
        ne[order[i]] = a.ne[i];
    }
    Arr::from_fn(ne, |j| a.at([j[order[0]], j[order[1]], j[order[2]], j[order[3]]]))
}

fn slice_count(low: i64, high: i64, step: i64) -> i64 {
    if step == 1 {
        high - low
    } else {
        (high - low + 1) / step
    }
}

fn ref_slice(a: &Arr, dim: usize, low: i64, high: i64, step: i64) -> Arr {
    let mut ne = a.ne;
    ne[dim] = slice_count(low, high, step) as usize;
    Arr::from_fn(ne, |mut j| {
        j[dim] = low as usize + j[dim] * step as usize;
        a.at(j)
    })
}

fn ref_concat(a: &Arr, b: &Arr, dim: usize) -> Arr {
    let mut ne = a.ne;
    ne[dim] += b.ne[dim];
    Arr::from_fn(ne, |mut j| {
        if j[dim] < a.ne[dim] {
            a.at(j)
        } else {
            j[dim] -= a.ne[dim];
            b.at(j)
        }
    })
}

fn ref_repeat(a: &Arr, dim: usize, n: usize) -> Arr {
    let mut ne = a.ne;
    ne[dim] *= n;
    Arr::from_fn(ne, |mut j| {
        j[dim] %= a.ne[dim];
        a.at(j)
    })
}

fn ref_pad(a: &Arr, p: [i32; 4]) -> Arr {
    let mut ne = a.ne;
    for i in 0..4 {
        ne[i] += p[i] as usize;
    }
    Arr::from_fn(ne, |j| if (0..4).all(|i| j[i] < a.ne[i]) { a.at(j) } else { 0.0 })
}

/// Elements of a view over the flat values `src`: element offset `off`,
/// element strides `st`.
fn ref_view(src: &[f32], off: usize, ne: [usize; 4], st: [usize; 4]) -> Arr {
    Arr::from_fn(ne, |j| src[off + j[0] * st[0] + j[1] * st[1] + j[2] * st[2] + j[3] * st[3]])
}

fn fresh(b: &Backend) -> (Context, Context) {
    contexts(b)
}

fn arange(input: &mut Context, n: usize) -> Tensor {
    let v: Vec<f32> = (0..n).map(|i| i as f32).collect();
    upload(input, F32, &[n as i64], &v)
}

const DTYPES: [u32; 3] = [F32, F16, I32];
/// The 24 permutations of 0..3.
fn all_orders() -> Vec<[usize; 4]> {
    let mut out = Vec::new();
    for a in 0..4 {
        for b in 0..4 {
            for c in 0..4 {
                let d = 6 - a - b - c;
                let o = [a, b, c, d];
                if (0..4).all(|k| o.contains(&k)) {
                    out.push(o);
                }
            }
        }
    }
    assert_eq!(out.len(), 24);
    out
}

fn ord(o: [usize; 4]) -> [i32; 4] {
    o.map(|x| x as i32)
}

fn inverse(o: [usize; 4]) -> [usize; 4] {
    let mut inv = [0usize; 4];
    for i in 0..4 {
        inv[o[i]] = i;
    }
    inv
}

/// A non-contiguous tensor whose logical values are `a`: memory laid out
/// as `a` permuted by `o`, viewed back through the inverse permutation.
fn permuted_view(root: &mut Context, input: &mut Context, dtype: u32, a: &Arr, o: [usize; 4]) -> Tensor {
    let x = ref_permute(a, o).upload(input, dtype);
    let v = root.permute(x, ord(inverse(o))).unwrap();
    assert_eq!(ne_of(v), a.ne);
    v
}

fn is_view(t: Tensor) -> bool {
    unsafe { !(*t.as_ptr()).view_src.is_null() }
}

// ---- Ollama's cases -------------------------------------------------------

#[test]
fn ollama_infer_shape_via_reshape() {
    let b = backend();
    let (mut root, mut input) = fresh(&b);
    let t = input.empty(F32, &[2, 3, 4]).unwrap();
    let ok: &[(&str, &[i64], &[i64])] = &[
        ("no inferred shape", &[2, 3, 4], &[2, 3, 4]),
        ("infer begin", &[-1, 3, 4], &[2, 3, 4]),
        ("infer mid", &[2, -1, 4], &[2, 3, 4]),
        ("infer end", &[2, 3, -1], &[2, 3, 4]),
        ("infer gather", &[2, -1], &[2, 12]),
        ("infer gather all", &[-1], &[24]),
        ("infer split", &[2, -1, 3, 2], &[2, 2, 3, 2]),
    ];
    for &(name, input_shape, want) in ok {
        let r = root.reshape(t, input_shape).unwrap_or_else(|e| panic!("{name}: {e}"));
        let mut ne = [1i64; 4];
        ne[..want.len()].copy_from_slice(want);
        assert_eq!(r.ne(), ne, "{name}");
        assert_eq!(r.n_dims(), want.len(), "{name}");
    }
    let bad: &[(&str, &[i64], &str)] = &[
        ("too many inferred dims", &[-1, 3, -1], "only one dimension can be inferred"),
        ("indivisible infer", &[2, -1, 2, 4], "cannot infer dimension"),
        ("infer zero dim", &[2, 0, 4], "dimension cannot be zero"),
    ];
    for &(name, input_shape, want) in bad {
        let e = root.reshape(t, input_shape).unwrap_err();
        assert_eq!(e.kind, ErrorKind::Shape, "{name}");
        assert!(e.message.starts_with("reshape: ") && e.message.contains(want), "{name}: {}", e.message);
    }
}

#[test]
fn ollama_permute_cases() {
    let b = backend();
    // (input shape, order as given to Ollama's Permute, want, want shape)
    type Case<'a> = (&'a [i64], &'a [usize], Vec<f32>, [i64; 4]);
    let cases: &[Case] = &[
        (&[3, 2], &[1, 0, 2, 3], vec![0., 3., 1., 4., 2., 5.], [2, 3, 1, 1]),
        (&[3, 2], &[1, 0], vec![0., 3., 1., 4., 2., 5.], [2, 3, 1, 1]),
        (
            &[2, 3, 5],
            &[2, 0, 1, 3],
            vec![
                0., 2., 4., 6., 8., 10., 12., 14., 16., 18., 20., 22., 24., 26., 28., //
                1., 3., 5., 7., 9., 11., 13., 15., 17., 19., 21., 23., 25., 27., 29.,
            ],
            [3, 5, 2, 1],
        ),
    ];
    for (shape, order, want, want_ne) in cases {
        let (mut root, mut input) = fresh(&b);
        let n = shape.iter().product::<i64>() as usize;
        let x = arange(&mut input, n);
        let x = root.reshape(x, shape).unwrap();
        // Ollama's Permute fills the missing axes with the identity.
        let mut o = [0i32, 1, 2, 3];
        for (i, &v) in order.iter().enumerate() {
            o[i] = v as i32;
        }
        let p = root.permute(x, o).unwrap();
        assert!(!p.is_contiguous());
        let c = root.cont(p, &[]).unwrap();
        assert_eq!(c.ne(), *want_ne);
        assert_eq!(eval(&mut root, c), *want, "order {order:?}");
    }
}

#[test]
fn ollama_slice_cases() {
    let b = backend();
    let rows = |f: &dyn Fn(usize) -> Vec<f32>, n: usize| -> Vec<f32> { (0..n).flat_map(f).collect() };
    let range = |a: usize, b: usize| (a..b).map(|x| x as f32).collect::<Vec<f32>>();
    // The expected lists of Ollama's TestSlice, written by their pattern.
    type Case = (usize, i64, i64, i64, Vec<f32>, [i64; 4]); // dim, low, high, step, want, shape
    let cases: Vec<Case> = vec![
        (0, 1, 3, 1, rows(&|r| vec![(4 * r + 1) as f32, (4 * r + 2) as f32], 64), [2, 4, 4, 4]),
        (1, 1, 3, 1, rows(&|b| range(16 * b + 4, 16 * b + 12), 16), [4, 2, 4, 4]),
        (2, 1, 3, 1, rows(&|c| range(64 * c + 16, 64 * c + 48), 4), [4, 4, 2, 4]),
        (3, 1, 3, 1, range(64, 192), [4, 4, 4, 2]),
        (0, 0, 4, 2, rows(&|r| vec![(4 * r) as f32, (4 * r + 2) as f32], 64), [2, 4, 4, 4]),
        (1, 0, 4, 2, rows(&|b| [range(16 * b, 16 * b + 4), range(16 * b + 8, 16 * b + 12)].concat(), 16), [4, 2, 4, 4]),
        (2, 0, 4, 2, rows(&|c| [range(64 * c, 64 * c + 16), range(64 * c + 32, 64 * c + 48)].concat(), 4), [4, 4, 2, 4]),
        (3, 0, 4, 2, [range(0, 64), range(128, 192)].concat(), [4, 4, 4, 2]),
    ];
    // Spot values copied from the Go literals.
    assert_eq!(&cases[0].4[..4], &[1., 2., 5., 6.]);
    assert_eq!(&cases[0].4[124..], &[249., 250., 253., 254.]);
    assert_eq!(&cases[1].4[120..], &[244., 245., 246., 247., 248., 249., 250., 251.]);
    assert_eq!(&cases[2].4[32..36], &[80., 81., 82., 83.]);
    assert_eq!(&cases[5].4[..12], &[0., 1., 2., 3., 8., 9., 10., 11., 16., 17., 18., 19.]);
    assert_eq!(&cases[6].4[16..20], &[32., 33., 34., 35.]);
    assert_eq!(cases[7].4[64], 128.);
    for (dim, low, high, step, want, want_ne) in cases {
        let (mut root, mut input) = fresh(&b);
        let x = arange(&mut input, 256);
        let x = root.reshape(x, &[4, 4, 4, 4]).unwrap();
        let s = root.slice(x, dim as i64, low, high, step).unwrap();
        let c = root.cont(s, &[]).unwrap();
        assert_eq!(c.ne(), want_ne, "dim={dim},low={low},high={high},step={step}");
        assert_eq!(eval(&mut root, c), want, "dim={dim},low={low},high={high},step={step}");
    }
}

/// Ollama's ChunkSections: consecutive step-1 slices of the given sizes.
fn chunk_sections(ctx: &mut Context, t: Tensor, dim: usize, sections: &[i64]) -> Vec<Tensor> {
    let mut off = 0;
    let mut out = Vec::new();
    for &s in sections {
        out.push(ctx.slice(t, dim as i64, off, off + s, 1).unwrap());
        off += s;
    }
    assert_eq!(off, t.dim(dim), "sections do not sum to tensor dimension");
    out
}

/// Ollama's Chunk: sections of `size`, the last one smaller if needed.
fn chunk(ctx: &mut Context, t: Tensor, dim: usize, size: i64) -> Vec<Tensor> {
    let mut sections = Vec::new();
    let mut rest = t.dim(dim);
    while rest > 0 {
        sections.push(size.min(rest));
        rest -= size;
    }
    chunk_sections(ctx, t, dim, &sections)
}

type Want = Vec<(Vec<f32>, [i64; 4])>;

fn check_sections(root: &mut Context, got: Vec<Tensor>, want: &Want, what: &str) {
    assert_eq!(got.len(), want.len(), "{what}: number of sections");
    let conts: Vec<Tensor> = got.iter().map(|&t| root.cont(t, &[]).unwrap()).collect();
    root.compute(&conts).unwrap();
    for (i, (c, (vals, ne))) in conts.iter().zip(want).enumerate() {
        assert_eq!(Tensor::ne(*c), *ne, "{what}: section {i} shape");
        assert_eq!(data::read_f32(*c, "test").unwrap(), *vals, "{what}: section {i}");
    }
}

#[test]
fn ollama_split_sections_and_chunk_cases() {
    let b = backend();
    let col3x4: Want = vec![
        (vec![0., 3., 6., 9.], [1, 4, 1, 1]),
        (vec![1., 4., 7., 10.], [1, 4, 1, 1]),
        (vec![2., 5., 8., 11.], [1, 4, 1, 1]),
    ];
    // TestSplitSections
    let split: Vec<([i64; 2], usize, Vec<i64>, Want)> = vec![
        ([3, 4], 0, vec![1, 1, 1], col3x4.clone()),
        (
            [3, 4],
            1,
            vec![1, 3],
            vec![(vec![0., 1., 2.], [3, 1, 1, 1]), (vec![3., 4., 5., 6., 7., 8., 9., 10., 11.], [3, 3, 1, 1])],
        ),
        (
            [4, 3],
            0,
            vec![2, 2],
            vec![(vec![0., 1., 4., 5., 8., 9.], [2, 3, 1, 1]), (vec![2., 3., 6., 7., 10., 11.], [2, 3, 1, 1])],
        ),
        (
            [4, 3],
            1,
            vec![1, 2],
            vec![(vec![0., 1., 2., 3.], [4, 1, 1, 1]), (vec![4., 5., 6., 7., 8., 9., 10., 11.], [4, 2, 1, 1])],
        ),
    ];
    for (shape, dim, sections, want) in split {
        let (mut root, mut input) = fresh(&b);
        let x = arange(&mut input, 12);
        let x = root.reshape(x, &shape).unwrap();
        let got = chunk_sections(&mut root, x, dim, &sections);
        check_sections(&mut root, got, &want, &format!("sections={sections:?}"));
    }
    // TestChunk
    let chunks: Vec<(usize, i64, Want)> = vec![
        (0, 1, col3x4),
        (
            1,
            2,
            vec![(vec![0., 1., 2., 3., 4., 5.], [3, 2, 1, 1]), (vec![6., 7., 8., 9., 10., 11.], [3, 2, 1, 1])],
        ),
        (
            0,
            2,
            vec![(vec![0., 1., 3., 4., 6., 7., 9., 10.], [2, 4, 1, 1]), (vec![2., 5., 8., 11.], [1, 4, 1, 1])],
        ),
    ];
    for (dim, size, want) in chunks {
        let (mut root, mut input) = fresh(&b);
        let x = arange(&mut input, 12);
        let x = root.reshape(x, &[3, 4]).unwrap();
        let got = chunk(&mut root, x, dim, size);
        check_sections(&mut root, got, &want, &format!("dim={dim},chunk={size}"));
    }
}

// ---- differential tests -------------------------------------------------

#[test]
fn permute_all_orders_matches_reference() {
    let b = backend();
    let mut rng = Rng::new(1);
    for &dtype in &DTYPES {
        let (mut root, mut input) = fresh(&b);
        let a = Arr::rand(&mut rng, [2, 3, 4, 5], dtype);
        let x = a.upload(&mut input, dtype);
        // A non-contiguous input too: a permuted view holding `xb`.
        let xb = Arr::rand(&mut rng, [3, 2, 5, 4], dtype);
        let y = permuted_view(&mut root, &mut input, dtype, &xb, [1, 3, 0, 2]);
        let mut outs = Vec::new();
        let mut wants = Vec::new();
        for o in all_orders() {
            let p = root.permute(x, ord(o)).unwrap();
            assert_eq!(ne_of(p), ref_permute(&a, o).ne);
            outs.push(root.cont(p, &[]).unwrap());
            wants.push(ref_permute(&a, o));
            let q = root.permute(y, ord(o)).unwrap();
            outs.push(root.cont(q, &[]).unwrap());
            wants.push(ref_permute(&xb, o));
        }
        root.compute(&outs).unwrap();
        for (i, (t, w)) in outs.iter().zip(&wants).enumerate() {
            assert_eq!(ne_of(*t), w.ne, "case {i}");
            assert_eq!(data::read_f32(*t, "test").unwrap(), w.v, "dtype {dtype} case {i}");
        }
    }
}

#[test]
fn reshape_and_cont_match_reference() {
    let b = backend();
    let mut rng = Rng::new(2);
    for &dtype in &DTYPES {
        for _ in 0..4 {
            let (mut root, mut input) = fresh(&b);
            let ne = rand_shape(&mut rng, 5);
            let a = Arr::rand(&mut rng, ne, dtype);
            let x = a.upload(&mut input, dtype);
            let n = a.v.len() as i64;
            // contiguous: a view with the same flat order
            let r = root.reshape(x, &[-1]).unwrap();
            assert_eq!(r.ne(), [n, 1, 1, 1]);
            let r2 = root.reshape(x, &[ne[0] as i64 * ne[1] as i64, -1, ne[3] as i64]).unwrap();
            assert_eq!(r2.ne(), [(ne[0] * ne[1]) as i64, ne[2] as i64, ne[3] as i64, 1]);
            assert_eq!(get(&mut root, r).v, a.v);
            assert_eq!(get(&mut root, r2).v, a.v);
            // non-contiguous: copied in logical order
            let o = all_orders()[(rng.next_u64() % 24) as usize];
            let p = root.permute(x, ord(o)).unwrap();
            let pref = ref_permute(&a, o);
            let pr = root.reshape(p, &[-1, pref.ne[3] as i64]).unwrap();
            assert!(pr.is_contiguous());
            assert_eq!(pr.ne(), [(n / pref.ne[3] as i64), pref.ne[3] as i64, 1, 1]);
            assert_eq!(get(&mut root, pr).v, pref.v);
            // cont with a shape, and without
            let c = root.cont(p, &[pref.ne[0] as i64, -1]).unwrap();
            assert_eq!(c.ne(), [pref.ne[0] as i64, n / pref.ne[0] as i64, 1, 1]);
            assert_eq!(get(&mut root, c).v, pref.v);
            let c0 = root.cont(p, &[]).unwrap();
            assert_eq!(ne_of(c0), pref.ne);
            assert_eq!(get(&mut root, c0).v, pref.v);
            let d = root.dup(p).unwrap();
            assert!(d.is_contiguous());
            assert_eq!(ne_of(d), pref.ne);
            assert_eq!(get(&mut root, d).v, pref.v);
        }
    }
}

#[test]
fn view_matches_reference_and_views_of_views() {
    let b = backend();
    let mut rng = Rng::new(3);
    for &dtype in &DTYPES {
        let ts = if dtype == F16 { 2 } else { 4 };
        for _ in 0..6 {
            let (mut root, mut input) = fresh(&b);
            let total = 200 + (rng.next_u64() % 200) as usize;
            let a = Arr::rand(&mut rng, [total, 1, 1, 1], dtype);
            let x = a.upload(&mut input, dtype);
            // A random in-bounds strided view (element units), 1 to 4 dims.
            let n_dims = 1 + (rng.next_u64() % 4) as usize;
            let mut ne = [1usize; 4];
            let mut st = [1usize; 4];
            for i in 0..n_dims {
                ne[i] = 1 + (rng.next_u64() % 4) as usize;
                if i > 0 {
                    st[i] = 1 + (rng.next_u64() % 12) as usize;
                }
            }
            let span: usize = 1 + (0..4).map(|i| (ne[i] - 1) * st[i]).sum::<usize>();
            let off = (rng.next_u64() as usize) % (total - span + 1);
            let nb: Vec<usize> = (1..n_dims).map(|i| st[i] * ts).collect();
            let v = root.view(x, off * ts, &shape_i64(ne)[..n_dims], &nb).unwrap();
            let want = ref_view(&a.v, off, ne, st);
            assert_eq!(get(&mut root, v).v, want.v, "dtype {dtype} view {ne:?} {st:?} at {off}");
            // the last element in bounds is fine, one more is not
            let last = root.view(x, (total - 1) * ts, &[1], &[]).unwrap();
            assert_eq!(get(&mut root, last).v, vec![a.v[total - 1]]);
            let e = root.view(x, total * ts, &[1], &[]).unwrap_err();
            assert!(e.message.starts_with("view: view out of bounds"), "{}", e.message);
            let e = root.view(x, off * ts, &[(total - off + 1) as i64], &[]).unwrap_err();
            assert!(e.message.contains("out of bounds"), "{}", e.message);
        }
        // A view of a view: offsets are relative to the inner view, bounds
        // to the whole memory.
        let (mut root, mut input) = fresh(&b);
        let a = Arr::rand(&mut rng, [10, 6, 1, 1], dtype);
        let x = a.upload(&mut input, dtype);
        let inner = root.slice(x, 1, 2, 4, 1).unwrap(); // rows 2,3
        let vv = root.view(inner, 3 * ts, &[4, 3], &[10 * ts]).unwrap(); // rows 2..5, cols 3..7
        let want = Arr::from_fn([4, 3, 1, 1], |j| a.at([3 + j[0], 2 + j[1], 0, 0]));
        assert_eq!(get(&mut root, vv).v, want.v);
        let e = root.view(inner, 3 * ts, &[4, 5], &[10 * ts]).unwrap_err();
        assert!(e.message.contains("out of bounds"), "{}", e.message);
    }
}

#[test]
fn concat_matches_reference() {
    let b = backend();
    let mut rng = Rng::new(4);
    for &dtype in &DTYPES {
        for dim in 0..4 {
            let (mut root, mut input) = fresh(&b);
            let ne_a = rand_shape(&mut rng, 4);
            let mut ne_b = ne_a;
            ne_b[dim] = 1 + (rng.next_u64() % 4) as usize;
            let a = Arr::rand(&mut rng, ne_a, dtype);
            let bb = Arr::rand(&mut rng, ne_b, dtype);
            let xa = a.upload(&mut input, dtype);
            let xb = bb.upload(&mut input, dtype);
            let c = root.concat(xa, xb, dim as i64).unwrap();
            assert_eq!(get(&mut root, c), ref_concat(&a, &bb, dim), "dtype {dtype} dim {dim}");
            // non-contiguous operands: permuted views holding `a` and `bb`
            let va = permuted_view(&mut root, &mut input, dtype, &a, [1, 0, 3, 2]);
            let vb = permuted_view(&mut root, &mut input, dtype, &bb, [2, 3, 1, 0]);
            let c = root.concat(va, vb, dim as i64).unwrap();
            assert_eq!(get(&mut root, c), ref_concat(&a, &bb, dim), "permuted dtype {dtype} dim {dim}");
        }
    }
}

/// Concatenation along dim 0 of a state with a transposed input, the
/// short convolutions' case, at sizes that take the CPU's 16 x 16 tiles
/// (scripts/patches/14-cpu-concat-rows.sh) and leave rows and columns
/// over: exact, as any copy.
#[test]
fn concat_of_transposed_rows_matches_reference() {
    let b = backend();
    let mut rng = Rng::new(44);
    for (cols, rows, planes) in [(21usize, 37usize, 2usize), (512, 64, 1), (16, 16, 1), (3, 40, 3)] {
        let (mut root, mut input) = fresh(&b);
        let state = Arr::rand(&mut rng, [3, rows, planes, 1], F32);
        let x = Arr::rand(&mut rng, [cols, rows, planes, 1], F32);
        let xs = state.upload(&mut input, F32);
        // x's memory is [rows, cols, planes]: viewed transposed, dim 0
        // has a stride of `rows` floats and dim 1 is contiguous.
        let xt = permuted_view(&mut root, &mut input, F32, &x, [1, 0, 2, 3]);
        assert_eq!(xt.nb()[1], 4, "dim 1 of the view is contiguous");
        let c = root.concat(xs, xt, 0).unwrap();
        assert_eq!(get(&mut root, c), ref_concat(&state, &x, 0), "cols {cols} rows {rows} planes {planes}");
    }
}

#[test]
fn repeat_matches_reference() {
    let b = backend();
    let mut rng = Rng::new(5);
    for &dtype in &DTYPES {
        for dim in 0..4 {
            let (mut root, mut input) = fresh(&b);
            let a = { let ne = rand_shape(&mut rng, 3); Arr::rand(&mut rng, ne, dtype) };
            let n = 1 + (rng.next_u64() % 3) as usize;
            let x = a.upload(&mut input, dtype);
            let r = root.repeat(x, dim as i64, n as i64).unwrap();
            assert_eq!(get(&mut root, r), ref_repeat(&a, dim, n), "dtype {dtype} dim {dim} n {n}");
            // a non-contiguous input: a step-2 slice along dim 1 of a bigger tensor
            let mut big_ne = a.ne;
            big_ne[1] *= 2;
            let big = Arr::rand(&mut rng, big_ne, dtype);
            let xb = big.upload(&mut input, dtype);
            let s = root.slice(xb, 1, 0, big_ne[1] as i64, 2).unwrap();
            let sref = ref_slice(&big, 1, 0, big_ne[1] as i64, 2);
            let r = root.repeat(s, dim as i64, n as i64).unwrap();
            assert_eq!(get(&mut root, r), ref_repeat(&sref, dim, n), "slice dtype {dtype} dim {dim} n {n}");
        }
    }
}

#[test]
fn pad_matches_reference() {
    let b = backend();
    let mut rng = Rng::new(6);
    for _ in 0..6 {
        let (mut root, mut input) = fresh(&b);
        let a = { let ne = rand_shape(&mut rng, 4); Arr::rand(&mut rng, ne, F32) };
        let p = [0, 1, 2, 3].map(|_| (rng.next_u64() % 3) as i32);
        let x = a.upload(&mut input, F32);
        let r = root.pad(x, p).unwrap();
        assert_eq!(get(&mut root, r), ref_pad(&a, p), "pad {p:?}");
        // non-contiguous input
        let va = permuted_view(&mut root, &mut input, F32, &a, [3, 1, 0, 2]);
        let r = root.pad(va, p).unwrap();
        assert_eq!(get(&mut root, r), ref_pad(&a, p), "permuted pad {p:?}");
    }
}

#[test]
fn slice_matches_reference() {
    let b = backend();
    let mut rng = Rng::new(7);
    for &dtype in &DTYPES {
        for case in 0..16 {
            let (mut root, mut input) = fresh(&b);
            let a = { let ne = rand_shape(&mut rng, 6); Arr::rand(&mut rng, ne, dtype) };
            let dim = case % 4;
            let n = a.ne[dim] as i64;
            let low = rand_in(&mut rng, 0, n - 1);
            let high = rand_in(&mut rng, low + 1, n);
            let step = rand_in(&mut rng, 1, 3);
            if slice_count(low, high, step) == 0 {
                continue;
            }
            let x = a.upload(&mut input, dtype);
            let s = root.slice(x, dim as i64, low, high, step).unwrap();
            let want = ref_slice(&a, dim, low, high, step);
            let what = format!("dtype {dtype} {:?} dim {dim} {low}..{high} step {step}", a.ne);
            assert_eq!(get(&mut root, s), want, "{what}");
            // a view, except a contiguous copy for step > 1 along dim 0
            if dim == 0 && step > 1 {
                assert!(s.is_contiguous() && !is_view(s), "{what}");
            } else {
                assert!(is_view(s), "{what}");
            }
            // the same slice of permuted views holding `a` (dims 2 and 3
            // are not mergeable for [0, 1, 3, 2])
            for o in [[1, 0, 2, 3], [0, 1, 3, 2], [3, 2, 1, 0]] {
                let va = permuted_view(&mut root, &mut input, dtype, &a, o);
                let s = root.slice(va, dim as i64, low, high, step).unwrap();
                assert_eq!(get(&mut root, s), want, "{what} via permutation {o:?}");
            }
        }
    }
}

#[test]
fn quantized_shape_ops_move_whole_blocks() {
    let b = backend();
    let mut rng = Rng::new(8);
    let (mut root, mut input) = fresh(&b);
    let a = Arr::rand(&mut rng, [64, 3, 2, 1], F32);
    let x = a.upload(&mut input, F32);
    let q = root.cast(x, Q8_0).unwrap();
    let r = root.reshape(q, &[64, -1]).unwrap();
    let s0 = root.slice(q, 0, 32, 64, 1).unwrap();
    let s1 = root.slice(q, 1, 1, 3, 1).unwrap();
    let p = root.permute(q, [0, 2, 1, 3]).unwrap();
    let pc = root.cont(p, &[]).unwrap();
    let pr = root.reshape(p, &[32, -1]).unwrap(); // copy then reshape
    let v = root.view(q, 34, &[32, 2], &[68]).unwrap(); // second block of rows 0 and 1
    let outs = [q, r, s0, s1, pc, pr, v];
    root.compute(&outs).unwrap();
    let deq = Arr { ne: [64, 3, 2, 1], v: data::read_f32(q, "test").unwrap() };
    // q8_0 keeps values within one quantization step of the input.
    for (g, w) in deq.v.iter().zip(&a.v) {
        assert!((g - w).abs() <= 1.0 / 127.0 * 0.6 + 1e-6, "{g} vs {w}");
    }
    let rd = |t| data::read_f32(t, "test").unwrap();
    assert_eq!(rd(r), deq.v);
    assert_eq!(rd(s0), ref_slice(&deq, 0, 32, 64, 1).v);
    assert_eq!(rd(s1), ref_slice(&deq, 1, 1, 3, 1).v);
    let pref = ref_permute(&deq, [0, 2, 1, 3]);
    assert_eq!(rd(pc), pref.v);
    assert_eq!(pr.ne(), [32, 12, 1, 1]);
    assert_eq!(rd(pr), pref.v);
    assert_eq!(rd(v), ref_view(&deq.v, 32, [32, 2, 1, 1], [1, 64, 1, 1]).v);
    // refused: moving axis 0, partial blocks, steps along dim 0
    let e = root.permute(q, [1, 0, 2, 3]).unwrap_err();
    assert!(e.message.starts_with("permute: axis 0 of quantized q8_0[64,3,2]"), "{}", e.message);
    for (lo, hi, st) in [(16, 64, 1), (0, 48, 1), (0, 64, 2)] {
        let e = root.slice(q, 0, lo, hi, st).unwrap_err();
        assert!(e.message.starts_with("slice: dim 0 of quantized"), "{}", e.message);
    }
    let e = root.reshape(q, &[16, -1]).unwrap_err();
    assert!(e.message.contains("block size 32"), "{}", e.message);
    let e = root.view(q, 0, &[16], &[]).unwrap_err();
    assert!(e.message.contains("block size 32"), "{}", e.message);
    let e = root.view(q, 2, &[32], &[]).unwrap_err();
    assert!(e.message.contains("multiples of the q8_0 element size 34"), "{}", e.message);
}

// ---- bad inputs -------------------------------------------------------------

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
    let a = Arr::from_fn([3, 4, 2, 1], |j| (j[0] + 3 * j[1] + 12 * j[2]) as f32);
    let x = a.upload(&mut input, F32);
    let h = a.upload(&mut input, F16);
    let t = root.permute(x, [1, 0, 2, 3]).unwrap(); // [4,3,2], nb[0] = 12

    // reshape
    assert_eq!(err_of(root.reshape(x, &[]), "reshape", "unsupported number of dimensions 0"), ErrorKind::Shape);
    err_of(root.reshape(x, &[1, 1, 1, 1, 24]), "reshape", "unsupported number of dimensions 5");
    err_of(root.reshape(x, &[5, 5]), "reshape", "cannot reshape f32[3,4,2] (24 elements) to [5, 5]");
    err_of(root.reshape(x, &[-2, 12]), "reshape", "invalid dimension -2");
    err_of(root.reshape(t, &[-1, -1]), "reshape", "only one dimension can be inferred");
    // view
    err_of(root.view(x, 0, &[3, 4], &[]), "view", "takes 1 strides");
    err_of(root.view(x, 0, &[-1], &[]), "view", "invalid shape");
    // A view without elements is allowed (no rows of a batch) at any
    // aligned offset, as in ggml: it is never read.
    assert_eq!(root.view(x, 4 * 24, &[3, 0], &[12]).unwrap().ne(), [3, 0, 1, 1]);
    assert_eq!(root.view(x, 4 * 30, &[0], &[]).unwrap().ne(), [0, 1, 1, 1]);
    err_of(root.view(x, 2, &[0], &[]), "view", "multiples of the f32 element size 4");
    err_of(root.view(x, 0, &[1, 1, 1, 1, 1], &[4, 4, 4, 4]), "view", "unsupported number of dimensions 5");
    err_of(root.view(x, 2, &[4], &[]), "view", "multiples of the f32 element size 4");
    err_of(root.view(x, 0, &[4, 2], &[6]), "view", "multiples of the f32 element size 4");
    err_of(root.view(x, 4 * 20, &[5], &[]), "view", "out of bounds");
    err_of(root.view(x, 0, &[3, 4, 3], &[12, 48]), "view", "out of bounds");
    err_of(root.view(x, usize::MAX - 3, &[1], &[]), "view", "out of bounds");
    err_of(root.view(x, 0, &[2, 2], &[usize::MAX / 2 + 1]), "view", "out of bounds");
    // overlapping rows: in bounds, but ggml's dense size rule refuses it
    err_of(root.view(x, 0, &[20, 5], &[4]), "view", "view too large");
    // permute
    for o in [[0, 0, 1, 2], [0, 1, 2, 4], [-1, 0, 1, 2], [3, 2, 1, 1]] {
        assert_eq!(err_of(root.permute(x, o), "permute", "is not a permutation of 0..3"), ErrorKind::Shape);
    }
    // cont
    err_of(root.cont(t, &[5, -1]), "cont", "cannot infer dimension");
    err_of(root.cont(t, &[25]), "cont", "cannot reshape");
    // concat
    err_of(root.concat(x, x, 4), "concat", "invalid dimension 4");
    err_of(root.concat(x, x, -1), "concat", "invalid dimension -1");
    assert_eq!(err_of(root.concat(x, h, 0), "concat", "types differ: f32[3,4,2] vs f16[3,4,2]"), ErrorKind::DType);
    err_of(root.concat(x, t, 2), "concat", "differ outside dim 2");
    // repeat
    err_of(root.repeat(x, 4, 2), "repeat", "invalid dimension 4");
    err_of(root.repeat(x, 0, 0), "repeat", "count must be at least 1");
    err_of(root.repeat(x, 0, -3), "repeat", "count must be at least 1");
    err_of(root.repeat(t, 0, 2), "repeat", "dense rows");
    err_of(root.repeat(x, 0, i64::MAX), "repeat", "too large");
    // pad
    err_of(root.pad(x, [0, -1, 0, 0]), "pad", "non-negative");
    assert_eq!(err_of(root.pad(h, [1, 0, 0, 0]), "pad", "a must be f32"), ErrorKind::DType);
    // slice
    err_of(root.slice(x, 4, 0, 1, 1), "slice", "invalid dimension 4");
    err_of(root.slice(x, -1, 0, 1, 1), "slice", "invalid dimension -1");
    for (lo, hi, st) in [(-1, 2, 1), (0, 4, 1), (2, 2, 1), (2, 1, 1), (0, 3, 0), (0, 3, -1)] {
        err_of(root.slice(x, 0, lo, hi, st), "slice", "invalid slice parameters");
    }
    err_of(root.slice(x, 1, 0, 1, 3), "slice", "selects no elements");

    // Nothing above aborted, and the context still computes.
    let s = root.slice(t, 0, 1, 4, 2).unwrap();
    let c = root.concat(s, s, 1).unwrap();
    let want = ref_concat(&ref_slice(&ref_permute(&a, [1, 0, 2, 3]), 0, 1, 4, 2), &ref_slice(&ref_permute(&a, [1, 0, 2, 3]), 0, 1, 4, 2), 1);
    assert_eq!(get(&mut root, c), want);
}

// ---- the C functions ---------------------------------------------------------

mod c {
    pub use crate::capi_base::*;

    extern "C" {
        pub fn ggml_rs_reshape(c: *mut Ctx, a: *mut T, shape: *const i64, n: usize, err: *mut Error) -> *mut T;
        pub fn ggml_rs_view(c: *mut Ctx, a: *mut T, off: usize, ne: *const i64, nb: *const usize, n: usize, err: *mut Error) -> *mut T;
        pub fn ggml_rs_permute(c: *mut Ctx, a: *mut T, o0: i32, o1: i32, o2: i32, o3: i32, err: *mut Error) -> *mut T;
        pub fn ggml_rs_cont(c: *mut Ctx, a: *mut T, shape: *const i64, n: usize, err: *mut Error) -> *mut T;
        pub fn ggml_rs_concat(c: *mut Ctx, a: *mut T, b: *mut T, dim: i32, err: *mut Error) -> *mut T;
        pub fn ggml_rs_repeat(c: *mut Ctx, a: *mut T, dim: i32, n: i64, err: *mut Error) -> *mut T;
        pub fn ggml_rs_pad(c: *mut Ctx, a: *mut T, p0: i32, p1: i32, p2: i32, p3: i32, err: *mut Error) -> *mut T;
        pub fn ggml_rs_slice(c: *mut Ctx, a: *mut T, dim: i32, low: i64, high: i64, step: i64, err: *mut Error) -> *mut T;
        pub fn ggml_rs_dup(c: *mut Ctx, a: *mut T, err: *mut Error) -> *mut T;
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
        let vals: Vec<f32> = (0..12).map(|i| i as f32).collect();
        let bytes: Vec<u8> = vals.iter().flat_map(|v| v.to_le_bytes()).collect();
        let x = ggml_rs_ctx_from_data(inp, 0, [12i64].as_ptr(), 1, bytes.as_ptr(), bytes.len(), &mut e);
        assert!(!x.is_null(), "{}", e.text());

        // Every function rejects a NULL tensor by naming itself.
        let nulls: Vec<(&str, *mut T)> = vec![
            ("reshape", ggml_rs_reshape(ctx, null_mut(), [12i64].as_ptr(), 1, &mut e)),
            ("view", ggml_rs_view(ctx, null_mut(), 0, [1i64].as_ptr(), std::ptr::null(), 1, &mut e)),
            ("permute", ggml_rs_permute(ctx, null_mut(), 0, 1, 2, 3, &mut e)),
            ("cont", ggml_rs_cont(ctx, null_mut(), std::ptr::null(), 0, &mut e)),
            ("concat", ggml_rs_concat(ctx, x, null_mut(), 0, &mut e)),
            ("repeat", ggml_rs_repeat(ctx, null_mut(), 0, 2, &mut e)),
            ("pad", ggml_rs_pad(ctx, null_mut(), 0, 0, 0, 0, &mut e)),
            ("slice", ggml_rs_slice(ctx, null_mut(), 0, 0, 1, 1, &mut e)),
            ("dup", ggml_rs_dup(ctx, null_mut(), &mut e)),
        ];
        for (name, r) in nulls {
            assert!(r.is_null(), "{name}");
        }
        // (e holds the last message)
        assert!(e.text().starts_with("dup: a is NULL"), "{}", e.text());
        assert_eq!(e.status, 1);
        let r = ggml_rs_slice(ctx, x, 0, 5, 20, 1, &mut e);
        assert!(r.is_null());
        assert!(e.text().starts_with("slice: invalid slice parameters"), "{}", e.text());
        assert_eq!(e.status, 2);
        let r = ggml_rs_view(ctx, x, 0, [4i64, 4].as_ptr(), std::ptr::null(), 2, &mut e);
        assert!(r.is_null());
        assert!(e.text().starts_with("view: nb is NULL with length 1"), "{}", e.text());
        // A recorded op error fails the next compute, until cleared.
        let m = ggml_rs_reshape(ctx, x, [3i64, 4].as_ptr(), 2, &mut e);
        assert!(!m.is_null(), "{}", e.text());
        let s = ggml_rs_slice(ctx, m, 1, 1, 3, 1, &mut e);
        let p = ggml_rs_permute(ctx, s, 1, 0, 2, 3, &mut e);
        let c = ggml_rs_cont(ctx, p, [-1i64].as_ptr(), 1, &mut e);
        assert!(!c.is_null(), "{}", e.text());
        assert_ne!(ggml_rs_ctx_compute(ctx, &c, 1, &mut e), 0);
        ggml_rs_ctx_clear_error(ctx);
        assert_eq!(ggml_rs_ctx_compute(ctx, &c, 1, &mut e), 0, "{}", e.text());
        let mut out = [0f32; 6];
        assert_eq!(ggml_rs_tensor_get_f32(c, out.as_mut_ptr(), 6, &mut e), 0, "{}", e.text());
        assert_eq!(out, [3., 6., 4., 7., 5., 8.]);
        ggml_rs_ctx_free(inp);
        ggml_rs_ctx_free(ctx);
        ggml_rs_backend_free(be);
    }
}
