package quantize

import (
	"github.com/ggml-rs/ggml-rs/go/ml/backend"
)

// slabElements bounds the f32 values of one slab of rows (64 MiB).
const slabElements = 16 << 20

// quantizeTensor queues the conversion of a F32/F16/BF16 tensor at
// offset off of src to its output type, a slab of rows at a time, on the
// pool's workers, each slab to be written by snk once it is done. It
// returns the tensor's output size without waiting: the workers go from
// one slab to the next, and from one tensor to the next, without
// stopping (a quantization error comes back from the sink, naming the
// tensor). Rows are quantized independently (ggml_quantize_chunk), so
// the bytes do not depend on the split.
func quantizeTensor(snk *sink, pool *backend.QuantizePool, src *source, off uint64, it item) (uint64, error) {
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
	// each expert (Shape[1] rows) has its own Shape[0] importance weights
	perExpert := uint64(1)
	if it.imatrix != nil && len(it.in.Shape) > 1 {
		perExpert = it.in.Shape[1]
	}
	chunk := max(1, chunkElements/ncols)
	slabRows := max(1, slabElements/ncols)
	var written uint64
	for r := uint64(0); r < nrows; r += slabRows {
		rows := min(slabRows, nrows-r)
		in, err := src.bytes(off+r*srcRow, rows*srcRow)
		if err != nil {
			return written, err
		}
		dst := snk.buffer(int(rows * dstRow))
		job := pool.Submit(uint32(it.in.Type), uint32(it.out.Type), in, dst, ncols, rows, chunk, it.imatrix, perExpert, r)
		if err := snk.sendJob(sinkJob{data: dst, lent: true, job: job, tensor: it.in.Name}); err != nil {
			return written, err
		}
		written += uint64(len(dst))
		if !src.mapped() {
			// the next read reuses the buffer in is
			<-job.Done()
		}
	}
	return written, nil
}

// chunkElements: the values a worker takes at a time (llama.cpp's
// chunk_size, rounded to whole rows; fewer at the end of a slab).
const chunkElements = 32 * 512
