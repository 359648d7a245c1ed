package nn

import "github.com/ggml-rs/ggml-rs/go/ml"

// Gating turns the router's logits into expert probabilities.
type Gating int

const (
	// GatingSoftmax: softmax over all experts, then the top k
	// (Qwen3-MoE, Qwen3-Next, Qwen3.5-MoE).
	GatingSoftmax Gating = iota
	// GatingSigmoid: an independent sigmoid per expert.
	GatingSigmoid
	// GatingSoftmaxWeight: the top k by raw logit, then a softmax over
	// those k only (gpt-oss).
	GatingSoftmaxWeight
)

// MoE is a mixture-of-experts feed-forward network (llama.cpp's
// build_moe_ffn), with an optional shared expert (Qwen3-Next's, gated by
// sigmoid(SharedGate·x)):
//
//	p = gating(Router·x (+ RouterBias));  e = top Used experts by p
//	    (by p + SelectionBias where the model has one: LFM2-MoE)
//	    (by the logits with SelectByLogits: Llama 4)
//	w = p[e] (normalised to sum 1 with NormWeights; times WeightScale)
//	out = Σ_i w_i · Down_e_i(act(Gate_e_i·x (+b), Up_e_i·x (+b))) (+b)
//	    (Σ_i Down_e_i(act(Gate_e_i·w_i·x, Up_e_i·w_i·x)) with
//	    WeightsBeforeFFN: Llama 4)
//	    (+ sigmoid(SharedGate·x) · Shared(x))
//
// With ReLUSquared or GELU the experts have no Gate: Down_e(relu(Up_e·x)²)
// or Down_e(gelu(Up_e·x)); with LatentIn and LatentOut they work in a
// latent size l instead of d.
//
// Expert weights are 3-D: Gate and Up [d, ff, Experts], Down [ff, d,
// Experts]; GateUp [d, 2·ff, Experts] replaces Gate and Up in models that
// merge them (the first ff rows of each expert are the gate). The biases
// (gpt-oss) are [ff or d, Experts].
type MoE struct {
	Router                 Linear
	Gate, Up, Down, GateUp ml.Tensor
	GateBias, UpBias       ml.Tensor
	DownBias, GateUpBias   ml.Tensor
	Experts, Used          int
	Gating                 Gating
	// SelectionBias [Experts] is added to the probabilities to choose the
	// experts only; the weights are the unbiased ones (llama.cpp's
	// exp_probs_b).
	SelectionBias ml.Tensor
	NormWeights   bool
	WeightScale   float32
	// SelectByLogits chooses the experts by the router's raw logits, not
	// by the gated probabilities (Llama 4: the same experts but for
	// ties, as its reference code picks them).
	SelectByLogits bool
	// WeightsBeforeFFN scales each chosen expert's input by its weight
	// instead of its output, and sums the outputs as they are (Llama 4).
	WeightsBeforeFFN bool
	// ReLUSquared: experts without a gate, Down·relu(Up·x)² (Nemotron-H);
	// GELU: without a gate, Down·gelu(Up·x) (Nomic BERT MoE).
	ReLUSquared, GELU bool
	// LatentIn [d, l] and LatentOut [l, d], when set, take the experts'
	// input to a latent size l and their sum back (Nemotron 3's latent
	// MoE); the router and the shared expert see x itself.
	LatentIn, LatentOut ml.Tensor
	// OAI selects gpt-oss's clamped SwiGLU, with Alpha and Limit, instead
	// of SiLU(gate)·up.
	OAI          bool
	Alpha, Limit float32

	Shared     *FFN
	SharedGate ml.Tensor // [d]: the shared expert's sigmoid gate
}

// normClamp is the smallest sum of the kept weights that NormWeights
// divides by (the smallest normal F16, as llama.cpp).
const normClamp = 6.103515625e-5

// Forward maps x [d, n] to [d, n].
func (m *MoE) Forward(ctx ml.Context, x ml.Tensor) ml.Tensor {
	n, k := x.Dim(1), m.Used
	in := x // the experts' input
	if m.LatentIn != nil {
		in = m.LatentIn.Mulmat(ctx, x)
	}
	d := in.Dim(0)
	logits := m.Router.Forward(ctx, x) // [experts, n]
	var probs ml.Tensor
	switch m.Gating {
	case GatingSigmoid:
		probs = logits.Sigmoid(ctx)
	case GatingSoftmaxWeight:
		probs = logits
	default:
		probs = logits.Softmax(ctx)
	}
	selection := probs
	if m.SelectByLogits {
		selection = logits
	}
	if m.SelectionBias != nil {
		selection = probs.Add(ctx, m.SelectionBias)
	}
	selected := selection.TopK(ctx, k)                           // [k, n]
	w := probs.Reshape(ctx, 1, m.Experts, n).Rows(ctx, selected) // [1, k, n]
	if m.Gating == GatingSoftmaxWeight {
		w = w.Reshape(ctx, k, n).Softmax(ctx).Reshape(ctx, 1, k, n)
	}
	if m.NormWeights {
		w2 := w.Reshape(ctx, k, n)
		sum := w2.SumRows(ctx).Clamp(ctx, normClamp, float32(inf))
		w = w2.Div(ctx, sum).Reshape(ctx, 1, k, n)
	}
	if m.WeightScale != 0 && m.WeightScale != 1 {
		w = w.Scale(ctx, float64(m.WeightScale))
	}
	// The graph's node order is llama.cpp's (see Attention.KeysBeforeValues):
	// the routing, whole, before the experts' products (a GPU backend
	// fuses softmax, top-k and the weights when their nodes are adjacent),
	// then the experts' views, then their sum.
	ctx.Forward(w)

	xe := in.Reshape(ctx, d, 1, n)
	if m.WeightsBeforeFFN {
		xe = xe.Repeat4D(ctx, d, k, n, 1).Mul(ctx, w) // [d, k, n]
	}
	var gate, up ml.Tensor
	if m.GateUp != nil {
		gu := m.GateUp.MulmatID(ctx, xe, selected) // [2ff, k, n]
		if m.GateUpBias != nil {
			gu = gu.AddID(ctx, m.GateUpBias, selected)
		}
		ff := gu.Dim(0) / 2
		gate = gu.View(ctx, 0, ff, gu.Stride(1), k, gu.Stride(2), n)
		up = gu.View(ctx, ff*gu.Stride(0), ff, gu.Stride(1), k, gu.Stride(2), n)
	} else {
		up = m.Up.MulmatID(ctx, xe, selected) // [ff, k, n]
		if m.UpBias != nil {
			up = up.AddID(ctx, m.UpBias, selected)
		}
		if m.Gate != nil {
			gate = m.Gate.MulmatID(ctx, xe, selected)
			if m.GateBias != nil {
				gate = gate.AddID(ctx, m.GateBias, selected)
			}
		}
	}
	var h ml.Tensor
	switch {
	case m.ReLUSquared:
		h = up.RELU(ctx).Sqr(ctx)
	case m.GELU:
		h = up.GELU(ctx)
	case m.OAI:
		h = gate.SILUAlphaLimit(ctx, up, m.Alpha, m.Limit)
	default:
		h = gate.SILU(ctx, up)
	}
	experts := m.Down.MulmatID(ctx, h, selected) // [d, k, n]
	if m.DownBias != nil {
		experts = experts.AddID(ctx, m.DownBias, selected)
	}
	if !m.WeightsBeforeFFN {
		experts = experts.Mul(ctx, w)
	}
	ctx.Forward(experts)

	// Sum the k experts in order, as llama.cpp does (views, then adds).
	views := make([]ml.Tensor, k)
	for i := range views {
		views[i] = experts.View(ctx, i*experts.Stride(1), d, experts.Stride(2), n)
	}
	ctx.Forward(views...)
	out := views[0]
	for i := 1; i < k; i++ {
		out = out.Add(ctx, views[i])
		ctx.Forward(out)
	}
	if k == 1 {
		out = out.Contiguous(ctx)
	}
	if m.LatentOut != nil {
		out = m.LatentOut.Mulmat(ctx, out)
	}
	if m.Shared != nil {
		s := m.Shared.Forward(ctx, x)
		if m.SharedGate != nil {
			s = s.Mul(ctx, m.SharedGate.Mulmat(ctx, x).Sigmoid(ctx))
		}
		out = out.Add(ctx, s)
	}
	return out
}
