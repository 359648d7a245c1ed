//! A host reference array for the op tests: 4-D, ggml order (`ne[0]`
//! fastest), values as f32.

use super::{f16_round, idx, upload, upload_i32, Rng, F16, I32};
use ggml_rs::ml::{Context, Tensor};
use ggml_rs::sys;

#[derive(Clone, Debug, PartialEq)]
pub struct Arr {
    pub ne: [usize; 4],
    pub v: Vec<f32>,
}

impl Arr {
    pub fn from_fn(ne: [usize; 4], mut f: impl FnMut([usize; 4]) -> f32) -> Arr {
        let mut v = Vec::with_capacity(ne.iter().product());
        for i3 in 0..ne[3] {
            for i2 in 0..ne[2] {
                for i1 in 0..ne[1] {
                    for i0 in 0..ne[0] {
                        v.push(f([i0, i1, i2, i3]));
                    }
                }
            }
        }
        Arr { ne, v }
    }
    pub fn zeros(ne: [usize; 4]) -> Arr {
        Arr { ne, v: vec![0.0; ne.iter().product()] }
    }
    /// Random values exactly representable in `dtype` (integers for I32).
    pub fn rand(rng: &mut Rng, ne: [usize; 4], dtype: u32) -> Arr {
        Arr::from_fn(ne, |_| match dtype {
            F16 => f16_round(rng.f32()),
            I32 => ((rng.next_u64() % 2001) as i32 - 1000) as f32,
            _ => rng.f32(),
        })
    }
    pub fn at(&self, i: [usize; 4]) -> f32 {
        self.v[idx(self.ne, i[0], i[1], i[2], i[3])]
    }
    pub fn set(&mut self, v: f32, i: [usize; 4]) {
        let k = idx(self.ne, i[0], i[1], i[2], i[3]);
        self.v[k] = v;
    }
    /// Zero outside dims 0 and 1 (padding).
    pub fn at_padded(&self, x: i64, y: i64, i2: usize, i3: usize) -> f32 {
        if x < 0 || y < 0 || x >= self.ne[0] as i64 || y >= self.ne[1] as i64 {
            0.0
        } else {
            self.at([x as usize, y as usize, i2, i3])
        }
    }
    /// The values rounded to f16.
    pub fn f16(&self) -> Arr {
        Arr { ne: self.ne, v: self.v.iter().map(|&x| f16_round(x)).collect() }
    }
    pub fn shape(&self) -> Vec<i64> {
        shape_i64(self.ne)
    }
    /// A data tensor of `dtype` (F32, F16, I32 or I64) holding the values.
    pub fn upload(&self, ctx: &mut Context, dtype: u32) -> Tensor {
        let shape = self.shape();
        match dtype {
            I32 => upload_i32(ctx, &shape, &self.v.iter().map(|&x| x as i32).collect::<Vec<_>>()),
            sys::GGML_TYPE_I64 => {
                let bytes: Vec<u8> = self.v.iter().flat_map(|&x| (x as i64).to_le_bytes()).collect();
                ctx.from_bytes(dtype, &shape, &bytes).unwrap()
            }
            _ => upload(ctx, dtype, &shape, &self.v),
        }
    }
}

/// `Arr` dimensions as a tensor shape.
pub fn shape_i64(ne: [usize; 4]) -> Vec<i64> {
    ne.iter().map(|&d| d as i64).collect()
}

/// A tensor's shape as `Arr` dimensions.
pub fn ne_of(t: Tensor) -> [usize; 4] {
    t.ne().map(|d| d as usize)
}
