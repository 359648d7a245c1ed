package main

import "math"

// The reference: the same transformer block in plain Go, float64 all the
// way, written from the textbook definitions (not from ggml). Tensors are
// flat slices in ggml order: element (i0, i1, i2) of a [n0, n1, n2] tensor
// is at i0 + n0*(i1 + n1*i2).

// rmsNorm normalises each column (dim 0) of x [d, n] to unit RMS and scales
// by w [d].
func rmsNorm(x []float64, w []float64, d, n int, eps float64) []float64 {
	y := make([]float64, len(x))
	for j := 0; j < n; j++ {
		col := x[j*d : (j+1)*d]
		var ss float64
		for _, v := range col {
			ss += v * v
		}
		s := 1 / math.Sqrt(ss/float64(d)+eps)
		for i, v := range col {
			y[j*d+i] = v * s * w[i]
		}
	}
	return y
}

// linear applies w [in, out] (ggml's mul_mat(w, x) layout: row o of w is
// w[o*in : (o+1)*in]) to x [in, n], giving [out, n].
func linear(w, x []float64, in, out, n int) []float64 {
	y := make([]float64, out*n)
	for j := 0; j < n; j++ {
		xc := x[j*in : (j+1)*in]
		for o := 0; o < out; o++ {
			wr := w[o*in : (o+1)*in]
			var s float64
			for i := range wr {
				s += wr[i] * xc[i]
			}
			y[j*out+o] = s
		}
	}
	return y
}

// ropeNeoX rotates x [hd, heads, n] in place, NeoX style: element i of a
// head is paired with element i+hd/2 and both are rotated by the angle
// pos * base^(-2i/hd).
func ropeNeoX(x []float64, hd, heads, n int, pos []int32, base float64) {
	half := hd / 2
	for j := 0; j < n; j++ {
		for h := 0; h < heads; h++ {
			v := x[(j*heads+h)*hd : (j*heads+h+1)*hd]
			for i := 0; i < half; i++ {
				theta := float64(pos[j]) * math.Pow(base, -2*float64(i)/float64(hd))
				c, s := math.Cos(theta), math.Sin(theta)
				a, b := v[i], v[i+half]
				v[i] = a*c - b*s
				v[i+half] = a*s + b*c
			}
		}
	}
}

// attention is causal grouped-query attention: q [hd, heads, n], k and v
// [hd, kvHeads, n]; query head h reads key/value head h/(heads/kvHeads).
// Returns [hd, heads, n].
func attention(q, k, v []float64, hd, heads, kvHeads, n int, scale float64) []float64 {
	out := make([]float64, hd*heads*n)
	group := heads / kvHeads
	at := func(t []float64, hs, h, j int) []float64 { return t[(j*hs+h)*hd : (j*hs+h+1)*hd] }
	p := make([]float64, n)
	for h := 0; h < heads; h++ {
		kh := h / group
		for i := 0; i < n; i++ {
			qi := at(q, heads, h, i)
			max := math.Inf(-1)
			for j := 0; j <= i; j++ { // causal: keys up to the query's position
				kj := at(k, kvHeads, kh, j)
				var s float64
				for d := range qi {
					s += qi[d] * kj[d]
				}
				p[j] = s * scale
				max = math.Max(max, p[j])
			}
			var sum float64
			for j := 0; j <= i; j++ {
				p[j] = math.Exp(p[j] - max)
				sum += p[j]
			}
			o := at(out, heads, h, i)
			for j := 0; j <= i; j++ {
				vj := at(v, kvHeads, kh, j)
				for d := range o {
					o[d] += p[j] / sum * vj[d]
				}
			}
		}
	}
	return out
}

func silu(x float64) float64 { return x / (1 + math.Exp(-x)) }

func add(a, b []float64) []float64 {
	y := make([]float64, len(a))
	for i := range a {
		y[i] = a[i] + b[i]
	}
	return y
}

// reference computes the block on w's weights and input. It returns the
// block's output [dModel, seq] and the attention output [headDim*heads, seq]
// (before the output projection).
func reference(w *weights, c config) (out, attn []float64) {
	d, n, hd := c.dModel, c.seq, c.headDim
	x := w.x.f64()
	h := rmsNorm(x, w.attnNorm.f64(), d, n, c.eps)
	q := linear(w.wq.f64(), h, d, c.heads*hd, n)
	k := linear(w.wk.f64(), h, d, c.kvHeads*hd, n)
	v := linear(w.wv.f64(), h, d, c.kvHeads*hd, n)
	ropeNeoX(q, hd, c.heads, n, w.pos, c.ropeBase)
	ropeNeoX(k, hd, c.kvHeads, n, w.pos, c.ropeBase)
	a := attention(q, k, v, hd, c.heads, c.kvHeads, n, 1/math.Sqrt(float64(hd)))
	x1 := add(x, linear(w.wo.f64(), a, c.heads*hd, d, n))

	h2 := rmsNorm(x1, w.ffnNorm.f64(), d, n, c.eps)
	g := linear(w.wGate.f64(), h2, d, c.dFF, n)
	u := linear(w.wUp.f64(), h2, d, c.dFF, n)
	for i := range g {
		g[i] = silu(g[i]) * u[i]
	}
	return add(x1, linear(w.wDown.f64(), g, c.dFF, d, n)), a
}
