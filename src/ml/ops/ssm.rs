//! State-space and linear-attention ops: Ollama's `SSMConv` and `SSMScan`
//! (Mamba), and two fused ops of ours for the hybrid architectures
//! (Qwen3-Next, Qwen3.5): `causal_conv` (the short causal convolution with
//! its conv-state update) and `gated_delta_net` (gated delta-rule linear
//! attention over a recurrent state).
//!
//! Every shape, type and stride that ggml's constructors (`ggml_ssm_conv`,
//! `ggml_ssm_scan`, `ggml_gated_delta_net`) or their CPU kernels assert on —
//! or silently rely on (the kernels index their inputs from the shapes of
//! other inputs) — is checked here first. All these kernels take f32 only.
//!
//! Not checked here: `ssm_scan`'s `ids` are data read by the kernel without a
//! bounds check (see `ssm_scan`).

use crate::ml::{check, Context, Error, Result, Tensor};
use crate::sys;

const F32: sys::ggml_type = check::F32;

/// The most recurrent states gated_delta_net keeps of a batch's last tokens
/// (speculative decoding verifies a few drafts; the output grows with it).
pub const MAX_SNAPSHOTS: i64 = 64;

/// How the value heads of `gated_delta_net` share query/key heads when
/// there are fewer of them (grouped heads, `H_v = r · H_k`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HeadRepeat {
    /// Value head `h` reads query/key head `h mod H_k` (ggml's kernel does
    /// this itself; the layout of GGUFs whose V heads were reordered at
    /// conversion, and of Ollama's `Repeat4D` path).
    Tiled,
    /// Value head `h` reads query/key head `h / r` (torch's
    /// `repeat_interleave`, the checkpoint order of Qwen3-Next). The query
    /// and key heads are repeated in the graph before the kernel.
    Interleaved,
}

fn f32_arg(op: &str, what: &str, t: Tensor) -> Result<()> {
    check::dtype_in(op, what, t, &[F32])
}

fn nonempty(op: &str, what: &str, t: Tensor) -> Result<()> {
    if t.nelements() > 0 {
        Ok(())
    } else {
        Err(Error::shape(format!("{op}: {what} has no elements: {}", t.describe())))
    }
}

/// `t` has exactly the shape `want` (ggml order, 4 dims); `meaning` names the
/// dims for the message.
fn shape_is(op: &str, what: &str, t: Tensor, want: [i64; 4], meaning: &str) -> Result<()> {
    if t.ne() == want {
        return Ok(());
    }
    let mut n = 4;
    while n > 1 && want[n - 1] == 1 {
        n -= 1;
    }
    let dims: Vec<String> = want[..n].iter().map(|d| d.to_string()).collect();
    Err(Error::shape(format!("{op}: {what} must have shape [{}] ({meaning}), got {}", dims.join(","), t.describe())))
}

/// Dims 0 and 1 packed: `nb[0]` the element size and `nb[1] = ne[0]·nb[0]`
/// (what `ggml_ssm_scan` and `ggml_ssm_conv`'s kernels assert).
fn packed_rows(op: &str, what: &str, t: Tensor) -> Result<()> {
    let (ne, nb) = (t.ne(), t.nb());
    if nb[0] == 4 && nb[1] == ne[0] as usize * 4 {
        Ok(())
    } else {
        Err(Error::shape(format!(
            "{op}: {what} must have contiguous rows packed one after another (dims 0 and 1 dense), got {}",
            t.describe()
        )))
    }
}

/// The kernels index with C `int`: keep every per-op extent below 2^31.
fn int_sized(op: &str, what: &str, t: Tensor, n: i64) -> Result<()> {
    if n < i32::MAX as i64 {
        Ok(())
    } else {
        Err(Error::shape(format!("{op}: {what} {} is too large for ggml's kernel", t.describe())))
    }
}

impl Context {
    /// Ollama's `SSMConv`: the depthwise sliding-window product of
    /// `ggml_ssm_conv`. `sx = [d_conv - 1 + T, channels, n_seqs]` (the conv
    /// state followed by the inputs, along dim 0), `c = [d_conv, channels]`;
    /// `out[ch, t, s] = Σ_{i<d_conv} sx[t + i, ch, s] · c[i, ch]`, an f32
    /// `[channels, T, n_seqs]`. Both f32 with packed rows (dims 0 and 1
    /// dense; `sx`'s sequences may be strided); `T >= 1`.
    pub fn ssm_conv(&mut self, sx: Tensor, c: Tensor) -> Result<Tensor> {
        const OP: &str = "ssm_conv";
        self.check_ssm_conv(OP, sx, c)?;
        let ctx = self.room(OP, 1)?;
        self.made(OP, unsafe { sys::ggml_ssm_conv(ctx, sx.as_ptr(), c.as_ptr()) })
    }

    fn check_ssm_conv(&self, op: &str, sx: Tensor, c: Tensor) -> Result<()> {
        f32_arg(op, "sx", sx)?;
        f32_arg(op, "c", c)?;
        nonempty(op, "sx", sx)?;
        nonempty(op, "c", c)?;
        let (ns, nc) = (sx.ne(), c.ne());
        if ns[3] != 1 {
            return Err(Error::shape(format!(
                "{op}: sx must be 3-D [d_conv - 1 + tokens, channels, sequences], got {}",
                sx.describe()
            )));
        }
        if nc[2] != 1 || nc[3] != 1 {
            return Err(Error::shape(format!("{op}: c must be a matrix [d_conv, channels], got {}", c.describe())));
        }
        if ns[1] != nc[1] {
            return Err(Error::shape(format!(
                "{op}: sx {} and c {} differ in channels (dim 1)",
                sx.describe(),
                c.describe()
            )));
        }
        if ns[0] < nc[0] {
            return Err(Error::shape(format!(
                "{op}: sx {} has {} columns, fewer than the kernel width {} of c {} (it needs d_conv - 1 + tokens, tokens >= 1)",
                sx.describe(),
                ns[0],
                nc[0],
                c.describe()
            )));
        }
        packed_rows(op, "sx", sx)?;
        // The kernel steps through c's rows by its width, not by nb[1].
        packed_rows(op, "c", c)?;
        int_sized(op, "sx", sx, ns[0] * ns[1])?;
        int_sized(op, "c", c, nc[0] * nc[1])?;
        int_sized(op, "sx", sx, ns[2])?;
        Ok(())
    }

    /// Ollama's `SSMScan` (`ggml_ssm_scan` with one kept state): the
    /// selective scan of Mamba-1/Mamba-2.
    ///
    /// Shapes (all f32 except `ids`): `s = [d_state, head_dim, n_head,
    /// n_slots]` contiguous (the states); `x = [head_dim, n_head, T,
    /// n_seqs]` with packed rows; `dt = [n_head, T, n_seqs]` contiguous;
    /// `a = [1, n_head]` (Mamba-2: one decay per head) or `[d_state,
    /// n_head]` (Mamba-1), contiguous; `b`, `c` `= [d_state, n_group, T,
    /// n_seqs]` with packed rows, `n_head % n_group == 0`; `ids` i32
    /// `[n_seqs]` contiguous: sequence `i` starts from state slot `ids[i]`.
    ///
    /// Per sequence, token and head `h` (group `gr = h / (n_head/n_group)`):
    /// `δ = softplus(dt[h])` (`x` when `x > 20`), and for every `p < head_dim`,
    /// `n < d_state`: `state[n,p] ← state[n,p] · exp(δ·A) + b[n,gr] · x[p,h] · δ`
    /// (A = `a[0,h]` or `a[n,h]`), `y[p,h] = Σ_n state[n,p] · c[n,gr]`.
    ///
    /// Returns the 1-D f32 concatenation of `y = [head_dim, n_head, T,
    /// n_seqs]` and the final states `[d_state, head_dim, n_head, n_seqs]`.
    ///
    /// The kernel does not bounds-check `ids`; every id must be in
    /// `[0, n_slots)`.
    #[allow(clippy::too_many_arguments)]
    pub fn ssm_scan(
        &mut self,
        s: Tensor,
        x: Tensor,
        dt: Tensor,
        a: Tensor,
        b: Tensor,
        c: Tensor,
        ids: Tensor,
    ) -> Result<Tensor> {
        const OP: &str = "ssm_scan";
        for (what, t) in [("s", s), ("x", x), ("dt", dt), ("A", a), ("B", b), ("C", c)] {
            f32_arg(OP, what, t)?;
            nonempty(OP, what, t)?;
        }
        check::dtype_in(OP, "ids", ids, &[check::I32])?;
        nonempty(OP, "ids", ids)?;
        check::contiguous(OP, "s", s)?;
        check::contiguous(OP, "dt", dt)?;
        check::contiguous(OP, "A", a)?;
        check::contiguous(OP, "ids", ids)?;
        packed_rows(OP, "x", x)?;
        packed_rows(OP, "B", b)?;
        packed_rows(OP, "C", c)?;

        let [d_state, head_dim, n_head, _slots] = s.ne();
        let [xd, xh, n_tokens, n_seqs] = x.ne();
        if xd != head_dim || xh != n_head {
            return Err(Error::shape(format!(
                "{OP}: x {} must be [head_dim, n_head, tokens, sequences] with head_dim {head_dim} and n_head {n_head} of s {}",
                x.describe(),
                s.describe()
            )));
        }
        shape_is(OP, "dt", dt, [n_head, n_tokens, n_seqs, 1], "n_head, tokens, sequences")?;
        let na = a.ne();
        if !((na[0] == 1 || na[0] == d_state) && na[1] == n_head && na[2] == 1 && na[3] == 1) {
            return Err(Error::shape(format!(
                "{OP}: A must be [1, n_head] or [d_state, n_head] = [1 or {d_state}, {n_head}], got {}",
                a.describe()
            )));
        }
        let nb_ = b.ne();
        let n_group = nb_[1];
        if nb_[0] != d_state || nb_[2] != n_tokens || nb_[3] != n_seqs {
            return Err(Error::shape(format!(
                "{OP}: B must be [d_state, n_group, tokens, sequences] = [{d_state}, n_group, {n_tokens}, {n_seqs}], got {}",
                b.describe()
            )));
        }
        if n_head % n_group != 0 {
            return Err(Error::shape(format!(
                "{OP}: n_head ({n_head}) must be a multiple of B's n_group ({n_group}), B {}",
                b.describe()
            )));
        }
        if c.ne() != b.ne() {
            return Err(Error::shape(format!(
                "{OP}: B and C must have the same shape: {} vs {}",
                b.describe(),
                c.describe()
            )));
        }
        shape_is(OP, "ids", ids, [n_seqs, 1, 1, 1], "one state slot per sequence")?;
        int_sized(OP, "s", s, d_state * head_dim * n_head)?;
        int_sized(OP, "x", x, head_dim * n_head)?;
        let ctx = self.room(OP, 1)?;
        self.made(OP, unsafe {
            sys::ggml_ssm_scan(
                ctx,
                s.as_ptr(),
                x.as_ptr(),
                dt.as_ptr(),
                a.as_ptr(),
                b.as_ptr(),
                c.as_ptr(),
                ids.as_ptr(),
                1,
            )
        })
    }

    /// The short causal convolution of the hybrid models, with its state:
    /// `x = [channels, T, n_seqs]` (the new inputs, token-major as a
    /// projection makes them; any strides), `state = [K-1, channels,
    /// n_seqs]` (the previous `K-1` inputs per channel, oldest first),
    /// `kernel = [K, channels]` (K >= 2, packed rows); all f32.
    ///
    /// With `w = state ++ xᵀ` along time (`K-1+T` inputs per channel):
    /// `out[ch, t, s] = Σ_{i<K} w[t+i, ch, s] · kernel[i, ch]` (f32
    /// `[channels, T, n_seqs]`, no activation), and the new state is the last
    /// `K-1` inputs `w[T .. T+K-1)`, a contiguous f32 `[K-1, channels,
    /// n_seqs]`.
    pub fn causal_conv(&mut self, x: Tensor, state: Tensor, kernel: Tensor) -> Result<(Tensor, Tensor)> {
        const OP: &str = "causal_conv";
        for (what, t) in [("x", x), ("state", state), ("kernel", kernel)] {
            f32_arg(OP, what, t)?;
            nonempty(OP, what, t)?;
        }
        let [channels, n_tokens, n_seqs, x3] = x.ne();
        if x3 != 1 {
            return Err(Error::shape(format!("{OP}: x must be [channels, tokens, sequences], got {}", x.describe())));
        }
        let [width, kc, k2, k3] = kernel.ne();
        if k2 != 1 || k3 != 1 || kc != channels {
            return Err(Error::shape(format!(
                "{OP}: kernel must be [width, channels] with channels {channels} of x {}, got {}",
                x.describe(),
                kernel.describe()
            )));
        }
        if width < 2 {
            return Err(Error::shape(format!(
                "{OP}: kernel width must be at least 2 (the state holds width - 1 inputs), got {}",
                kernel.describe()
            )));
        }
        packed_rows(OP, "kernel", kernel)?;
        shape_is(OP, "state", state, [width - 1, channels, n_seqs, 1], "kernel width - 1, channels, sequences")?;
        int_sized(OP, "x", x, (width - 1 + n_tokens) * channels)?;
        int_sized(OP, "x", x, n_seqs)?;

        let ctx = self.room(OP, 5)?;
        // xᵀ = [T, channels, n_seqs] (a view); ggml's f32 concat copies
        // element by element through the strides.
        let xt = self.made(OP, unsafe { sys::ggml_transpose(ctx, x.as_ptr()) })?;
        let w = self.made(OP, unsafe { sys::ggml_concat(ctx, state.as_ptr(), xt.as_ptr(), 0) })?;
        let out = self.made(OP, unsafe { sys::ggml_ssm_conv(ctx, w.as_ptr(), kernel.as_ptr()) })?;
        let nb = w.nb();
        let last = self.made(OP, unsafe {
            sys::ggml_view_3d(ctx, w.as_ptr(), width - 1, channels, n_seqs, nb[1], nb[2], n_tokens as usize * nb[0])
        })?;
        let new_state = self.made(OP, unsafe { sys::ggml_cont(ctx, last.as_ptr()) })?;
        Ok((out, new_state))
    }

    /// Gated delta-rule linear attention over a recurrent state
    /// (`ggml_gated_delta_net`, one kept state).
    ///
    /// Shapes (all f32): `q`, `k = [S, H_k, T, n_seqs]`, dense in dim 0;
    /// `v = [S, H_v, T, n_seqs]`, dense in dim 0, `H_v % H_k == 0` (see
    /// [`HeadRepeat`]); `g = [1, H_v, T, n_seqs]` (a log-decay per head) or
    /// `[S, H_v, T, n_seqs]` (one per key dimension, Kimi's KDA),
    /// contiguous; `beta = [1, H_v, T, n_seqs]`, contiguous; `state = [S, S,
    /// H_v, n_seqs]`, contiguous.
    ///
    /// With `S_h[i][j] = state[i, j, h, s]` (`i` the key dimension, dim 0;
    /// `j` the value dimension, dim 1), for each token `t` in order:
    /// `S ← exp(g_t)·S` (per-key: row `i` times `exp(g_t[i])`);
    /// `u_j = β_t·(v_t[j] − Σ_i S[i][j]·k_t[i])`; `S[i][j] += k_t[i]·u_j`;
    /// `o_t[j] = Σ_i S[i][j]·q_t[i] / √S`. `q` and `k` are used as given
    /// (Qwen3-Next L2-normalises them first), `g` is the log of the decay and
    /// `beta` the final write strength (a sigmoid already applied).
    ///
    /// Returns `(out, new_state)`: f32 `[S, H_v, T, n_seqs]` and f32 `[S, S,
    /// H_v, n_seqs]` (the state after the last token, same layout), both
    /// contiguous views of the one ggml node.
    #[allow(clippy::too_many_arguments)]
    pub fn gated_delta_net(
        &mut self,
        q: Tensor,
        k: Tensor,
        v: Tensor,
        g: Tensor,
        beta: Tensor,
        state: Tensor,
        heads: HeadRepeat,
        snapshots: i64,
    ) -> Result<(Tensor, Tensor)> {
        const OP: &str = "gated_delta_net";
        let res = self.delta_net_node(OP, [q, k, v, g, beta, state], heads, snapshots)?;
        let out = self.delta_net_out(OP, res, v)?;
        let [s, h_v, n_tokens, n_seqs] = v.ne();
        let f = 4usize;
        let (su, hu, tu) = (s as usize, h_v as usize, n_tokens as usize);
        let ctx = self.room(OP, 1)?;
        let new_state = self.made(OP, unsafe {
            sys::ggml_view_4d(
                ctx,
                res.as_ptr(),
                s,
                s,
                h_v,
                n_seqs * snapshots,
                su * f,
                su * su * f,
                su * su * hu * f,
                su * hu * tu * n_seqs as usize * f,
            )
        })?;
        Ok((out, new_state))
    }

    /// [`gated_delta_net`](Self::gated_delta_net) with one kept state,
    /// written over `state` itself: the kernel updates each head's state
    /// where it is (no copy into the output and none back into a cache).
    /// Returns `out` only. `state` must be memory this graph may write (a
    /// view of a recurrent cache), not a weight, and the backend must
    /// compute on the CPU alone (other devices' kernels, or a copy of the
    /// state the scheduler made for them, would leave it unchanged). Each
    /// compute of the graph applies the update once more.
    #[allow(clippy::too_many_arguments)]
    pub fn gated_delta_net_in_place(
        &mut self,
        q: Tensor,
        k: Tensor,
        v: Tensor,
        g: Tensor,
        beta: Tensor,
        state: Tensor,
        heads: HeadRepeat,
    ) -> Result<Tensor> {
        const OP: &str = "gated_delta_net_in_place";
        if !self.shared.backend.cpu_only() {
            return Err(Error::invalid(format!(
                "{OP}: the backend computes on other devices than the CPU; use gated_delta_net and copy the state"
            )));
        }
        if state.is_weight() {
            return Err(Error::invalid(format!("{OP}: state {} is a weight, which is never written", state.describe())));
        }
        let res = self.delta_net_node(OP, [q, k, v, g, beta, state], heads, 1)?;
        // Op parameter 1: our CPU kernel's in-place update (patch 21).
        // SAFETY: a node just made by ggml_gated_delta_net, not computed yet.
        unsafe { (*res.as_ptr()).op_params[1] = 1 };
        self.delta_net_out(OP, res, v)
    }

    /// The attention output `[S, H_v, T, n_seqs]` at the start of a
    /// `ggml_gated_delta_net` node `res` of values `v`.
    fn delta_net_out(&mut self, op: &str, res: Tensor, v: Tensor) -> Result<Tensor> {
        let [s, h_v, n_tokens, n_seqs] = v.ne();
        let (f, su, hu, tu) = (4usize, s as usize, h_v as usize, n_tokens as usize);
        let ctx = self.room(op, 1)?;
        self.made(op, unsafe {
            sys::ggml_view_4d(ctx, res.as_ptr(), s, h_v, n_tokens, n_seqs, su * f, su * hu * f, su * hu * tu * f, 0)
        })
    }

    /// The checked `ggml_gated_delta_net` node of `[q, k, v, g, beta,
    /// state]` (q and k first interleaved where `heads` asks).
    fn delta_net_node(&mut self, op: &str, args: [Tensor; 6], heads: HeadRepeat, snapshots: i64) -> Result<Tensor> {
        let [q, k, v, g, beta, state] = args;
        if !(1..=MAX_SNAPSHOTS).contains(&snapshots) {
            return Err(Error::invalid(format!(
                "{op}: snapshots must be 1 to {MAX_SNAPSHOTS} (states kept of the last tokens), got {snapshots}"
            )));
        }
        for (what, t) in [("q", q), ("k", k), ("v", v), ("g", g), ("beta", beta), ("state", state)] {
            f32_arg(op, what, t)?;
            nonempty(op, what, t)?;
        }
        for (what, t) in [("q", q), ("k", k), ("v", v)] {
            check::rows_contiguous(op, what, t)?;
        }
        for (what, t) in [("g", g), ("beta", beta), ("state", state)] {
            check::contiguous(op, what, t)?;
        }
        let [s, h_v, n_tokens, n_seqs] = v.ne();
        let [qs, h_k, qt, qn] = q.ne();
        if qs != s || qt != n_tokens || qn != n_seqs {
            return Err(Error::shape(format!(
                "{op}: q {} must be [{s}, heads, {n_tokens}, {n_seqs}] (head size, heads, tokens, sequences of v {})",
                q.describe(),
                v.describe()
            )));
        }
        if k.ne() != q.ne() {
            return Err(Error::shape(format!(
                "{op}: q and k must have the same shape: {} vs {}",
                q.describe(),
                k.describe()
            )));
        }
        if h_v % h_k != 0 {
            return Err(Error::shape(format!(
                "{op}: v's heads ({h_v}) must be a multiple of q's and k's heads ({h_k}): q {}, v {}",
                q.describe(),
                v.describe()
            )));
        }
        if !(g.ne() == [1, h_v, n_tokens, n_seqs] || g.ne() == [s, h_v, n_tokens, n_seqs]) {
            return Err(Error::shape(format!(
                "{op}: g must be [1, {h_v}, {n_tokens}, {n_seqs}] or [{s}, {h_v}, {n_tokens}, {n_seqs}] (1 or head size, heads, tokens, sequences of v {}), got {}",
                v.describe(),
                g.describe()
            )));
        }
        shape_is(op, "beta", beta, [1, h_v, n_tokens, n_seqs], "1, heads, tokens, sequences of v")?;
        shape_is(op, "state", state, [s, s, h_v, n_seqs], "head size, head size, heads, sequences of v")?;
        int_sized(op, "v", v, h_v * n_seqs)?;
        let out_rows = n_tokens * n_seqs + snapshots * s * n_seqs;
        check::shape_arg(op, &[s * h_v, out_rows], false)?;

        let repeat = heads == HeadRepeat::Interleaved && h_k != h_v;
        // Interleaving: up to 3 tensors for each of q and k.
        let ctx = self.room(op, 1 + if repeat { 6 } else { 0 })?;
        let (q, k) = if repeat {
            let r = h_v / h_k;
            (self.interleave_heads(q, r)?, self.interleave_heads(k, r)?)
        } else {
            (q, k)
        };
        self.made(op, unsafe {
            sys::ggml_gated_delta_net(
                ctx,
                q.as_ptr(),
                k.as_ptr(),
                v.as_ptr(),
                g.as_ptr(),
                beta.as_ptr(),
                state.as_ptr(),
                snapshots,
            )
        })
    }

    /// `t = [S, H, T, n]` with each head repeated `r` times in place:
    /// head `h` of the result is head `h / r` of `t` (copies a
    /// non-contiguous `t` first).
    fn interleave_heads(&mut self, t: Tensor, r: i64) -> Result<Tensor> {
        let [s, h, n_tokens, n_seqs] = t.ne();
        let flat = self.reshape(t, &[s, 1, h * n_tokens * n_seqs])?;
        let rep = self.repeat(flat, 1, r)?;
        self.reshape(rep, &[s, h * r, n_tokens, n_seqs])
    }
}
