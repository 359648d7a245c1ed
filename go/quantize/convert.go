package quantize

import (
	"fmt"
	"sync"
	"sync/atomic"

	"ggmlrs/gguf"
	"ggmlrs/ml/backend"
)

// slabElements bounds the f32 values of one slab of rows (64 MiB).
const slabElements = 16 << 20

// quantizeTensor converts a F32/F16/BF16 tensor at offset off of src to
// its output type a slab of rows at a time, each slab's rows split across
// threads. Rows are quantized independently (ggml_quantize_chunk), so the
// bytes do not depend on the split.
func quantizeTensor(snk *sink, src *source, off uint64, it item, threads int) (uint64, error) {
	ncols := it.in.Shape[0]
	nrows := it.in.Elements() / ncols
	srcRow, err := it.in.Type.RowSize(ncols)
	if err != nil {
		return 0, err
	}
	dstRow, err := it.out.Type.RowSize(ncols)
	if err != nil {
		return 0, err
	}
	if threads < 1 {
		threads = 1
	}
	slabRows := max(1, slabElements/ncols)
	scratch := make([][]float32, threads)
	var written uint64
	for r := uint64(0); r < nrows; r += slabRows {
		rows := min(slabRows, nrows-r)
		in, err := src.bytes(off+r*srcRow, rows*srcRow)
		if err != nil {
			return written, err
		}
		dst := snk.buffer(int(rows * dstRow))
		if err := quantizeRows(it.in.Type, it.out.Type, in, dst, ncols, rows, threads, scratch, weights(it, r)); err != nil {
			return written, err
		}
		if err := snk.send(dst, true, nil); err != nil {
			return written, err
		}
		written += uint64(len(dst))
	}
	return written, nil
}

// rowWeights gives the importance weights of a row of the slab (by its
// index in the slab) and how many rows from it on share them; nil: none.
type rowWeights func(row uint64) ([]float32, uint64)

// weights: the importance weights of the slab of it starting at row
// first: each expert (Shape[1] rows) has its own Shape[0] values.
func weights(it item, first uint64) rowWeights {
	if it.imatrix == nil {
		return nil
	}
	ncols, perExpert := it.in.Shape[0], uint64(1)
	if len(it.in.Shape) > 1 {
		perExpert = it.in.Shape[1]
	}
	return func(row uint64) ([]float32, uint64) {
		g := first + row
		e := g / perExpert
		return it.imatrix[e*ncols : (e+1)*ncols], (e+1)*perExpert - g
	}
}

// chunkElements: the values a worker takes at a time (llama.cpp's
// chunk_size, rounded to whole rows). Workers take the next chunk as they
// finish one, so that one slowed by another process does not hold up
// the rest at the end of the slab.
const chunkElements = 32 * 512

// quantizeRows converts rows rows of ncols elements from src (type from)
// to dst (type to), threads goroutines taking chunks of rows in turn, each
// with its f32 buffer from scratch (grown as needed, kept for the next
// slab), with the importance weights of w (nil: none).
func quantizeRows(from, to gguf.TensorType, src, dst []byte, ncols, rows uint64, threads int, scratch [][]float32, w rowWeights) error {
	srcRow, dstRow := uint64(len(src))/rows, uint64(len(dst))/rows
	chunk := max(1, chunkElements/ncols)
	nchunks := (rows + chunk - 1) / chunk
	n := min(uint64(threads), nchunks)
	errs := make([]error, n)
	var next atomic.Uint64
	var failed atomic.Bool
	var wg sync.WaitGroup
	for i := uint64(0); i < n; i++ {
		need := chunk * ncols
		if uint64(cap(scratch[i])) < need {
			scratch[i] = make([]float32, need)
		}
		f32 := scratch[i][:need]
		wg.Add(1)
		go func(i uint64) {
			defer wg.Done()
			for !failed.Load() {
				c := next.Add(1) - 1
				if c >= nchunks {
					return
				}
				lo, hi := c*chunk, min(rows, (c+1)*chunk)
				// one call per expert the chunk spans (its own weights)
				for a := lo; a < hi; {
					var im []float32
					b := hi
					if w != nil {
						var left uint64
						im, left = w(a)
						b = min(hi, a+left)
					}
					if err := convertChunk(from, to, src[a*srcRow:b*srcRow], dst[a*dstRow:b*dstRow], f32[:(b-a)*ncols], im, ncols, b-a); err != nil {
						errs[i] = err
						failed.Store(true)
						return
					}
					a = b
				}
			}
		}(i)
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// convertChunk: to f32 (ggml's to_float) in f32, then ggml_quantize_chunk
// with the importance weights im (nil: none) straight into dst, through
// the C ABI; bad input (a non-finite value for a quantized type) is the
// library's error.
func convertChunk(from, to gguf.TensorType, src, dst []byte, f32, im []float32, ncols, rows uint64) error {
	if err := backend.ConvertInto(f32, src, uint32(from)); err != nil {
		return err
	}
	n, err := backend.QuantizeInto(dst, uint32(to), f32, im, ncols, rows)
	if err != nil {
		return err
	}
	if n != len(dst) {
		return fmt.Errorf("quantized %d bytes, expected %d", n, len(dst))
	}
	return nil
}
