// Command loadbench measures how fast a model loads from the page cache,
// next to a plain sequential read of the same file in the same run.
//
// It writes (once) a deterministic llama-shaped GGUF of about 1.2 GiB
// (F16 attention and embedding, Q8_0 feed-forward) into
// .cache/loadbench/, reads it once to warm the page cache, then times,
// each -n times: a sequential read of the whole file into a reused 8 MiB
// buffer; ml.NewBackend + Load (default options: CPU weights may be
// repacked); and NewWithOptions(WithoutRepacking()) + Load (plain CPU
// buffers). Run from go/: `go run ./ml/backend/loadbench` (or `make
// bench-load` from the repository root).
package main

import (
	"context"
	"encoding/binary"
	"flag"
	"fmt"
	"io"
	"log"
	"os"
	"path/filepath"
	"sort"
	"syscall"
	"time"

	"ggmlrs/gguf"
	"ggmlrs/ml"
	"ggmlrs/ml/backend"
)

const (
	nEmbd   = 2048
	nFF     = 5632
	nVocab  = 32000
	nBlocks = 16
)

func main() {
	path := flag.String("model", "../.cache/loadbench/llama-1g.gguf", "model path (written when missing)")
	runs := flag.Int("n", 3, "repetitions of each measurement")
	threads := flag.Int("t", 0, "NumThreads (0: the backend's default)")
	only := flag.Int("only", -1, "run only this case (0 sequential, 1 default load, 2 without repacking, 3 fresh-memory read), for profiling")
	flag.Parse()

	if _, err := os.Stat(*path); err != nil {
		if err := writeModel(*path); err != nil {
			log.Fatal(err)
		}
	}
	st, err := os.Stat(*path)
	if err != nil {
		log.Fatal(err)
	}
	size := st.Size()
	fmt.Printf("model %s: %d bytes (%.2f GiB)\n", *path, size, float64(size)/(1<<30))

	buf := make([]byte, 8<<20)
	if err := seqRead(*path, buf); err != nil { // warm the page cache
		log.Fatal(err)
	}

	params := ml.BackendParams{AllocMemory: true, NumThreads: *threads}
	cases := []struct {
		name string
		run  func() error
	}{
		{"sequential read (8 MiB chunks)", func() error { return seqRead(*path, buf) }},
		{"NewBackend + Load (default, repacking)", func() error {
			b, err := ml.NewBackend(*path, params)
			if err != nil {
				return err
			}
			defer b.Close()
			return b.Load(context.Background(), nil)
		}},
		{"NewWithOptions(WithoutRepacking) + Load", func() error {
			b, err := backend.NewWithOptions(*path, params, backend.WithoutRepacking())
			if err != nil {
				return err
			}
			defer b.Close()
			return b.Load(context.Background(), nil)
		}},
		// What Load cannot avoid with fresh buffers: the kernel faults in
		// and zeroes every destination page during the copy.
		{"sequential read into fresh memory", func() error { return freshRead(*path, size) }},
	}
	best := make([]float64, len(cases))
	for i, c := range cases {
		if *only >= 0 && i != *only {
			continue
		}
		var gbs []float64
		for r := 0; r < *runs; r++ {
			start := time.Now()
			if err := c.run(); err != nil {
				log.Fatalf("%s: %v", c.name, err)
			}
			gbs = append(gbs, float64(size)/time.Since(start).Seconds()/1e9)
		}
		sort.Float64s(gbs)
		best[i] = gbs[len(gbs)/2]
		fmt.Printf("%-42s median %6.2f GB/s  (runs:", c.name, best[i])
		for _, g := range gbs {
			fmt.Printf(" %.2f", g)
		}
		fmt.Println(")")
	}
	if *only >= 0 {
		return
	}
	fmt.Printf("load/sequential: default %.2f, without repacking %.2f (fresh-memory read/sequential %.2f)\n",
		best[1]/best[0], best[2]/best[0], best[3]/best[0])
}

func seqRead(path string, buf []byte) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	for {
		_, err := f.Read(buf)
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
	}
}

// freshRead reads the whole file into newly mapped anonymous memory, as a
// load into freshly allocated weight buffers does.
func freshRead(path string, size int64) error {
	mem, err := syscall.Mmap(-1, 0, int(size), syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_PRIVATE|syscall.MAP_ANON)
	if err != nil {
		return err
	}
	defer syscall.Munmap(mem)
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	_, err = io.ReadFull(f, mem)
	return err
}

// rng is a deterministic xorshift64* generator.
type rng uint64

func (r *rng) next() uint64 {
	x := uint64(*r)
	x ^= x >> 12
	x ^= x << 25
	x ^= x >> 27
	*r = rng(x)
	return x * 2685821657736338717
}

// f16Data is n small random F16 values (|x| < 0.125).
func f16Data(r *rng, n int) []byte {
	b := make([]byte, 2*n)
	for i := 0; i < n; i += 4 {
		v := r.next()
		for j := 0; j < 4 && i+j < n; j++ {
			h := uint16(v>>(16*j))&0x83ff | 0x2c00 // sign, mantissa; exponent 2^-4
			binary.LittleEndian.PutUint16(b[2*(i+j):], h)
		}
	}
	return b
}

// q8Data is n Q8_0 weights: blocks of a small F16 scale and 32 random int8.
func q8Data(r *rng, n int) []byte {
	blocks := n / 32
	b := make([]byte, 34*blocks)
	for k := 0; k < blocks; k++ {
		o := 34 * k
		binary.LittleEndian.PutUint16(b[o:], gguf.Float16(1.0/1024))
		for j := 0; j < 32; j += 8 {
			binary.LittleEndian.PutUint64(b[o+2+j:], r.next())
		}
	}
	return b
}

func writeModel(path string) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	fmt.Printf("writing %s ...\n", path)
	b := gguf.NewBuilder()
	for _, kv := range []gguf.KV{
		{Key: "general.architecture", Value: "llama"},
		{Key: "general.name", Value: "loadbench"},
		{Key: "llama.block_count", Value: uint32(nBlocks)},
		{Key: "llama.context_length", Value: uint32(4096)},
		{Key: "llama.embedding_length", Value: uint32(nEmbd)},
		{Key: "llama.feed_forward_length", Value: uint32(nFF)},
		{Key: "llama.attention.head_count", Value: uint32(16)},
		{Key: "llama.attention.head_count_kv", Value: uint32(16)},
		{Key: "llama.attention.layer_norm_rms_epsilon", Value: float32(1e-5)},
	} {
		if err := b.Add(kv.Key, kv.Value); err != nil {
			return err
		}
	}
	r := rng(0x9e3779b97f4a7c15)
	add := func(name string, typ gguf.TensorType, shape ...uint64) error {
		n := 1
		for _, d := range shape {
			n *= int(d)
		}
		var data []byte
		switch typ {
		case gguf.TensorF16:
			data = f16Data(&r, n)
		case gguf.TensorQ8_0:
			data = q8Data(&r, n)
		case gguf.TensorF32:
			data = make([]byte, 4*n)
			for i := 0; i < n; i++ {
				binary.LittleEndian.PutUint32(data[4*i:], 0x3f800000) // 1.0
			}
		}
		return b.AddTensor(name, typ, shape, data)
	}
	type spec struct {
		name  string
		typ   gguf.TensorType
		shape []uint64
	}
	specs := []spec{{"token_embd.weight", gguf.TensorF16, []uint64{nEmbd, nVocab}}}
	for l := 0; l < nBlocks; l++ {
		p := fmt.Sprintf("blk.%d.", l)
		specs = append(specs,
			spec{p + "attn_norm.weight", gguf.TensorF32, []uint64{nEmbd}},
			spec{p + "attn_q.weight", gguf.TensorF16, []uint64{nEmbd, nEmbd}},
			spec{p + "attn_k.weight", gguf.TensorF16, []uint64{nEmbd, nEmbd}},
			spec{p + "attn_v.weight", gguf.TensorF16, []uint64{nEmbd, nEmbd}},
			spec{p + "attn_output.weight", gguf.TensorF16, []uint64{nEmbd, nEmbd}},
			spec{p + "ffn_norm.weight", gguf.TensorF32, []uint64{nEmbd}},
			spec{p + "ffn_gate.weight", gguf.TensorQ8_0, []uint64{nEmbd, nFF}},
			spec{p + "ffn_up.weight", gguf.TensorQ8_0, []uint64{nEmbd, nFF}},
			spec{p + "ffn_down.weight", gguf.TensorQ8_0, []uint64{nFF, nEmbd}},
		)
	}
	specs = append(specs,
		spec{"output_norm.weight", gguf.TensorF32, []uint64{nEmbd}},
		spec{"output.weight", gguf.TensorQ8_0, []uint64{nEmbd, nVocab}},
	)
	for _, s := range specs {
		if err := add(s.name, s.typ, s.shape...); err != nil {
			return err
		}
	}
	return b.WriteFile(path)
}
