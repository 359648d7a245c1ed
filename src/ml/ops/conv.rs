//! Convolution, pooling and image ops: `conv_2d`, `conv_3d`, `conv_1d_dw`,
//! `im2col`, `avg_pool_2d`, `interpolate` (Ollama's `Conv2D`, `Conv3D`,
//! `Conv1DDW`, `IM2Col`, `AvgPool2D`, `Interpolate`).
//!
//! Shapes are in ggml order (dim 0 fastest): an image batch is
//! `[W, H, C, N]`, a 2-D kernel `[KW, KH, IC, OC]`.
//!
//! ggml builds the convolutions from `im2col` (which unrolls every kernel
//! window into a row, in f16 for f32/f16 kernels) and a matrix product, so
//! the inputs are rounded to f16 and the kernel is converted to f16 for
//! the product; results are f32.
//!
//! What is checked here so that no ggml assert can fire and no kernel reads
//! out of bounds:
//! * strides and dilations ≥ 1, paddings in `0..2^30` (ggml doubles them
//!   in `int`);
//! * the kernel's extent `d·(k-1)+1` fits in the padded input along every
//!   axis (ggml would compute a bogus size of 1 or assert otherwise);
//! * types: kernels f32 or f16; inputs f32 or f16 for `conv_2d` and
//!   `conv_1d_dw`, f32 for `conv_3d` and `im2col` (ggml-cpu's im2col
//!   kernels); `avg_pool_2d` f32/f16; `interpolate` f32;
//! * layouts the CPU kernels assume: the 2-D im2col reads each channel
//!   plane as dense `[W, H]` and addresses channels and images with `int`
//!   byte offsets; pooling walks whole planes; reshapes need contiguous
//!   tensors. Inputs that do not fit are copied (`ggml_cont`) first.

use super::matmul::nonempty;
use crate::ml::{check, tensor::elem_size, Context, Error, Result, Tensor};
use crate::sys;

/// Paddings are doubled in C `int` arithmetic by ggml: keep them well below.
const MAX_PAD: i32 = (1 << 30) - 1;

/// How `interpolate` samples.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ScaleMode {
    /// Nearest neighbour (`GGML_SCALE_MODE_NEAREST`, 0).
    Nearest,
    /// Bilinear over dims 0 and 1 (`GGML_SCALE_MODE_BILINEAR`, 1).
    Bilinear,
}

impl ScaleMode {
    /// The mode from ggml's id (0 nearest, 1 bilinear).
    pub fn from_id(op: &str, id: i32) -> Result<ScaleMode> {
        match id {
            0 => Ok(ScaleMode::Nearest),
            1 => Ok(ScaleMode::Bilinear),
            _ => Err(Error::invalid(format!("{op}: unknown mode {id} (0 nearest, 1 bilinear)"))),
        }
    }
    fn ggml(self) -> u32 {
        match self {
            ScaleMode::Nearest => sys::GGML_SCALE_MODE_NEAREST,
            ScaleMode::Bilinear => sys::GGML_SCALE_MODE_BILINEAR,
        }
    }
}

/// Strides and dilations ≥ 1, paddings in `0..=MAX_PAD`, per axis.
fn conv_params(op: &str, stride: &[i32], pad: &[i32], dilation: &[i32]) -> Result<()> {
    for (name, vals, lo, hi) in [
        ("stride", stride, 1, i32::MAX),
        ("padding", pad, 0, MAX_PAD),
        ("dilation", dilation, 1, i32::MAX),
    ] {
        for (axis, &v) in vals.iter().enumerate() {
            if v < lo || v > hi {
                return Err(Error::invalid(format!(
                    "{op}: {name} {v} along dim {axis} is out of range ({lo} to {hi})"
                )));
            }
        }
    }
    Ok(())
}

/// The output length along `axis`, after checking that the dilated kernel
/// fits in the padded input (`stride`, `pad`, `dilation` indexed by axis).
fn out_len(op: &str, axis: usize, input: Tensor, kernel: Tensor, stride: &[i32], pad: &[i32], dilation: &[i32]) -> Result<i64> {
    let (n_in, n_k) = (input.ne()[axis], kernel.ne()[axis]);
    let (s, p, d) = (stride[axis], pad[axis], dilation[axis]);
    let extent = d as i128 * (n_k as i128 - 1) + 1;
    let padded = n_in as i128 + 2 * p as i128;
    if extent > padded {
        return Err(Error::shape(format!(
            "{op}: kernel {} does not fit input {} along dim {axis}: kernel extent {extent} (size {n_k}, dilation {d}) > input {n_in} + 2*padding {p}",
            kernel.describe(),
            input.describe()
        )));
    }
    Ok(((padded - extent) / s as i128 + 1) as i64)
}

/// Dims 0 and 1 are dense (`nb[0]` the element size, `nb[1] = ne[0]·nb[0]`):
/// ggml-cpu's 2-D im2col reads each channel plane that way.
fn dense_planes(t: Tensor) -> bool {
    let (ne, nb) = (t.ne(), t.nb());
    let es = elem_size(t.dtype());
    nb[0] == es && (ne[1] == 1 || nb[1] == ne[0] as usize * es)
}

/// The byte strides ggml-cpu's im2col keeps in C `int`s fit.
fn int_strides(op: &str, what: &str, t: Tensor, dims: &[usize], copied: bool) -> Result<()> {
    let (ne, mut nb) = (t.ne(), t.nb());
    if copied {
        let es = elem_size(t.dtype());
        nb = [es, es * ne[0] as usize, es * (ne[0] * ne[1]) as usize, es * (ne[0] * ne[1] * ne[2]) as usize];
    }
    for &i in dims {
        if nb[i] > i32::MAX as usize {
            return Err(Error::shape(format!(
                "{op}: {what} {} is too large: its dim {i} stride of {} bytes exceeds 2^31-1 (a limit of ggml's im2col)",
                t.describe(),
                nb[i]
            )));
        }
    }
    Ok(())
}

fn kernel_type(op: &str, kernel: Tensor) -> Result<()> {
    check::dtype_in(op, "kernel", kernel, &[check::F32, check::F16])
}

/// The checks `conv_2d` and `im2col` share: operands with elements, the
/// window parameters, equal input channels (dim 2), an output of at least
/// one element on both axes, and `input`'s strides. Returns whether
/// `input` must be copied to dense planes first.
fn check_2d_window(op: &str, kernel: Tensor, input: Tensor, stride: &[i32; 2], pad: &[i32; 2], dilation: &[i32; 2]) -> Result<bool> {
    nonempty(op, "kernel", kernel)?;
    nonempty(op, "input", input)?;
    conv_params(op, stride, pad, dilation)?;
    let (nk, ni) = (kernel.ne(), input.ne());
    if nk[2] != ni[2] {
        return Err(Error::shape(format!(
            "{op}: kernel {} and input {} differ in input channels (dim 2: {} vs {})",
            kernel.describe(),
            input.describe(),
            nk[2],
            ni[2]
        )));
    }
    for axis in 0..2 {
        out_len(op, axis, input, kernel, stride, pad, dilation)?;
    }
    let copy_input = !dense_planes(input);
    int_strides(op, "input", input, &[2, 3], copy_input)?;
    Ok(copy_input)
}

impl Context {
    /// `ggml_cont` of `t` when `need` (room must have been checked).
    fn cont_if(&mut self, op: &str, ctx: *mut sys::ggml_context, t: Tensor, need: bool) -> Result<Tensor> {
        if need {
            self.made(op, unsafe { sys::ggml_cont(ctx, t.as_ptr()) })
        } else {
            Ok(t)
        }
    }

    /// 2-D convolution (cross-correlation, as ggml and PyTorch):
    /// `kernel [KW, KH, IC, OC]` over `input [W, H, IC, N]` with
    /// `stride`, `pad` (zeros on both sides) and `dilation` per axis
    /// (0: width, 1: height) → f32 `[OW, OH, OC, N]`,
    /// `OW = (W + 2·p0 − d0·(KW−1) − 1) / s0 + 1` (likewise OH).
    /// `kernel` f32 or f16; `input` f32 or f16 (rounded to f16 by ggml).
    pub fn conv_2d(&mut self, kernel: Tensor, input: Tensor, stride: [i32; 2], pad: [i32; 2], dilation: [i32; 2]) -> Result<Tensor> {
        const OP: &str = "conv_2d";
        kernel_type(OP, kernel)?;
        check::float(OP, "input", input)?;
        let copy_input = check_2d_window(OP, kernel, input, &stride, &pad, &dilation)?;
        let copy_kernel = !kernel.is_contiguous();
        let ctx = self.room(OP, 7 + copy_input as usize + copy_kernel as usize)?;
        let input = self.cont_if(OP, ctx, input, copy_input)?;
        let kernel = self.cont_if(OP, ctx, kernel, copy_kernel)?;
        let [s0, s1] = stride;
        let [p0, p1] = pad;
        let [d0, d1] = dilation;
        self.made(OP, unsafe { sys::ggml_conv_2d(ctx, kernel.as_ptr(), input.as_ptr(), s0, s1, p0, p1, d0, d1) })
    }

    /// 3-D convolution with `ic` input channels folded into dim 3:
    /// `kernel [KW, KH, KD, OC·ic]` (dim 3 index `oc·ic + c`) over
    /// `input [W, H, D, N·ic]` (dim 3 index `n·ic + c`) → f32
    /// `[OW, OH, OD, OC·N]` (dim 3 index `n·OC + oc`); `stride`, `pad`,
    /// `dilation` per axis (width, height, depth), sizes as in
    /// [`Context::conv_2d`]. `kernel` f32 or f16; `input` f32.
    pub fn conv_3d(&mut self, kernel: Tensor, input: Tensor, ic: i64, stride: [i32; 3], pad: [i32; 3], dilation: [i32; 3]) -> Result<Tensor> {
        const OP: &str = "conv_3d";
        kernel_type(OP, kernel)?;
        check::dtype_in(OP, "input", input, &[check::F32])?;
        nonempty(OP, "kernel", kernel)?;
        nonempty(OP, "input", input)?;
        conv_params(OP, &stride, &pad, &dilation)?;
        let (nk, ni) = (kernel.ne(), input.ne());
        if ic < 1 || ic > i32::MAX as i64 {
            return Err(Error::invalid(format!("{OP}: the input channel count must be 1 or more, got {ic}")));
        }
        if nk[3] % ic != 0 || ni[3] % ic != 0 {
            return Err(Error::shape(format!(
                "{OP}: dim 3 of kernel {} and of input {} must be multiples of the {ic} input channels",
                kernel.describe(),
                input.describe()
            )));
        }
        for axis in 0..3 {
            out_len(OP, axis, input, kernel, &stride, &pad, &dilation)?;
        }
        let copy_input = input.nb()[0] != elem_size(input.dtype());
        let copy_kernel = !kernel.is_contiguous();
        let ctx = self.room(OP, 8 + copy_input as usize + copy_kernel as usize)?;
        let input = self.cont_if(OP, ctx, input, copy_input)?;
        let kernel = self.cont_if(OP, ctx, kernel, copy_kernel)?;
        let [s0, s1, s2] = stride;
        let [p0, p1, p2] = pad;
        let [d0, d1, d2] = dilation;
        self.made(OP, unsafe {
            sys::ggml_conv_3d(ctx, kernel.as_ptr(), input.as_ptr(), ic, s0, s1, s2, p0, p1, p2, d0, d1, d2)
        })
    }

    /// Depthwise 1-D convolution: `input [L, C]` and `kernel [K, 1, C·m]`
    /// (channel `j` of the kernel filters input channel `j / m`; `m = 1` is
    /// the plain depthwise case) → f32 `[OL, C·m]`,
    /// `OL = (L + 2·pad − dilation·(K−1) − 1) / stride + 1`.
    /// `kernel` f32 or f16; `input` f32 or f16 (rounded to f16 by ggml).
    pub fn conv_1d_dw(&mut self, kernel: Tensor, input: Tensor, stride: i32, pad: i32, dilation: i32) -> Result<Tensor> {
        const OP: &str = "conv_1d_dw";
        kernel_type(OP, kernel)?;
        check::float(OP, "input", input)?;
        nonempty(OP, "kernel", kernel)?;
        nonempty(OP, "input", input)?;
        conv_params(OP, &[stride], &[pad], &[dilation])?;
        let (nk, ni) = (kernel.ne(), input.ne());
        if ni[2] != 1 || ni[3] != 1 {
            return Err(Error::shape(format!("{OP}: input must be [L, C], got {}", input.describe())));
        }
        if nk[1] != 1 || nk[3] != 1 || nk[2] % ni[1] != 0 {
            return Err(Error::shape(format!(
                "{OP}: kernel must be [K, 1, C·m] for input {} with C = {}, got {}",
                input.describe(),
                ni[1],
                kernel.describe()
            )));
        }
        out_len(OP, 0, input, kernel, &[stride], &[pad], &[dilation])?;
        let copy_input = !input.is_contiguous();
        int_strides(OP, "input", input, &[1], copy_input)?;
        let copy_kernel = !kernel.is_contiguous();
        let ctx = self.room(OP, 4 + copy_input as usize + copy_kernel as usize)?;
        let input = self.cont_if(OP, ctx, input, copy_input)?;
        let kernel = self.cont_if(OP, ctx, kernel, copy_kernel)?;
        self.made(OP, unsafe { sys::ggml_conv_1d_dw(ctx, kernel.as_ptr(), input.as_ptr(), stride, pad, dilation) })
    }

    /// The 2-D im2col of `input [W, H, IC, N]` for windows of `kernel`'s
    /// size `[KW, KH, IC, …]` (only its shape is used; any type) → f32
    /// `[IC·KH·KW, OW, OH, N]`: element `c·KH·KW + ky·KW + kx` of row
    /// `(ox, oy, n)` is `input[ox·s0 + kx·d0 − p0, oy·s1 + ky·d1 − p1, c, n]`
    /// or 0 outside. Sizes as in [`Context::conv_2d`]. `input` f32.
    pub fn im2col(&mut self, kernel: Tensor, input: Tensor, stride: [i32; 2], pad: [i32; 2], dilation: [i32; 2]) -> Result<Tensor> {
        const OP: &str = "im2col";
        check::dtype_in(OP, "input", input, &[check::F32])?;
        let copy_input = check_2d_window(OP, kernel, input, &stride, &pad, &dilation)?;
        let ctx = self.room(OP, 1 + copy_input as usize)?;
        let input = self.cont_if(OP, ctx, input, copy_input)?;
        let [s0, s1] = stride;
        let [p0, p1] = pad;
        let [d0, d1] = dilation;
        self.made(OP, unsafe {
            sys::ggml_im2col(ctx, kernel.as_ptr(), input.as_ptr(), s0, s1, p0, p1, d0, d1, true, sys::GGML_TYPE_F32)
        })
    }

    /// Average pooling over dims 0 and 1 with a `k×k` window, stride `s` and
    /// `pad` zeros on each side: `a [W, H, C, N]` (f32 or f16) → f32
    /// `[OW, OH, C, N]`, `OW = (W + 2·pad − k) / s + 1`. As in ggml, the
    /// divisor is always `k·k` (padding counts: PyTorch's
    /// `count_include_pad=True`). `pad` must be a whole number (ggml keeps
    /// it as an integer) and the window must fit in the padded input.
    pub fn avg_pool_2d(&mut self, a: Tensor, k: i32, s: i32, pad: f32) -> Result<Tensor> {
        const OP: &str = "avg_pool_2d";
        check::float(OP, "a", a)?;
        nonempty(OP, "a", a)?;
        if k < 1 || s < 1 {
            return Err(Error::invalid(format!("{OP}: kernel size and stride must be 1 or more, got k={k} s={s}")));
        }
        if !(pad.is_finite() && pad >= 0.0 && pad.fract() == 0.0 && pad <= (1 << 22) as f32) {
            return Err(Error::invalid(format!("{OP}: padding must be a whole number from 0 to 2^22, got {pad}")));
        }
        let p = pad as i64;
        for (axis, &n) in a.ne()[..2].iter().enumerate() {
            let padded = n + 2 * p;
            if padded < k as i64 {
                return Err(Error::shape(format!(
                    "{OP}: window {k} does not fit {} along dim {axis} (size {n} + 2*padding {p})",
                    a.describe()
                )));
            }
            // ggml sizes the output in f32 and indexes in int: stay exact.
            if padded + s as i64 >= 1 << 24 {
                return Err(Error::shape(format!(
                    "{OP}: dim {axis} of {} plus padding and stride must stay below 2^24",
                    a.describe()
                )));
            }
        }
        let copy = !a.is_contiguous();
        let ctx = self.room(OP, 1 + copy as usize)?;
        let a = self.cont_if(OP, ctx, a, copy)?;
        self.made(OP, unsafe { sys::ggml_pool_2d(ctx, a.as_ptr(), sys::GGML_OP_POOL_AVG, k, k, s, s, pad, pad) })
    }

    /// `a` (f32, any layout) resampled to `ne` (each ≥ 1): `mode` nearest
    /// or bilinear (bilinear over dims 0 and 1, nearest over dims 2 and 3).
    /// Without `align_corners` a pixel's centre maps to
    /// `(i + 0.5)·in/out − 0.5` (PyTorch's `align_corners=False`, Ollama's
    /// behaviour); with it, corner pixels align: `i·(in−1)/(out−1)`.
    /// Result f32 `ne`.
    pub fn interpolate(&mut self, a: Tensor, ne: [i64; 4], mode: ScaleMode, align_corners: bool) -> Result<Tensor> {
        const OP: &str = "interpolate";
        check::dtype_in(OP, "a", a, &[check::F32])?;
        nonempty(OP, "a", a)?;
        if ne.iter().any(|&d| d < 1) {
            return Err(Error::shape(format!("{OP}: target sizes must be 1 or more, got {ne:?}")));
        }
        check::shape_arg(OP, &ne, false)?;
        let flags = if align_corners { sys::GGML_SCALE_FLAG_ALIGN_CORNERS } else { 0 };
        let ctx = self.room(OP, 1)?;
        self.made(OP, unsafe { sys::ggml_interpolate(ctx, a.as_ptr(), ne[0], ne[1], ne[2], ne[3], mode.ggml() | flags) })
    }
}
