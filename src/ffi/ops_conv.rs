//! Convolution, pooling and image ops. Shapes are in ggml order (dim 0
//! fastest): images `[W, H, C, N]`, 2-D kernels `[KW, KH, IC, OC]`. Every
//! op here returns a new tensor owned by `ctx`'s family, or NULL with `err`
//! set (and the error recorded on `ctx`).

use super::context::ggml_rs_context;
use super::{ggml_rs_error, ggml_rs_tensor, op, tensor_arg};
use crate::ml::ops::conv::ScaleMode;

/// 2-D convolution (cross-correlation) of `input` `[W, H, IC, N]` with
/// `kernel` `[KW, KH, IC, OC]`: stride `s0`/`s1` (>= 1), zero padding
/// `p0`/`p1` on both sides (>= 0) and dilation `d0`/`d1` (>= 1) along width
/// and height. Result f32 `[OW, OH, OC, N]` with
/// `OW = (W + 2*p0 - d0*(KW-1) - 1)/s0 + 1` (likewise OH); the dilated
/// kernel must fit in the padded input. `kernel`: f32 or f16; `input`: f32
/// or f16 (ggml computes through f16 im2col, so inputs are rounded to f16).
/// Ollama's Conv2D (receiver = kernel). Returns a new tensor owned by ctx's
/// family, or NULL with err set.
#[no_mangle]
pub extern "C" fn ggml_rs_conv_2d(
    ctx: *mut ggml_rs_context,
    kernel: *mut ggml_rs_tensor,
    input: *mut ggml_rs_tensor,
    s0: i32,
    s1: i32,
    p0: i32,
    p1: i32,
    d0: i32,
    d1: i32,
    err: *mut ggml_rs_error,
) -> *mut ggml_rs_tensor {
    const OP: &str = "conv_2d";
    op(ctx, err, OP, |c| {
        c.conv_2d(tensor_arg(OP, "kernel", kernel)?, tensor_arg(OP, "input", input)?, [s0, s1], [p0, p1], [d0, d1])
    })
}

/// 3-D convolution with `ic` input channels folded into dim 3: `kernel`
/// `[KW, KH, KD, OC*ic]` (dim-3 index `oc*ic + c`), `input`
/// `[W, H, D, N*ic]` (dim-3 index `n*ic + c`); strides, paddings and
/// dilations per axis (width, height, depth) as in ggml_rs_conv_2d. Result
/// f32 `[OW, OH, OD, OC*N]` (dim-3 index `n*OC + oc`). `kernel`: f32 or
/// f16; `input`: f32. Ollama's Conv3D then reshapes a 1x1x1 output to
/// `[OC, N]`. Returns a new tensor owned by ctx's family, or NULL with err
/// set.
#[no_mangle]
pub extern "C" fn ggml_rs_conv_3d(
    ctx: *mut ggml_rs_context,
    kernel: *mut ggml_rs_tensor,
    input: *mut ggml_rs_tensor,
    ic: i64,
    s0: i32,
    s1: i32,
    s2: i32,
    p0: i32,
    p1: i32,
    p2: i32,
    d0: i32,
    d1: i32,
    d2: i32,
    err: *mut ggml_rs_error,
) -> *mut ggml_rs_tensor {
    const OP: &str = "conv_3d";
    op(ctx, err, OP, |c| {
        c.conv_3d(
            tensor_arg(OP, "kernel", kernel)?,
            tensor_arg(OP, "input", input)?,
            ic,
            [s0, s1, s2],
            [p0, p1, p2],
            [d0, d1, d2],
        )
    })
}

/// Depthwise 1-D convolution: `input` `[L, C]`, `kernel` `[K, 1, C*m]`
/// (kernel channel j filters input channel j/m; m = 1 is plain depthwise);
/// stride `s` >= 1, zero padding `p` >= 0 on both sides, dilation `d` >= 1.
/// Result f32 `[OL, C*m]`, `OL = (L + 2*p - d*(K-1) - 1)/s + 1`. `kernel`:
/// f32 or f16; `input`: f32 or f16 (rounded to f16). Ollama's Conv1DDW
/// (receiver = input). Returns a new tensor owned by ctx's family, or NULL
/// with err set.
#[no_mangle]
pub extern "C" fn ggml_rs_conv_1d_dw(
    ctx: *mut ggml_rs_context,
    kernel: *mut ggml_rs_tensor,
    input: *mut ggml_rs_tensor,
    s: i32,
    p: i32,
    d: i32,
    err: *mut ggml_rs_error,
) -> *mut ggml_rs_tensor {
    const OP: &str = "conv_1d_dw";
    op(ctx, err, OP, |c| c.conv_1d_dw(tensor_arg(OP, "kernel", kernel)?, tensor_arg(OP, "input", input)?, s, p, d))
}

/// 2-D im2col: every `[KW, KH]` window of `input` `[W, H, IC, N]` (f32)
/// unrolled into a row. Only `kernel`'s shape `[KW, KH, IC, ...]` is used
/// (any type, contents ignored). Strides, paddings, dilations as in
/// ggml_rs_conv_2d. Result f32 `[IC*KH*KW, OW, OH, N]`; element
/// `c*KH*KW + ky*KW + kx` of row `(ox, oy, n)` is
/// `input[ox*s0 + kx*d0 - p0, oy*s1 + ky*d1 - p1, c, n]`, 0 outside.
/// Ollama's IM2Col (receiver = kernel). Returns a new tensor owned by ctx's
/// family, or NULL with err set.
#[no_mangle]
pub extern "C" fn ggml_rs_im2col(
    ctx: *mut ggml_rs_context,
    kernel: *mut ggml_rs_tensor,
    input: *mut ggml_rs_tensor,
    s0: i32,
    s1: i32,
    p0: i32,
    p1: i32,
    d0: i32,
    d1: i32,
    err: *mut ggml_rs_error,
) -> *mut ggml_rs_tensor {
    const OP: &str = "im2col";
    op(ctx, err, OP, |c| {
        c.im2col(tensor_arg(OP, "kernel", kernel)?, tensor_arg(OP, "input", input)?, [s0, s1], [p0, p1], [d0, d1])
    })
}

/// Average pooling of `a` `[W, H, C, N]` (f32 or f16) over `k`x`k` windows
/// with stride `s` (both >= 1) and `p` zeros of padding on each side (a
/// whole number >= 0). Result f32 `[OW, OH, C, N]`,
/// `OW = (W + 2*p - k)/s + 1`; the divisor is always k*k (padding counts,
/// as in ggml). The window must fit in the padded input. Ollama's
/// AvgPool2D. Returns a new tensor owned by ctx's family, or NULL with err
/// set.
#[no_mangle]
pub extern "C" fn ggml_rs_avg_pool_2d(ctx: *mut ggml_rs_context, a: *mut ggml_rs_tensor, k: i32, s: i32, p: f32, err: *mut ggml_rs_error) -> *mut ggml_rs_tensor {
    const OP: &str = "avg_pool_2d";
    op(ctx, err, OP, |c| c.avg_pool_2d(tensor_arg(OP, "a", a)?, k, s, p))
}

/// `a` (f32, any layout) resampled to `[ne0, ne1, ne2, ne3]` (each >= 1).
/// `mode`: 0 nearest, 1 bilinear (over dims 0 and 1; dims 2 and 3 are
/// sampled nearest). `align_corners` false maps output pixel centres as
/// `(i + 0.5)*in/out - 0.5` (what Ollama's Interpolate does); true aligns
/// the corner pixels, `i*(in-1)/(out-1)` (ggml's
/// GGML_SCALE_FLAG_ALIGN_CORNERS). Result f32. Returns a new tensor owned by
/// ctx's family, or NULL with err set.
#[no_mangle]
pub extern "C" fn ggml_rs_interpolate(
    ctx: *mut ggml_rs_context,
    a: *mut ggml_rs_tensor,
    ne0: i64,
    ne1: i64,
    ne2: i64,
    ne3: i64,
    mode: i32,
    align_corners: bool,
    err: *mut ggml_rs_error,
) -> *mut ggml_rs_tensor {
    const OP: &str = "interpolate";
    op(ctx, err, OP, |c| {
        let a = tensor_arg(OP, "a", a)?;
        let mode = ScaleMode::from_id(OP, mode)?;
        c.interpolate(a, [ne0, ne1, ne2, ne3], mode, align_corners)
    })
}
