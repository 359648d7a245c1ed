//! State-space and linear-attention ops: Ollama's SSMConv/SSMScan and the
//! fused causal convolution and gated delta net of the hybrid models. Every
//! op here returns a new tensor owned by `ctx`'s family, or NULL with `err`
//! set (and the error recorded on `ctx`); a second output goes to an
//! out-parameter written only on success.

use super::context::ggml_rs_context;
use super::{ggml_rs_error, ggml_rs_tensor, op, out_tensor, tensor_arg};
use crate::ml::ops::ssm::HeadRepeat;
use crate::ml::{Error, Tensor};

/// Runs a two-output op: checks `out_second` first, returns the first output
/// and stores the second in `*out_second` only when the op succeeded.
fn op2(
    ctx: *mut ggml_rs_context,
    err: *mut ggml_rs_error,
    name: &str,
    out_second: *mut *mut ggml_rs_tensor,
    f: impl FnOnce(&mut crate::ml::Context) -> crate::ml::Result<(Tensor, Tensor)>,
) -> *mut ggml_rs_tensor {
    let mut second: Option<Tensor> = None;
    let first = op(ctx, err, name, |c| {
        if out_second.is_null() {
            return Err(Error::invalid(format!("{name}: out_state is NULL")));
        }
        let (a, b) = f(c)?;
        second = Some(b);
        Ok(a)
    });
    if let (false, Some(b)) = (first.is_null(), second) {
        unsafe { *out_second = out_tensor(b) };
    }
    first
}

/// Ollama's SSMConv (`ggml_ssm_conv`): the depthwise sliding-window product
/// `out[ch, t, s] = Σ_{i<d_conv} sx[t+i, ch, s] · c[i, ch]`.
/// `sx`: f32 `[d_conv - 1 + T, channels, n_seqs]` (conv state then inputs
/// along dim 0), dims 0 and 1 dense (packed rows; sequences may be
/// strided); `c`: f32 `[d_conv, channels]`, packed rows; `T >= 1`. Result: f32
/// `[channels, T, n_seqs]`. Returns a new tensor owned by ctx's family, or
/// NULL with err set.
#[no_mangle]
pub extern "C" fn ggml_rs_ssm_conv(
    ctx: *mut ggml_rs_context,
    sx: *mut ggml_rs_tensor,
    c: *mut ggml_rs_tensor,
    err: *mut ggml_rs_error,
) -> *mut ggml_rs_tensor {
    op(ctx, err, "ssm_conv", |cx| cx.ssm_conv(tensor_arg("ssm_conv", "sx", sx)?, tensor_arg("ssm_conv", "c", c)?))
}

/// Ollama's SSMScan (`ggml_ssm_scan` keeping one state): the selective scan
/// of Mamba-1/Mamba-2.
/// `s`: f32 `[d_state, head_dim, n_head, n_slots]`, contiguous (states);
/// `x`: f32 `[head_dim, n_head, T, n_seqs]`, dims 0 and 1 dense;
/// `dt`: f32 `[n_head, T, n_seqs]`, contiguous;
/// `A`: f32 `[1, n_head]` (Mamba-2) or `[d_state, n_head]` (Mamba-1), contiguous;
/// `B`, `C`: f32 `[d_state, n_group, T, n_seqs]`, dims 0 and 1 dense,
/// `n_head % n_group == 0`; `ids`: i32 `[n_seqs]`, contiguous, each in
/// `[0, n_slots)` (sequence i starts from state slot ids[i]; the kernel does
/// not check them).
/// Per sequence, token and head h (group gr = h / (n_head / n_group)):
/// `δ = softplus(dt[h])` (dt itself above 20); for p < head_dim, n < d_state:
/// `state[n,p] = state[n,p]·exp(δ·A[h] or A[n,h]) + B[n,gr]·x[p,h]·δ`,
/// `y[p,h] = Σ_n state[n,p]·C[n,gr]`.
/// Result: 1-D f32 of `y` (`[head_dim, n_head, T, n_seqs]`) followed by the
/// final states (`[d_state, head_dim, n_head, n_seqs]`). Returns a new
/// tensor owned by ctx's family, or NULL with err set.
#[no_mangle]
#[allow(non_snake_case)]
pub extern "C" fn ggml_rs_ssm_scan(
    ctx: *mut ggml_rs_context,
    s: *mut ggml_rs_tensor,
    x: *mut ggml_rs_tensor,
    dt: *mut ggml_rs_tensor,
    A: *mut ggml_rs_tensor,
    B: *mut ggml_rs_tensor,
    C: *mut ggml_rs_tensor,
    ids: *mut ggml_rs_tensor,
    err: *mut ggml_rs_error,
) -> *mut ggml_rs_tensor {
    const OP: &str = "ssm_scan";
    op(ctx, err, OP, |c| {
        c.ssm_scan(
            tensor_arg(OP, "s", s)?,
            tensor_arg(OP, "x", x)?,
            tensor_arg(OP, "dt", dt)?,
            tensor_arg(OP, "A", A)?,
            tensor_arg(OP, "B", B)?,
            tensor_arg(OP, "C", C)?,
            tensor_arg(OP, "ids", ids)?,
        )
    })
}

/// The short causal convolution of hybrid models (Qwen3-Next, Qwen3.5)
/// over a conv state, with the state update (built on ggml_ssm_conv).
/// `x`: f32 `[channels, T, n_seqs]` (new inputs; any strides);
/// `state`: f32 `[K-1, channels, n_seqs]` (the previous K-1 inputs of each
/// channel, oldest first); `kernel`: f32 `[K, channels]`, K >= 2, packed
/// rows.
/// With `w = state ++ xᵀ` along time: `out[ch, t, s] = Σ_{i<K} w[t+i, ch, s]
/// · kernel[i, ch]` (f32 `[channels, T, n_seqs]`, no activation), and
/// `*out_state = w[T .. T+K-1)`, the last K-1 inputs, a new contiguous f32
/// `[K-1, channels, n_seqs]` (feed it as `state` to the next call).
/// `out_state` must not be NULL; it is written only on success. Returns a
/// new tensor (and `*out_state`) owned by ctx's family, or NULL with err set.
#[no_mangle]
pub extern "C" fn ggml_rs_causal_conv(
    ctx: *mut ggml_rs_context,
    x: *mut ggml_rs_tensor,
    state: *mut ggml_rs_tensor,
    kernel: *mut ggml_rs_tensor,
    out_state: *mut *mut ggml_rs_tensor,
    err: *mut ggml_rs_error,
) -> *mut ggml_rs_tensor {
    const OP: &str = "causal_conv";
    op2(ctx, err, OP, out_state, |c| {
        c.causal_conv(tensor_arg(OP, "x", x)?, tensor_arg(OP, "state", state)?, tensor_arg(OP, "kernel", kernel)?)
    })
}

/// Gated delta-rule linear attention over a recurrent state (the linear
/// attention layers of Qwen3-Next and Qwen3.5; ggml_gated_delta_net).
/// All f32. `q`, `k`: `[S, H_k, T, n_seqs]`, dense in dim 0; `v`:
/// `[S, H_v, T, n_seqs]`, dense in dim 0, `H_v % H_k == 0`; `g`:
/// `[1, H_v, T, n_seqs]` (log-decay per head) or `[S, H_v, T, n_seqs]`
/// (per key dimension, KDA), contiguous; `beta`: `[1, H_v, T, n_seqs]`,
/// contiguous; `state`: `[S, S, H_v, n_seqs]`, contiguous.
/// Heads: with `interleaved` false, value head h uses query/key head
/// `h mod H_k` (tiled; ggml's native broadcast); with `interleaved` true,
/// head `h / (H_v / H_k)` (torch repeat_interleave; q and k are repeated in
/// the graph first).
/// Math, per sequence and value head, `S[i][j] = state[i, j, h, s]` (i: key
/// dimension = dim 0, j: value dimension = dim 1), tokens t in order:
///   `S ← exp(g_t)·S` (per-key gate: row i times exp(g_t[i]));
///   `u_j = beta_t·(v_t[j] − Σ_i S[i][j]·k_t[i])`;
///   `S[i][j] ← S[i][j] + k_t[i]·u_j`;
///   `o_t[j] = Σ_i S[i][j]·q_t[i] / sqrt(S)`.
/// q and k are not normalised here (Qwen3-Next L2-normalises them first);
/// g is the log of the decay (<= 0 for a decay); beta is used as given
/// (apply the sigmoid first). Note the state layout: the transpose of the one
/// Ollama's primitive qwen3next keeps (its dim 0 is the value dimension).
/// `snapshots` (1 to 64): how many states to keep of the last tokens.
/// Result: f32 `[S, H_v, T, n_seqs]` (o); `*out_state` = f32 `[S, S, H_v,
/// n_seqs·snapshots]`: its sequences j·n_seqs to (j+1)·n_seqs − 1 are the
/// states j tokens before the last (j = 0: after the last token), in the
/// same layout; those of j ≥ T are not written. Both are contiguous views
/// of one node. `out_state` must not be NULL; it is written
/// only on success. Returns a new tensor (and `*out_state`) owned by ctx's
/// family, or NULL with err set.
#[no_mangle]
pub extern "C" fn ggml_rs_gated_delta_net(
    ctx: *mut ggml_rs_context,
    q: *mut ggml_rs_tensor,
    k: *mut ggml_rs_tensor,
    v: *mut ggml_rs_tensor,
    g: *mut ggml_rs_tensor,
    beta: *mut ggml_rs_tensor,
    state: *mut ggml_rs_tensor,
    interleaved: bool,
    snapshots: i64,
    out_state: *mut *mut ggml_rs_tensor,
    err: *mut ggml_rs_error,
) -> *mut ggml_rs_tensor {
    const OP: &str = "gated_delta_net";
    op2(ctx, err, OP, out_state, |c| {
        let heads = if interleaved { HeadRepeat::Interleaved } else { HeadRepeat::Tiled };
        c.gated_delta_net(
            tensor_arg(OP, "q", q)?,
            tensor_arg(OP, "k", k)?,
            tensor_arg(OP, "v", v)?,
            tensor_arg(OP, "g", g)?,
            tensor_arg(OP, "beta", beta)?,
            tensor_arg(OP, "state", state)?,
            heads,
            snapshots,
        )
    })
}

/// ggml_rs_gated_delta_net with one kept state, written over `state`
/// itself: each head's state is updated where it is, with no copy into
/// the output and none back (for `state` a view of a recurrent cache; the
/// new state must replace the old one there). Same arguments and math;
/// `state` must not be a weight, and the backend must compute on CPUs
/// alone (ggml_rs_backend_cpu_only), else an error. The state is written
/// when the graph computes, again at each compute of the same graph.
/// Result: f32 `[S, H_v, T, n_seqs]` (o), a new
/// tensor owned by ctx's family, or NULL with err set.
#[no_mangle]
pub extern "C" fn ggml_rs_gated_delta_net_in_place(
    ctx: *mut ggml_rs_context,
    q: *mut ggml_rs_tensor,
    k: *mut ggml_rs_tensor,
    v: *mut ggml_rs_tensor,
    g: *mut ggml_rs_tensor,
    beta: *mut ggml_rs_tensor,
    state: *mut ggml_rs_tensor,
    interleaved: bool,
    err: *mut ggml_rs_error,
) -> *mut ggml_rs_tensor {
    const OP: &str = "gated_delta_net_in_place";
    op(ctx, err, OP, |c| {
        let heads = if interleaved { HeadRepeat::Interleaved } else { HeadRepeat::Tiled };
        c.gated_delta_net_in_place(
            tensor_arg(OP, "q", q)?,
            tensor_arg(OP, "k", k)?,
            tensor_arg(OP, "v", v)?,
            tensor_arg(OP, "g", g)?,
            tensor_arg(OP, "beta", beta)?,
            tensor_arg(OP, "state", state)?,
            heads,
        )
    })
}
