package backend

import (
	"bytes"
	"math"
	"strings"
	"testing"
)

// QuantizeChunks gives, whatever the threads and chunk rows, the bytes of
// ConvertInto and QuantizeInto row by row, each row with its expert's
// importance weights (a slab that starts within the tensor), and reports
// bad input as an error.
func TestQuantizeChunksMatchesRowByRow(t *testing.T) {
	const (
		ncols     = 256
		rows      = 37
		perExpert = 10
		first     = 3 // the slab's first row in the tensor
		f16, q4K  = 1, 12
	)
	values := quantValues(7, ncols*rows)
	src, err := quantizeAll(f16, values, ncols, rows)
	if err != nil {
		t.Fatal(err)
	}
	experts := (first+rows-1)/perExpert + 1
	imatrix := quantValues(11, ncols*experts)
	for i := range imatrix {
		imatrix[i] = float32(math.Abs(float64(imatrix[i]))) + 0.01
	}
	for _, im := range [][]float32{nil, imatrix} {
		// row by row
		dstRow := 144 * ncols / 256
		want := make([]byte, rows*dstRow)
		f32 := make([]float32, ncols)
		for r := 0; r < rows; r++ {
			if err := ConvertInto(f32, src[r*2*ncols:(r+1)*2*ncols], f16); err != nil {
				t.Fatal(err)
			}
			var w []float32
			if im != nil {
				e := (first + r) / perExpert
				w = im[e*ncols : (e+1)*ncols]
			}
			if _, err := QuantizeInto(want[r*dstRow:(r+1)*dstRow], q4K, f32, w, ncols, 1); err != nil {
				t.Fatal(err)
			}
		}
		for _, threads := range []int{1, 2, 3} {
			for _, chunk := range []uint64{1, 4, 7, 100} {
				got := make([]byte, len(want))
				if err := QuantizeChunks(f16, q4K, src, got, ncols, rows, chunk, threads, im, perExpert, first); err != nil {
					t.Fatalf("threads %d chunk %d: %v", threads, chunk, err)
				}
				if !bytes.Equal(got, want) {
					t.Errorf("imatrix %v, threads %d, chunk %d: bytes differ from row by row", im != nil, threads, chunk)
				}
			}
		}
	}

	// errors, not panics: a NaN for a quantized type, a type with no
	// conversion, too few importance weights
	bad := append([]float32(nil), values...)
	bad[5*ncols+3] = float32(math.NaN())
	badSrc, err := quantizeAll(f16, bad, ncols, rows)
	if err != nil {
		t.Fatal(err)
	}
	dst := make([]byte, rows*144)
	for _, c := range []struct {
		from uint32
		src  []byte
		im   []float32
		want string
	}{
		{f16, badSrc, nil, "finite"},
		{24 /* I8 */, src, nil, "unsupported quantization format"},
		{f16, src, imatrix[:ncols], "importance weights"},
	} {
		err := QuantizeChunks(c.from, q4K, c.src, dst, ncols, rows, 4, 2, c.im, perExpert, first)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("from %d: got %v, want an error with %q", c.from, err, c.want)
		}
	}
}

// quantizeAll: rows rows of ncols values of v as type typ.
func quantizeAll(typ uint32, v []float32, ncols, rows uint64) ([]byte, error) {
	size, err := quantizedSize(typ, ncols, rows)
	if err != nil {
		return nil, err
	}
	out := make([]byte, size)
	_, qerr := QuantizeInto(out, typ, v, nil, ncols, rows)
	if qerr != nil {
		return nil, qerr
	}
	return out, nil
}

// Slabs submitted ahead to one pool come out as each alone; a failing
// slab fails, and stops the ones after it (each of those fails or is
// whole), not the ones before.
func TestQuantizePoolJobsInTurn(t *testing.T) {
	const (
		ncols, rows = 512, 40
		f16, q8     = 1, 8
	)
	dstRow := 34 * ncols / 32
	good, err := quantizeAll(f16, quantValues(3, ncols*rows), ncols, rows)
	if err != nil {
		t.Fatal(err)
	}
	want := make([]byte, rows*dstRow)
	if err := QuantizeChunks(f16, q8, good, want, ncols, rows, 3, 1, nil, 1, 0); err != nil {
		t.Fatal(err)
	}
	nan := quantValues(3, ncols*rows)
	nan[17*ncols] = float32(math.NaN())
	bad, err := quantizeAll(f16, nan, ncols, rows)
	if err != nil {
		t.Fatal(err)
	}
	p := NewQuantizePool(3)
	defer p.Close()
	var jobs []*QuantizeJob
	var dsts [][]byte
	for i := 0; i < 6; i++ {
		src := good
		if i == 4 {
			src = bad
		}
		dst := make([]byte, len(want))
		dsts = append(dsts, dst)
		jobs = append(jobs, p.Submit(f16, q8, src, dst, ncols, rows, 3, nil, 1, 0))
	}
	for i, j := range jobs {
		err := j.Wait()
		switch {
		case i < 4 && (err != nil || !bytes.Equal(dsts[i], want)):
			t.Errorf("slab %d: %v, or bytes differ", i, err)
		case i == 4 && (err == nil || !strings.Contains(err.Error(), "finite")):
			t.Errorf("slab 4 (a NaN): got %v", err)
		case i > 4 && err == nil && !bytes.Equal(dsts[i], want):
			t.Errorf("slab %d: no error, but its bytes differ", i)
		}
	}
}
